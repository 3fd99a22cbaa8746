"""Hostile uploads: the forged and abusive bundles the server must refuse without stalling.

Each builder takes the bytes of a genuine bundle (:mod:`leaderboard.client.pack`'s output) and
returns an upload as a hostile team would make it, with every checksum of the manifest consistent,
so that only the server's own limits and checks can stop it. The server's tests send each one to a
real server, and ``python -m leaderboard.tools.bench --attacks`` sends them beside genuine load.

:data:`ATTACKS` maps a name to ``(builder, status)``: the HTTP status the server answers with.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import tarfile
from collections.abc import Callable
from typing import Any

from leaderboard.core.bundle import MANIFEST, ROWS, SUBMISSION, trace_member

Builder = Callable[[bytes], bytes]


def unpack(data: bytes) -> dict[str, bytes]:
    """The members of a bundle packed by this benchmark (trusted input), in order."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _tar_header(name: str, size: int, kind: bytes = b"0", extra: bytes = b"") -> bytes:
    """A 512-byte tar header; ``extra`` fills the GNU fields from byte 345 on."""
    header = bytearray(512)
    header[0 : len(name)] = name.encode()
    header[100:108] = b"0000644\0"
    header[108:116] = b"0000000\0"
    header[116:124] = b"0000000\0"
    header[124:136] = f"{size:011o}\0".encode()
    header[136:148] = b"00000000000\0"
    header[156:157] = kind
    header[257:265] = b"ustar  \0"  # the GNU magic (sparse members are a GNU extension)
    header[345 : 345 + len(extra)] = extra
    header[148:156] = b" " * 8
    header[148:156] = f"{sum(header):06o}\0 ".encode()
    return bytes(header)


def _block(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def with_true_checksums(contents: dict[str, bytes]) -> dict[str, bytes]:
    """``contents`` with a manifest listing every other member's true sha256, as a forger who
    edits a member fixes them."""
    contents = dict(contents)
    manifest = json.loads(contents[MANIFEST])
    manifest["members"] = {
        name: hashlib.sha256(blob).hexdigest()
        for name, blob in contents.items()
        if name != MANIFEST
    }
    contents[MANIFEST] = json.dumps(manifest).encode()
    return contents


def seal(contents: dict[str, bytes], extra_members: bytes = b"") -> bytes:
    """A gzip'd tar of ``contents`` whose manifest lists every member's true sha256, followed
    by the raw tar blocks ``extra_members`` (hand-made headers tarfile cannot write)."""
    contents = with_true_checksums(contents)
    raw = io.BytesIO()
    for name, blob in contents.items():
        raw.write(_tar_header(name, len(blob)))
        raw.write(_block(blob))
    raw.write(extra_members)
    raw.write(bytes(1024))
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=0)


def with_submission(data: bytes, text: str) -> bytes:
    """``data`` with ``submission.yaml`` replaced by ``text``."""
    contents = unpack(data)
    contents[SUBMISSION] = text.encode()
    return seal(contents)


_FIELDS = "method: attack\nllm_tokens: 0\nwall_time_s: 1.0\n"


def yaml_alias_bomb(data: bytes, levels: int = 8, width: int = 10) -> bytes:
    """``code_url`` as a nest of YAML aliases: ``width ** levels`` leaves in a few hundred
    bytes (the billion-laughs pattern)."""
    names = [f"a{i}" for i in range(levels + 1)]
    nest = [f"&{names[0]} [{', '.join(['x'] * width)}]"]
    for i in range(1, levels + 1):
        nest.append(f"&{names[i]} [{', '.join([f'*{names[i - 1]}'] * width)}]")
    return with_submission(data, _FIELDS + f"code_url: [{', '.join(nest)}]\n")


def yaml_deep_nesting(data: bytes, depth: int = 30_000) -> bytes:
    """``description`` as a flow list nested ``depth`` deep."""
    return with_submission(data, _FIELDS + f"description: {'[' * depth}{']' * depth}\n")


def huge_integer(data: bytes, field: str = "llm_tokens", value: int = 2**70) -> bytes:
    """A self-reported integer past every database integer type."""
    fields = {"method": "attack", "llm_tokens": 0, "wall_time_s": 1.0, field: value}
    return with_submission(data, "".join(f"{k}: {v}\n" for k, v in fields.items()))


