"""The submission bundle: one track of a run, packed as a gzip'd tar, and read back safely.

Members (no others; a ``traces`` directory entry is tolerated):

* ``manifest.json``: ``format``, ``suite``, ``suite_version``, ``track`` (``n_agents``, ``comm``,
  ``observability``, ``action_level``), ``challenge`` (id or null), ``baseline``,
  ``code_version``, ``config_hash``, and ``members``: the sha256 of every other member;
* ``episodes.jsonl``: the run's rows of the track (run and reference episodes), one per line;
* ``traces/<row key, "/" replaced by "__">.json``: the trace of every row;
* ``submission.yaml``: what the board shows of the method (:class:`Submission`).

:func:`read_bundle` reads an upload as a stream and never writes it out
(:mod:`leaderboard.archive`: size limits, safe names), then checks every checksum and field.
Refusals raise :class:`BundleError` with an HTTP status and the field path.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import yaml

from benchmark.metrics import METRIC_NAMES
from leaderboard.archive import BundleError, Limits, read_members
from leaderboard.tracks import Track

BUNDLE_FORMAT = 1
MANIFEST = "manifest.json"
ROWS = "episodes.jsonl"
SUBMISSION = "submission.yaml"
TRACES = "traces"
_TRACE_NAME = re.compile(r"traces/[A-Za-z0-9._:+-]{1,200}\.json")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SUBMISSION_MAX_BYTES = 65536  # submission.yaml holds a few short fields


def trace_member(key: str) -> str:
    """The bundle member holding the trace of the row with ``key``."""
    return f"{TRACES}/{key.replace('/', '__')}.json"


def _fail(field: str, message: str) -> BundleError:
    return BundleError(422, field, message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


_KINDS = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_int,
    "boolean": lambda v: isinstance(v, bool),
    "number or null": lambda v: v is None or _is_number(v),
    "object": lambda v: isinstance(v, dict),
    "list": lambda v: isinstance(v, list),
}


def _require(obj: dict[str, Any], spec: dict[str, str], path: str) -> None:
    """Every field of ``spec`` (name -> kind of :data:`_KINDS`) is in ``obj`` with its kind;
    ``path`` formats a field's name into its path (``"manifest.track.{}"``)."""
    for name, kind in spec.items():
        if name not in obj:
            raise _fail(path.format(name), "missing")
        if not _KINDS[kind](obj[name]):
            raise _fail(path.format(name), f"expected {kind}, got {obj[name]!r:.80}")


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise _fail(where, f"not valid JSON: {err}") from err


