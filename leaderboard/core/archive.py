"""Reading an untrusted ``.tar.gz`` upload as a stream, under limits, never writing it out.

The gzip layer is decoded here rather than by ``tarfile``'s ``r|gz`` mode, so that no read,
however large a tar header claims to be, decompresses more than the limits allow: every byte
handed to ``tarfile`` (``r|``, a stream) is counted against the unpacked total and the
compression ratio. Only plain regular files with accepted names are kept; links, devices, FIFOs,
sparse and contiguous files (refused from their header, before any content is read), absolute
names, ``..``, unexpected names and duplicates are refused.
"""

from __future__ import annotations

import hashlib
import re
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import BinaryIO

# The ratio limit applies once this much is unpacked: a small archive of JSON and tar padding
# can compress better than any sane ratio without being a bomb.
RATIO_FLOOR_BYTES = 1 << 20
_CHUNK = 1 << 16
# The one member type read: a plain regular file (tarfile also counts contiguous and sparse
# files as regular; both are refused).
_PLAIN_FILE_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE)
_SPECIAL_KINDS = {
    tarfile.CHRTYPE: "a device or special file (character device)",
    tarfile.BLKTYPE: "a device or special file (block device)",
    tarfile.FIFOTYPE: "a device or special file (FIFO)",
    tarfile.CONTTYPE: "a contiguous file",
}


class BundleError(ValueError):
    """A bundle is refused.

    Attributes:
        status: the HTTP status to answer with: 413 (a size limit), 400 (not a safe archive of
            the expected members), 422 (a member's content is malformed or a field is missing).
        field: what was wrong, e.g. ``archive``, ``manifest.track.n_agents``,
            ``episodes.jsonl line 3: field 'SR'``.
    """

    def __init__(self, status: int, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.status = status
        self.field = field


@dataclass(frozen=True)
class Limits:
    """What a bundle may take (bytes unless said otherwise).

    Attributes:
        max_bytes: the compressed upload.
        max_unpacked_bytes: everything it decompresses to (tar headers included).
        max_member_bytes: one member.
        max_members: members of the archive.
        max_ratio: unpacked / compressed bytes (checked beyond ``RATIO_FLOOR_BYTES`` unpacked).
        max_json_values: JSON values (objects, arrays, keys and scalars) in all the bundle's
            JSON members together, counted before any is parsed: parsing holds at most about
            70 bytes per value (measured worst case, nested empty objects), so this bounds
            the memory of parsing, which the byte limits alone do not (a byte of ``[]`` is
            tens of bytes of Python objects).
    """

    max_bytes: int = 32 << 20
    max_unpacked_bytes: int = 64 << 20
    max_member_bytes: int = 16 << 20
    max_members: int = 20000
    max_ratio: float = 200.0
    max_json_values: int = 2_000_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"Limits.{f.name}={value!r}: expected a positive number")


class _Upload:
    """The compressed upload, read in chunks: counted against ``max_bytes`` and hashed."""

    def __init__(self, stream: BinaryIO, max_bytes: int) -> None:
        self.stream = stream
        self.max_bytes = max_bytes
        self.count = 0
        self.sha256 = hashlib.sha256()

    def read(self, size: int) -> bytes:
        data = self.stream.read(size)
        self.count += len(data)
        if self.count > self.max_bytes:
            raise BundleError(413, "archive", f"larger than {self.max_bytes} bytes")
        self.sha256.update(data)
        return data