def huge_wall_time(data: bytes) -> bytes:
    """``wall_time_s: 1e308``: a 309-digit number on the page."""
    return with_submission(data, "method: attack\nllm_tokens: 0\nwall_time_s: 1.0e+308\n")


def spoofed_method(data: bytes) -> bytes:
    """A method name with a right-to-left override and a zero-width space: it renders as
    another method's name."""
    return with_submission(
        data, 'method: "oracle \\u202eelcaro\\u200b"\nllm_tokens: 0\nwall_time_s: 1.0\n'
    )


def sparse_members(data: bytes, members: int = 16, hole_mb: int = 63) -> bytes:
    """``members`` GNU sparse trace members, each one byte of data after a ``hole_mb`` MiB
    hole: a few hundred bytes of archive that a reader expands to ``members * hole_mb`` MiB."""
    real = hole_mb << 20
    blocks = []
    for i in range(members):
        # GNU fields: atime, ctime, offset, longnames, unused, then the first sparse entry
        # (offset, bytes) at 386, isextended at 482 and the real size at 483.
        extra = bytearray(150)
        extra[386 - 345 : 398 - 345] = f"{real - 1:011o}\0".encode()
        extra[398 - 345 : 410 - 345] = f"{1:011o}\0".encode()
        extra[483 - 345 : 495 - 345] = f"{real:011o}\0".encode()
        blocks.append(_tar_header(f"traces/sparse-{i}.json", 1, b"S", bytes(extra)))
        blocks.append(_block(b"}"))
    return seal(unpack(data), b"".join(blocks))


_JUNK_PARTS = ("[]", "[[]]", "{}", "[{}]")
# Each byte value stands for four parts chosen by its four pairs of bits.
_JUNK_BY_BYTE = tuple(
    ",".join(_JUNK_PARTS[(b >> shift) & 3] for shift in (0, 2, 4, 6)) for b in range(256)
)


def _random_junk(size: int, rng: random.Random) -> str:
    """About ``size`` bytes of JSON arrays of empty arrays and objects: tens of Python objects
    per byte once parsed, and hard to compress (random structure)."""
    chunks = [_JUNK_BY_BYTE[b] for b in rng.randbytes(max(1, size // 12))]
    return "[" + ",".join(chunks) + "]"


def _first_run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in rows if not r["reference"])


def json_expansion(data: bytes, megabytes: float = 12.0, seed: int = 0) -> bytes:
    """A row carrying an unknown field with ``megabytes`` MB of nested empty arrays and
    objects: about 4 million values, 300 MB of Python objects once parsed."""
    contents = unpack(data)
    rows = [json.loads(line) for line in contents[ROWS].decode().splitlines()]
    junk = _random_junk(int(megabytes * 1e6), random.Random(seed))
    lines = [json.dumps(r) for r in rows]
    index = rows.index(_first_run(rows))
    lines[index] = lines[index][:-1] + f', "notes": {junk}}}'
    contents[ROWS] = ("\n".join(lines) + "\n").encode()
    return seal(contents)


def duplicate_final(data: bytes) -> bytes:
    """A run trace whose ``final`` appears twice: a forged outcome first (every atom
    satisfied, success), the genuine one last, which a last-key-wins reader verifies and a
    first-key-wins reader believes."""
    contents = unpack(data)
    rows = [json.loads(line) for line in contents[ROWS].decode().splitlines()]
    name = trace_member(_first_run(rows)["key"])
    trace = json.loads(contents[name])
    forged = {**trace["final"], "satisfied": [True] * len(trace["checklist"]), "success": True}
    body = json.dumps(trace)
    contents[name] = ('{"final": ' + json.dumps(forged) + ", " + body[1:]).encode()
    return seal(contents)


# name -> (builder, the status the server answers with)
ATTACKS: dict[str, tuple[Builder, int]] = {
    "yaml alias bomb": (yaml_alias_bomb, 422),
    "yaml deep nesting": (yaml_deep_nesting, 422),
    "huge integer": (huge_integer, 422),
    "huge parameter count": (lambda d: huge_integer(d, "parameters", 2**64), 422),
    "huge wall time": (huge_wall_time, 422),
    "spoofed method": (spoofed_method, 422),
    "sparse members": (sparse_members, 400),
    "json expansion": (json_expansion, 413),
    "unknown row field": (lambda d: json_expansion(d, megabytes=0.001), 422),
    "duplicate final": (duplicate_final, 422),
}
