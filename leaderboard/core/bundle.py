"""The submission bundle: one track of a run, packed as a gzip'd tar, and read back safely.

Members (no others; a ``traces`` directory entry is tolerated):

* ``manifest.json``: ``format``, ``suite``, ``suite_version``, ``track`` (``n_agents``, ``comm``,
  ``observability``, ``action_level``), ``challenge`` (id or null), ``baseline``, ``members``:
  the sha256 of every other member, and optionally the run's ``code_version`` and
  ``config_hash`` (which the server cannot check and does not keep);
* ``episodes.jsonl``: the run's rows of the track (run and reference episodes), one per line;
* ``traces/<row key, "/" replaced by "__">.json``: the trace of every row;
* ``submission.yaml``: what the board shows of the method (:class:`Submission`).

:func:`read_bundle` reads an upload as a stream and never writes it out
(:mod:`leaderboard.core.archive`: size limits, safe names), then checks every checksum and field.
Every parse is bounded before it starts: the JSON members' values are counted against
``Limits.max_json_values`` before any is parsed, and ``submission.yaml`` is read without
anchors or aliases and at most :data:`YAML_MAX_DEPTH` deep. Every object has a closed set of
fields (an unknown one is refused, named), no JSON object may repeat a key, every number has a
range, and a refusal never formats more than a few dozen characters of the offending value.
Refusals raise :class:`BundleError` with an HTTP status and the field path.

:func:`stored_form` is what the server keeps of an accepted bundle: only what it verifies
(fields about the run that cannot be checked, such as the code version or a row's wall time,
are dropped).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
import unicodedata
from dataclasses import asdict, dataclass, field, fields
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import yaml

from benchmark.metrics.episode import METRIC_NAMES
from leaderboard.core.archive import BundleError, Limits, read_members
from leaderboard.core.tracks import Track
from leaderboard.core.untrusted import (
    closed,
    fail,
    in_range,
    json_values,
    load_yaml,
    one_line,
    parse_json,
    require,
    shown,
)

BUNDLE_FORMAT = 1
MANIFEST = "manifest.json"
ROWS = "episodes.jsonl"
SUBMISSION = "submission.yaml"
TRACES = "traces"
_TRACE_NAME = re.compile(r"traces/[A-Za-z0-9._:+-]{1,200}\.json")
_SHA256 = re.compile(r"[0-9a-f]{64}")
SUBMISSION_MAX_BYTES = 65536  # submission.yaml holds a few short fields
YAML_MAX_DEPTH = 8  # submission.yaml is a flat mapping of scalars; 8 levels is generous
# Self-reported figures of submission.yaml: (lowest, highest).
PARAMETERS_RANGE = (0, 10**13)  # ten trillion parameters
LLM_TOKENS_RANGE = (0, 10**15)
WALL_TIME_RANGE = (0.0, 1e8)  # seconds: about three years
# A team's own statistics in a row (``llm/tokens_in``, ``plan/coverage``; a mixed team's under
# its member's place, ``member1/llm/tokens_in``): numbers, reported by its agents, not verified,
# and not kept by the server.
_STAT_NAME = re.compile(r"(member[0-9]{1,3}/)?[a-z][a-z0-9_]{0,31}/[a-z][a-z0-9_]{0,63}")
MAX_STATS = 64


def trace_member(key: str) -> str:
    """The bundle member holding the trace of the row with ``key``."""
    return f"{TRACES}/{key.replace('/', '__')}.json"


def load_submission_yaml(data: bytes) -> Any:
    """Parse ``submission.yaml`` without anchors or aliases and at most YAML_MAX_DEPTH deep;
    BundleError (422 naming the file, 413 past SUBMISSION_MAX_BYTES) on anything else."""
    if len(data) > SUBMISSION_MAX_BYTES:
        raise BundleError(413, SUBMISSION, f"larger than {SUBMISSION_MAX_BYTES} bytes")
    return load_yaml(data, SUBMISSION, YAML_MAX_DEPTH)


@dataclass(frozen=True)
class Submission:
    """``submission.yaml``: the method as the board shows it.

    Attributes:
        method: the method's name (at most 100 characters, one line).
        description: what it does (at most 2000 characters).
        model: the model it runs, if any (at most 200 characters, one line).
        parameters: the model's parameter count, if known (0 to 10^13).
        code_url: an http(s) link to the code.
        paper_url: an http(s) link to the paper.
        llm_tokens: LLM tokens the submitted episodes used (prompt + generated), as reported
            (0 to 10^15).
        wall_time_s: wall time the submitted episodes took, seconds, as reported (0 to 10^8).

    One-line fields refuse control characters and Unicode format characters (category Cf:
    bidirectional overrides, zero-width spaces), which can make one name render as another.
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
        where = f"{SUBMISSION}."
        for name, limit in (("method", 100), ("description", 2000), ("model", 200)):
            value = getattr(self, name)
            if value is None and name == "model":
                continue
            if not isinstance(value, str) or len(value) > limit:
                raise fail(
                    where + name,
                    f"expected a string of at most {limit} characters, got {shown(value)}",
                )
            if name != "description":
                one_line(value, where + name)
        if not self.method.strip():
            raise fail(where + "method", "must not be empty")
        in_range(self.llm_tokens, "integer", LLM_TOKENS_RANGE, where + "llm_tokens")
        in_range(self.wall_time_s, "number", WALL_TIME_RANGE, where + "wall_time_s")
        if self.parameters is not None:
            in_range(self.parameters, "integer", PARAMETERS_RANGE, where + "parameters")
        for name in ("code_url", "paper_url"):
            url = getattr(self, name)
            if url is None:
                continue
            parts = urlsplit(url) if isinstance(url, str) and len(url) <= 500 else None
            if (
                parts is None
                or parts.scheme not in ("http", "https")
                or not parts.netloc
                or re.search(r"[\s\x00-\x1f\x7f]", url)
                or any(unicodedata.category(c) == "Cf" for c in url)
            ):
                raise fail(where + name, f"expected an http(s) URL, got {shown(url)}")

    @classmethod
    def from_dict(cls, data: Any) -> Submission:
        """Validate a parsed ``submission.yaml``; BundleError names the field."""
        if not isinstance(data, dict):
            raise fail(SUBMISSION, f"expected a mapping of fields, got {shown(data)}")
        valid = [f.name for f in fields(cls)]
        unknown = sorted(shown(k, 40) for k in data if k not in valid)
        if unknown:
            raise fail(
                SUBMISSION, f"unknown field(s) [{', '.join(unknown[:5])}]; valid fields are {valid}"
            )
        for name in ("method", "llm_tokens", "wall_time_s"):
            if name not in data:
                raise fail(f"{SUBMISSION}.{name}", "missing")
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
        trace_members: member name -> the trace's bytes as uploaded (what :func:`stored_form`
            keeps).
    """

    manifest: dict[str, Any]
    rows: list[dict[str, Any]]
    traces: dict[str, dict[str, Any]]
    submission: dict[str, Any]
    sha256: str
    trace_members: dict[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def track(self) -> Track:
        return track_of_manifest(self.manifest)


def track_of_manifest(manifest: dict[str, Any]) -> Track:
    """The track a manifest names; BundleError naming the field when it names none."""
    track = manifest["track"]
    try:
        return Track(suite=manifest["suite"], suite_version=manifest["suite_version"], **track)
    except (TypeError, ValueError) as err:
        raise fail("manifest.track", str(err)) from err


_MANIFEST_FIELDS = {
    "format": "integer",
    "suite": "string",
    "suite_version": "string",
    "track": "object",
    "baseline": "string",
    "members": "object",
}
# About the run that made the bundle; the server cannot check them and does not keep them.
_MANIFEST_RUN_FIELDS = {"code_version": "string", "config_hash": "string"}
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
# Optional row fields the server checks: per-agent credit (recomputed with the metrics), a
# mixed team's members (against the trace), the partner of a focal-seat suite's episode (against
# the challenge), and the task's family, MAP-THOR level and version (against the server's task
# registry).
ROW_CHECKED_FIELDS = {
    "credited": "list",
    "members": "string map",  # a mixed team's member of each agent (against its trace)
    "partner": "string",  # the partner a challenge assigned (against the challenge)
    "family": "string",
    "level": "integer",
    "task_version": "integer",
}
# Optional row fields about the run (its bookkeeping and timing): not checkable, not kept.
ROW_RUN_FIELDS = {
    "attempts": "integer",
    "wall_s": "number",
    "trace_path": "string",
    "code_version": "string",
    "config_hash": "string",
    "task_file": "string",
    "task_sha256": "string",
}
_ROW_KNOWN = {**ROW_FIELDS, **ROW_CHECKED_FIELDS, **ROW_RUN_FIELDS}
_TRACE_FIELDS = {
    "format": "integer",
    "config": "object",
    "checklist": "list",
    "decisions": "list",
    "final": "object",
    "trace_hash": "string",
}
# The rest of a trace's body, as benchmark.env.trace records it (its hash covers them all).
_TRACE_BODY_FIELDS = {
    "versions": "object",
    "members": "string map",
    "instruction": "text",
    "initially_satisfied": "list",
    "skills": "list",
    "messages": "list",
    "ticks": "list",
    "atoms": "list",
}
_CONFIG_FIELDS = {
    "task": "string",
    "scene": "string",
    "n_agents": "integer",
    "seed": "integer",
    "options": "object",
}
_CONFIG_OPTIONAL = {"task_file": "object"}  # a task outside the registry (verify refuses it)


def _manifest(contents: dict[str, bytes]) -> dict[str, Any]:
    manifest = parse_json(contents[MANIFEST], MANIFEST)
    if not isinstance(manifest, dict):
        raise fail(MANIFEST, "expected a JSON object")
    require(manifest, _MANIFEST_FIELDS, "manifest.{}")
    if manifest["format"] != BUNDLE_FORMAT:
        raise fail("manifest.format", f"expected {BUNDLE_FORMAT}, got {shown(manifest['format'])}")
    if "challenge" not in manifest:
        raise fail("manifest.challenge", "missing (null when the suite has no challenge)")
    if manifest["challenge"] is not None and not isinstance(manifest["challenge"], str):
        raise fail("manifest.challenge", "expected a challenge id or null")
    closed(
        manifest,
        {**_MANIFEST_FIELDS, **_MANIFEST_RUN_FIELDS, "challenge": "string or null"},
        "manifest.{}",
    )
    require(manifest["track"], _TRACK_FIELDS, "manifest.track.{}")
    closed(manifest["track"], _TRACK_FIELDS, "manifest.track.{}")
    track_of_manifest(manifest)
    members = manifest["members"]
    for name, digest in members.items():
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise fail(f"manifest.members.{shown(name, 80)}", "expected a sha256 hex digest")
    present = set(contents) - {MANIFEST}
    for name in sorted(present - set(members)):
        raise fail("manifest.members", f"{name} is in the archive but not listed")
    for name in sorted(set(members) - present):
        raise fail(f"manifest.members.{shown(name, 80)}", "listed but not in the archive")
    for name in sorted(present):
        actual = hashlib.sha256(contents[name]).hexdigest()
        if actual != members[name]:
            raise fail(
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
        row = parse_json(line, where)
        if not isinstance(row, dict):
            raise fail(where, "expected a JSON object")
        require(row, ROW_FIELDS, f"{where}: field '{{}}'")
        closed(row, _ROW_KNOWN, f"{where}: field '{{}}'", _STAT_NAME, MAX_STATS)
        if row["status"] != "ok":
            raise fail(
                f"{where}: field 'status'",
                f"{shown(row['status'])}: only finished episodes (status ok) can be submitted",
            )
        rows.append(row)
    if not rows:
        raise fail(ROWS, "no episodes")
    return rows


def _trace(data: bytes, name: str) -> dict[str, Any]:
    trace = parse_json(data, name)
    if not isinstance(trace, dict):
        raise fail(name, "expected a JSON object")
    require(trace, _TRACE_FIELDS, f"{name}: field '{{}}'")
    closed(trace, {**_TRACE_FIELDS, **_TRACE_BODY_FIELDS}, f"{name}: field '{{}}'")
    require(trace["config"], _CONFIG_FIELDS, f"{name}: field 'config.{{}}'")
    closed(trace["config"], {**_CONFIG_FIELDS, **_CONFIG_OPTIONAL}, f"{name}: field 'config.{{}}'")
    return trace


def _countparse_json(contents: dict[str, bytes], limits: Limits) -> None:
    """Refuse (413) a bundle whose JSON members could hold more than
    ``limits.max_json_values`` values, before any is parsed."""
    values = sum(json_values(data) for name, data in contents.items() if name != SUBMISSION)
    if values > limits.max_json_values:
        raise BundleError(
            413,
            "archive",
            f"its JSON members hold up to {values} values, more than the limit of "
            f"{limits.max_json_values} (max_json_values)",
        )


def read_bundle(stream: BinaryIO, limits: Limits | None = None) -> Bundle:
    """Read and check a bundle from a binary stream, never writing it anywhere.

    Checks, in order: size limits while decompressing, member names and kinds, the JSON
    members' values against ``limits.max_json_values``, the manifest's fields and every
    member's sha256, the rows' fields, ``submission.yaml``, and that rows and traces pair up
    one to one. Raises BundleError (status, field path) on the first refusal.
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
            raise fail(name, "missing from the archive")
    _countparse_json(contents, limits)
    manifest = _manifest(contents)
    rows = _rows(contents[ROWS])
    submission = Submission.from_dict(load_submission_yaml(contents[SUBMISSION])).to_dict()
    traces: dict[str, dict[str, Any]] = {}
    trace_members: dict[str, bytes] = {}
    paired = set()
    for number, row in enumerate(rows, 1):
        name = trace_member(row["key"])
        if name not in contents:
            raise fail(f"{ROWS} line {number}", f"its trace {name} is not in the archive")
        paired.add(name)
        if row["key"] not in traces:
            traces[row["key"]] = _trace(contents[name], name)
            trace_members[name] = contents[name]
    for name in sorted(n for n in contents if n.startswith(f"{TRACES}/") and n not in paired):
        raise fail(name, f"no row of {ROWS} has this trace")
    return Bundle(manifest, rows, traces, submission, sha256, trace_members)