@dataclass(frozen=True)
class Submission:
    """``submission.yaml``: the method as the board shows it.

    Attributes:
        method: the method's name (at most 100 characters, one line).
        description: what it does (at most 2000 characters).
        model: the model it runs, if any (at most 200 characters, one line).
        parameters: the model's parameter count, if known.
        code_url: an http(s) link to the code.
        paper_url: an http(s) link to the paper.
        llm_tokens: LLM tokens the submitted episodes used (prompt + generated), as reported.
        wall_time_s: wall time the submitted episodes took, seconds, as reported.
    """

    method: str
    llm_tokens: int
    wall_time_s: float
    description: str = ""
    model: str | None = None
    parameters: int | None = None
    code_url: str | None = None
    paper_url: str | None = None

    def __post_init__(self) -> None:
        field = f"{SUBMISSION}."
        for name, limit in (("method", 100), ("description", 2000), ("model", 200)):
            value = getattr(self, name)
            if value is None and name == "model":
                continue
            if not isinstance(value, str) or len(value) > limit:
                raise _fail(field + name, f"expected a string of at most {limit} characters")
            if name != "description" and _CONTROL.search(value):
                raise _fail(field + name, "expected one line without control characters")
        if not self.method.strip():
            raise _fail(field + "method", "must not be empty")
        if self.parameters is not None and (not _is_int(self.parameters) or self.parameters < 0):
            raise _fail(field + "parameters", "expected a non-negative integer or null")
        if not _is_int(self.llm_tokens) or self.llm_tokens < 0:
            raise _fail(field + "llm_tokens", "expected a non-negative integer")
        if not _is_number(self.wall_time_s) or self.wall_time_s < 0:
            raise _fail(field + "wall_time_s", "expected a non-negative number of seconds")
        for name in ("code_url", "paper_url"):
            url = getattr(self, name)
            if url is None:
                continue
            parts = urlsplit(url) if isinstance(url, str) else None
            if (
                parts is None
                or parts.scheme not in ("http", "https")
                or not parts.netloc
                or len(url) > 500
                or re.search(r"[\s\x00-\x1f\x7f]", url)
            ):
                raise _fail(field + name, f"expected an http(s) URL, got {url!r:.80}")

    @classmethod
    def from_dict(cls, data: Any) -> Submission:
        """Validate a parsed ``submission.yaml``; BundleError names the field."""
        if not isinstance(data, dict):
            raise _fail(SUBMISSION, "expected a mapping of fields")
        valid = [f.name for f in fields(cls)]
        unknown = sorted(str(k) for k in data if k not in valid)
        if unknown:
            raise _fail(SUBMISSION, f"unknown field(s) {unknown}; valid fields are {valid}")
        for name in ("method", "llm_tokens", "wall_time_s"):
            if name not in data:
                raise _fail(f"{SUBMISSION}.{name}", "missing")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Bundle:
    """A bundle read and checked by :func:`read_bundle` (its numbers not yet verified).

    Attributes:
        manifest: ``manifest.json``.
        rows: ``episodes.jsonl``, in order.
        traces: row key -> its trace.
        submission: ``submission.yaml`` (the fields of :class:`Submission`).
        sha256: of the whole archive as uploaded (hex).
    """

    manifest: dict[str, Any]
    rows: list[dict[str, Any]]
    traces: dict[str, dict[str, Any]]
    submission: dict[str, Any]
    sha256: str

    @property
    def track(self) -> Track:
        return track_of_manifest(self.manifest)


def track_of_manifest(manifest: dict[str, Any]) -> Track:
    """The track a manifest names; BundleError naming the field when it names none."""
    track = manifest["track"]
    try:
        return Track(suite=manifest["suite"], suite_version=manifest["suite_version"], **track)
    except (TypeError, ValueError) as err:
        raise _fail("manifest.track", str(err)) from err


_MANIFEST_FIELDS = {
    "format": "integer",
    "suite": "string",
    "suite_version": "string",
    "track": "object",
    "baseline": "string",
    "code_version": "string",
    "config_hash": "string",
    "members": "object",
}
_TRACK_FIELDS = {
    "n_agents": "integer",
    "comm": "boolean",
    "observability": "string",
    "action_level": "string",
}
ROW_FIELDS = {
    "key": "string",
    "baseline": "string",
    "suite": "string",
    "suite_version": "string",
    "task": "string",
    "split": "string",
    "scene": "string",
    "seed": "integer",
    "n_agents": "integer",
    "comm": "boolean",
    "reference": "boolean",
    "status": "string",
    "trace_hash": "string",
    **dict.fromkeys(METRIC_NAMES, "number or null"),
}
_TRACE_FIELDS = {
    "format": "integer",
    "config": "object",
    "checklist": "list",
    "decisions": "list",
    "final": "object",
    "trace_hash": "string",
}
_CONFIG_FIELDS = {
    "task": "string",
    "scene": "string",
    "n_agents": "integer",
    "seed": "integer",
    "options": "object",
}


