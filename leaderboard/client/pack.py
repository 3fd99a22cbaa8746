"""Pack one track of a run directory into a submission bundle.

    python -m leaderboard.client.pack RUN_DIR -o sub.tar.gz [--method NAME] [--description TEXT]
        [--model NAME] [--parameters N] [--code-url URL] [--paper-url URL] [--track KEY]

The bundle holds every run episode of the track (a missing or failed one stops the packing,
named) and the one-agent references the run has for them; see :mod:`leaderboard.core.bundle`.
The LLM tokens and wall time of ``submission.yaml`` are summed from the packed rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from benchmark.env import EnvOptions
from benchmark.paths import write_atomically
from benchmark.results.challenge import Challenge, ChallengeError, load_challenge
from benchmark.results.run_dir import Run, read_run
from benchmark.results.suite import load_suite
from leaderboard.core.bundle import (
    BUNDLE_FORMAT,
    ROWS,
    SUBMISSION,
    Submission,
    seal,
    trace_member,
)
from leaderboard.core.tracks import Track, expected_episodes, tracks_of_run

# Env options a track leaves at their defaults (the track fixes comm, observability and action
# level; split, strict_agents and challenge belong to each episode).
_DEFAULTS = {
    k: v
    for k, v in asdict(EnvOptions()).items()
    if k not in ("comm", "observability", "action_level", "split", "strict_agents", "challenge")
}


_TOKENS = re.compile(r"(member[0-9]+/)?llm/tokens_(in|out)")


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _choose(run: Run, track: Track | None) -> Track:
    found = tracks_of_run(run)
    keys = sorted(t.key for t in found)
    if track is not None:
        if track not in found:
            raise ValueError(f"{run.root} holds no episode of track {track.key}; it holds {keys}")
        return track
    if len(found) != 1:
        if not found:
            raise ValueError(f"{run.root} holds no finished run episode")
        raise ValueError(f"{run.root} holds several tracks {keys}: choose one (--track KEY)")
    return next(iter(found))


def _challenge(run: Run, hidden: bool) -> Challenge | None:
    if not hidden:
        return None
    path = run.config.get("challenge")
    if not path:
        raise ValueError(f"suite {run.suite} hides its seeds, and {run.root} names no challenge")
    try:
        return load_challenge(path)
    except ChallengeError as err:
        raise ValueError(f"the run's challenge file cannot be used: {err}") from err


def _episodes(
    run: Run, track: Track, challenge: Challenge | None, baseline: str
) -> list[dict[str, Any]]:
    """The rows of every episode of ``track`` the run holds; ValueError naming the episodes
    that are missing, failed or were run under other options."""
    rows = {r["key"]: r for r in run.rows}
    out, problems = [], []
    for ref in expected_episodes(track, challenge):
        key = ref.key(baseline)
        row = rows.get(key)
        if row is None:
            if not ref.reference:
                problems.append(f"{key}: missing")
            continue
        if row.get("status") != "ok":
            problems.append(f"{key}: status {row.get('status')!r}")
            continue
        options = run.trace(row)["config"]["options"]
        used = {k: options.get(k) for k in track.options}
        if used != track.options:
            problems.append(f"{key}: run with {used}, the track has {track.options}")
            continue
        changed = {
            k: v for k, v in options.items() if k in _DEFAULTS and not _same(v, _DEFAULTS[k])
        }
        if changed:
            defaults = {k: _DEFAULTS[k] for k in changed}
            problems.append(f"{key}: run with {changed}; the board's tracks use {defaults}")
            continue
        out.append(row)
    if problems:
        raise ValueError(
            f"{run.root} cannot be submitted for track {track.key} (every episode of the track "
            "must have finished under the track's options): " + "; ".join(problems)
        )
    return out


def pack_run(
    run_dir: str | Path, out: str | Path, submission: dict[str, Any], track: Track | None = None
) -> Path:
    """Write the bundle of ``track`` (inferred when the run holds one) of a run directory.

    Args:
        run_dir: a directory written by ``python -m benchmark.run``.
        out: the ``.tar.gz`` to write (replaced atomically).
        submission: the descriptive fields of :class:`~leaderboard.core.bundle.Submission`
            (``method`` at least); ``llm_tokens`` and ``wall_time_s`` are summed from the rows.
    Returns:
        ``out``.
    Raises:
        ValueError: the run is incomplete for the track, holds several tracks and none was
            chosen, or a submission field is invalid (BundleError naming it).
    """
    run = read_run(run_dir)
    track = _choose(run, track)
    suite = load_suite(track.suite)
    challenge = _challenge(run, suite.hidden)
    baseline = run.config["baseline"]["name"]
    rows = _episodes(run, track, challenge, baseline)
    taken = sorted({"llm_tokens", "wall_time_s"} & set(submission))
    if taken:
        raise ValueError(f"submission fields {taken} are summed from the run's rows, not given")
    # a mixed team's LLM members report theirs as member<k>/llm/tokens_in
    tokens = sum(v for r in rows for k, v in r.items() if _TOKENS.fullmatch(k) and v)
    meta = Submission.from_dict(
        {
            **submission,
            "llm_tokens": round(tokens),
            "wall_time_s": round(sum(r.get("wall_s", 0.0) for r in rows), 3),
        }
    )
    members = {
        ROWS: "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode(),
        SUBMISSION: yaml.safe_dump(meta.to_dict(), sort_keys=False).encode(),
        **{trace_member(r["key"]): run.trace_bytes(r) for r in rows},
    }
    manifest = {
        "format": BUNDLE_FORMAT,
        "suite": track.suite,
        "suite_version": track.suite_version,
        "track": {
            k: getattr(track, k) for k in ("n_agents", "comm", "observability", "action_level")
        },
        "challenge": challenge.id if challenge is not None else None,
        "baseline": baseline,
        "code_version": run.manifest.get("code_version", ""),
        "config_hash": run.manifest.get("config_hash", ""),
    }
    data = seal(manifest, members)
    return write_atomically(Path(out), data)


def _model(run: Run) -> str | None:
    """The run's LLM, when its baseline has one (``llm.model``, else the backend's name)."""
    llm = run.config.get("llm") or {}
    if llm.get("backend", "none") == "none":
        return None
    return llm.get("model") or llm["backend"]


SUBMISSION_OPTIONS = ("method", "description", "model", "parameters", "code_url", "paper_url")


def describe(run: Run, **fields: Any) -> dict[str, Any]:
    """The ``submission.yaml`` fields of a run: those given, the run's baseline as the method
    and its LLM as the model when not given."""
    unknown = sorted(set(fields) - set(SUBMISSION_OPTIONS))
    if unknown:
        raise ValueError(f"unknown submission field(s) {unknown}; valid: {SUBMISSION_OPTIONS}")
    return {
        "method": fields.get("method") or run.config["baseline"]["name"],
        "description": fields.get("description") or "",
        "model": fields.get("model") or _model(run),
        "parameters": fields.get("parameters"),
        "code_url": fields.get("code_url"),
        "paper_url": fields.get("paper_url"),
    }


def add_submission_options(parser: argparse.ArgumentParser) -> None:
    """The command-line options of :func:`describe` (pack and submit share them)."""
    parser.add_argument("--method", help="method name (default: the run's baseline)")
    parser.add_argument("--description", default="", help="what the method does")
    parser.add_argument("--model", help="the model it runs (default: the run's LLM, if any)")
    parser.add_argument("--parameters", type=int, help="the model's parameter count")
    parser.add_argument("--code-url", help="http(s) link to the code")
    parser.add_argument("--paper-url", help="http(s) link to the paper")
    parser.add_argument("--track", help="track key, when the run holds several")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m leaderboard.client.pack",
        description="Pack one track of a run directory into a leaderboard submission bundle.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a directory of benchmark.run")
    parser.add_argument("-o", "--output", default="submission.tar.gz", help="bundle to write")
    add_submission_options(parser)
    args = parser.parse_args(argv)
    try:
        fields = {k: getattr(args, k) for k in SUBMISSION_OPTIONS}
        submission = describe(read_run(args.run_dir), **fields)
        track = Track.from_key(args.track) if args.track else None
        out = pack_run(args.run_dir, args.output, submission, track)
    except (ValueError, OSError) as err:
        print(f"pack: error: {err}", file=sys.stderr)
        return 2
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"wrote {out} ({out.stat().st_size} bytes, sha256 {digest})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