# --- writing ----------------------------------------------------------------------------------


def tar_bytes(members: dict[str, bytes]) -> bytes:
    """A gzip'd tar of ``members`` in order, with fixed times and owners (same input, same
    bytes)."""
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def seal(manifest: dict[str, Any], members: dict[str, bytes]) -> bytes:
    """The bundle of ``members`` (name -> content, manifest excluded) with ``manifest``, its
    ``members`` field set to their sha256."""
    manifest = {
        **manifest,
        "members": {name: hashlib.sha256(data).hexdigest() for name, data in members.items()},
    }
    return tar_bytes({MANIFEST: json.dumps(manifest, indent=1).encode(), **members})


# The row fields the server keeps: those it checks against its registry or recomputes.
STORED_ROW_FIELDS = (*ROW_FIELDS, *ROW_CHECKED_FIELDS)


def stored_form(bundle: Bundle) -> bytes:
    """The bundle the server keeps (and serves) for an accepted upload: the manifest without
    the run's code version and config hash, each row with only :data:`STORED_ROW_FIELDS`
    (the metrics still as submitted until the replays verify them), every trace as uploaded
    (the replay verifies all of it), and ``submission.yaml`` written again from its validated
    fields. The same content always gives the same bytes."""
    manifest = {k: v for k, v in bundle.manifest.items() if k not in _MANIFEST_RUN_FIELDS}
    manifest.pop("members", None)
    rows = "".join(
        json.dumps({k: r[k] for k in STORED_ROW_FIELDS if k in r}) + "\n" for r in bundle.rows
    )
    members = {
        ROWS: rows.encode(),
        **bundle.trace_members,
        SUBMISSION: yaml.safe_dump(bundle.submission, sort_keys=False).encode(),
    }
    return seal(manifest, members)