def _manifest(contents: dict[str, bytes]) -> dict[str, Any]:
    manifest = _json(contents[MANIFEST], MANIFEST)
    if not isinstance(manifest, dict):
        raise _fail(MANIFEST, "expected a JSON object")
    _require(manifest, _MANIFEST_FIELDS, "manifest.{}")
    if manifest["format"] != BUNDLE_FORMAT:
        raise _fail("manifest.format", f"expected {BUNDLE_FORMAT}, got {manifest['format']}")
    if "challenge" not in manifest:
        raise _fail("manifest.challenge", "missing (null when the suite has no challenge)")
    if manifest["challenge"] is not None and not isinstance(manifest["challenge"], str):
        raise _fail("manifest.challenge", "expected a challenge id or null")
    _require(manifest["track"], _TRACK_FIELDS, "manifest.track.{}")
    track_of_manifest(manifest)
    members = manifest["members"]
    for name, digest in members.items():
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise _fail(f"manifest.members.{name}", "expected a sha256 hex digest")
    present = set(contents) - {MANIFEST}
    for name in sorted(present - set(members)):
        raise _fail("manifest.members", f"{name} is in the archive but not listed")
    for name in sorted(set(members) - present):
        raise _fail(f"manifest.members.{name}", "listed but not in the archive")
    for name in sorted(present):
        actual = hashlib.sha256(contents[name]).hexdigest()
        if actual != members[name]:
            raise _fail(
                f"manifest.members.{name}",
                f"sha256 {members[name]} does not match the member's content ({actual})",
            )
    return manifest


def _rows(data: bytes) -> list[dict[str, Any]]:
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    rows = []
    for number, line in enumerate(lines, 1):
        where = f"{ROWS} line {number}"
        row = _json(line, where)
        if not isinstance(row, dict):
            raise _fail(where, "expected a JSON object")
        _require(row, ROW_FIELDS, f"{where}: field '{{}}'")
        if row["status"] != "ok":
            raise _fail(
                f"{where}: field 'status'",
                f"{row['status']!r}: only finished episodes (status ok) can be submitted",
            )
        rows.append(row)
    if not rows:
        raise _fail(ROWS, "no episodes")
    return rows


def _trace(data: bytes, name: str) -> dict[str, Any]:
    trace = _json(data, name)
    if not isinstance(trace, dict):
        raise _fail(name, "expected a JSON object")
    _require(trace, _TRACE_FIELDS, f"{name}: field '{{}}'")
    _require(trace["config"], _CONFIG_FIELDS, f"{name}: field 'config.{{}}'")
    return trace


def read_bundle(stream: BinaryIO, limits: Limits | None = None) -> Bundle:
    """Read and check a bundle from a binary stream, never writing it anywhere.

    Checks, in order: size limits while decompressing, member names and kinds, the manifest's
    fields and every member's sha256, the rows' fields, ``submission.yaml``, and that rows and
    traces pair up one to one. Raises BundleError (status, field path) on the first refusal.
    """
    limits = limits or Limits()
    contents, sha256 = read_members(
        stream,
        limits,
        lambda name: name in (MANIFEST, ROWS, SUBMISSION) or bool(_TRACE_NAME.fullmatch(name)),
        f"{MANIFEST}, {ROWS}, {SUBMISSION} and {TRACES}/<episode key>.json",
        frozenset({TRACES}),
    )
    for name in (MANIFEST, ROWS, SUBMISSION):
        if name not in contents:
            raise _fail(name, "missing from the archive")
    manifest = _manifest(contents)
    rows = _rows(contents[ROWS])
    if len(contents[SUBMISSION]) > SUBMISSION_MAX_BYTES:
        raise BundleError(413, SUBMISSION, f"larger than {SUBMISSION_MAX_BYTES} bytes")
    try:
        raw = yaml.safe_load(contents[SUBMISSION].decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise _fail(SUBMISSION, f"not valid YAML: {err}") from err
    submission = Submission.from_dict(raw).to_dict()
    traces: dict[str, dict[str, Any]] = {}
    paired = set()
    for number, row in enumerate(rows, 1):
        name = trace_member(row["key"])
        if name not in contents:
            raise _fail(f"{ROWS} line {number}", f"its trace {name} is not in the archive")
        paired.add(name)
        if row["key"] not in traces:
            traces[row["key"]] = _trace(contents[name], name)
    for name in sorted(n for n in contents if n.startswith(f"{TRACES}/") and n not in paired):
        raise _fail(name, f"no row of {ROWS} has this trace")
    return Bundle(manifest, rows, traces, submission, sha256)