class _Gunzip:
    """A file-like gzip decoder over an :class:`_Upload` that refuses decompression bombs: it
    never decompresses more than asked for, and counts every byte it hands on against
    ``max_unpacked_bytes`` and ``max_ratio`` (tar headers too, which ``tarfile`` reads whole)."""

    def __init__(self, upload: _Upload, limits: Limits) -> None:
        self.upload = upload
        self.limits = limits
        self.decoder = zlib.decompressobj(wbits=31)  # gzip only
        self.unpacked = 0

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            size = self.limits.max_unpacked_bytes + 1
        out: list[bytes] = []
        have = 0
        while have < size and not self.decoder.eof:
            chunk = self.decoder.unconsumed_tail or self.upload.read(_CHUNK)
            if not chunk:
                raise BundleError(400, "archive", "truncated: the gzip stream ends early")
            try:
                data = self.decoder.decompress(chunk, size - have)
            except zlib.error as err:
                raise BundleError(400, "archive", f"not a gzip'd tar archive: {err}") from err
            self._count(len(data))
            out.append(data)
            have += len(data)
        return b"".join(out)

    def _count(self, n: int) -> None:
        self.unpacked += n
        limit = self.limits.max_unpacked_bytes
        if self.unpacked > limit:
            raise BundleError(413, "archive", f"decompresses to more than {limit} bytes")
        ratio = self.unpacked / max(self.upload.count, 1)
        if self.unpacked > RATIO_FLOOR_BYTES and ratio > self.limits.max_ratio:
            raise BundleError(
                413,
                "archive",
                f"decompresses {ratio:.0f} times its size (limit {self.limits.max_ratio:g})",
            )

    def finish(self) -> None:
        """Decode to the end of the gzip stream (its checksum is checked there) and refuse
        bytes after it."""
        while not self.decoder.eof:
            if not self.read(_CHUNK) and not self.decoder.eof:
                raise BundleError(400, "archive", "truncated: the gzip stream ends early")
        if self.decoder.unused_data or self.upload.read(1):
            raise BundleError(400, "archive", "bytes after the end of the gzip stream")


def _member_name(
    info: tarfile.TarInfo, accept: Callable[[str], bool], expected: str, directories: frozenset[str]
) -> str | None:
    """The member's name when it is a regular file to read; None for a tolerated directory
    entry; BundleError for everything unsafe or unexpected."""
    name = info.name
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise BundleError(400, f"member {name!r}", "absolute path")
    if ".." in re.split(r"[/\\]", name):
        raise BundleError(400, f"member {name!r}", "'..' in the path")
    if info.issym() or info.islnk():
        kind = "symbolic" if info.issym() else "hard"
        raise BundleError(400, f"member {name!r}", f"a {kind} link (to {info.linkname!r})")
    if info.isdir():
        if name.rstrip("/") in directories:
            return None
        raise BundleError(400, f"member {name!r}", "unexpected directory")
    # Sparse members count as regular in tarfile, and their holes are never decompressed:
    # reading one allocates its whole declared size past every ratio check.
    if info.issparse():
        raise BundleError(400, f"member {name!r}", "a sparse file")
    if info.type not in _PLAIN_FILE_TYPES:
        kind = _SPECIAL_KINDS.get(info.type, f"a member of type {info.type!r}")
        raise BundleError(400, f"member {name!r}", f"{kind}; only regular files are read")
    if not accept(name):
        raise BundleError(400, f"member {name!r}", f"unexpected name; expected {expected}")
    return name


def read_members(
    stream: BinaryIO,
    limits: Limits,
    accept: Callable[[str], bool],
    expected: str,
    directories: frozenset[str] = frozenset(),
) -> tuple[dict[str, bytes], str]:
    """Every member's content by name, and the sha256 of the whole upload (hex).

    Args:
        stream: the upload, read once from where it stands.
        limits: what the upload may take.
        accept: whether a regular file's name is one the archive may hold.
        expected: the accepted names in words, for the refusal.
        directories: directory entries tolerated (and skipped).
    Raises:
        BundleError: 413 past a limit, 400 for anything else refused.
    """
    upload = _Upload(stream, limits.max_bytes)
    gunzip = _Gunzip(upload, limits)
    contents: dict[str, bytes] = {}
    declared = count = 0
    try:
        with tarfile.open(fileobj=gunzip, mode="r|") as tar:
            for info in tar:
                count += 1
                if count > limits.max_members:
                    raise BundleError(413, "archive", f"more than {limits.max_members} members")
                name = _member_name(info, accept, expected, directories)
                if name is None:
                    continue
                if name in contents:
                    raise BundleError(400, f"member {name!r}", "appears twice")
                if info.size > limits.max_member_bytes:
                    raise BundleError(
                        413, f"member {name!r}", f"larger than {limits.max_member_bytes} bytes"
                    )
                declared += info.size
                if declared > limits.max_unpacked_bytes:
                    raise BundleError(
                        413,
                        "archive",
                        f"members declare more than {limits.max_unpacked_bytes} bytes",
                    )
                member = tar.extractfile(info)
                contents[name] = member.read() if member is not None else b""
    except tarfile.TarError as err:
        raise BundleError(400, "archive", f"not a valid tar archive: {err}") from err
    gunzip.finish()
    return contents, upload.sha256.hexdigest()
