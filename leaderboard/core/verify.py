"""Verification of a bundle: a pure function of the bundle and the server's own registry.

Every submitted number is ignored. For each episode the server builds the trace config itself
(:func:`expected_config`: the registered task, the scene the seed chooses or the challenge names,
the track's env options and the defaults for all others), refuses a trace whose config differs,
checks that the trace's body still hashes to its ``trace_hash``, replays every decision in the
simulator, and recomputes every per-episode metric with :mod:`benchmark.metrics.episode`. A reason
names the field and reads ``<field>: <submitted> != <server's>``.

On a suite with a focal seat (the cross-play and human tracks) the challenge assigns each run
episode's partner (:class:`Seats`): the trace's members must name the focal seat's player on
``agent_0`` and the assigned partner on every other agent, and the partner is re-run on its
agents during a second replay (:func:`benchmark.rollout.rerun_seats`, the team built by name with
:func:`benchmark.agents.make_team`): it must choose every one of their recorded decisions. So a
trace whose other agents were played by anything else is rejected, naming the agent, the tick and
both actions. What played ``agent_0`` is the submitter's claim, as a baseline's name always is:
on the human track, nothing here proves a person chose its actions.

    python -m leaderboard.core.verify sub.tar.gz [--challenge challenge.json] [--rate]

verifies a bundle file and prints the verdict; ``--rate`` also measures single-process replay
verification (episodes/s) beside the env's oracle episodes/s (``benchmark.bench env``).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmark.agents import make_team
from benchmark.env import make_env, replay, trace_hash
from benchmark.metrics.episode import episode_metrics
from benchmark.play.human import LABEL as HUMAN
from benchmark.results.challenge import Challenge, ChallengeError, Partner, load_challenge
from benchmark.results.suite import EpisodeRef, Suite, load_suite
from benchmark.rollout import rerun_seats
from benchmark.tasks.spec import load_task
from leaderboard.core.bundle import Bundle, BundleError, read_bundle
from leaderboard.core.tracks import Track, expected_episodes
from leaderboard.core.untrusted import shown


@dataclass(frozen=True)
class EpisodeCheck:
    """The verification of one episode.

    Attributes:
        key: the row key.
        ok: whether every check passed.
        reasons: what failed, each naming the field (``config.options.token_cap: 16 != 32``).
        metrics: the recomputed per-episode metrics (empty when not ok).
        trace_hash: the trace's recorded hash.
    """

    key: str
    ok: bool
    reasons: tuple[str, ...]
    metrics: dict[str, Any]
    trace_hash: str


@dataclass(frozen=True)
class Verdict:
    """The verification of a bundle.

    Attributes:
        ok: every bundle-level and episode check passed.
        track: the track the bundle is for.
        challenge: the id of the challenge it answers (hidden-seed suites), else None.
        reasons: bundle-level reasons (a missing, duplicated or foreign episode, ...).
        episodes: one check per episode (none when a bundle-level check failed).
        trace_hashes: the run episodes' trace hashes (to recognise a reproduction).
    """

    ok: bool
    track: Track
    challenge: str | None
    reasons: tuple[str, ...]
    episodes: tuple[EpisodeCheck, ...]
    trace_hashes: frozenset[str]

    @property
    def explanation(self) -> list[str]:
        """Every reason, the episode's key first for episode-level ones."""
        return [*self.reasons, *(f"{c.key}: {r}" for c in self.episodes for r in c.reasons)]


@dataclass(frozen=True)
class Seats:
    """Who must have played a run episode of a suite with a focal seat.

    Attributes:
        focal: the member label of ``agent_0``: ``human`` on a suite people play, else the
            submission's baseline.
        partner: the partner the challenge assigned to every other agent.
    """

    focal: str
    partner: Partner


@functools.lru_cache(maxsize=8192)
def _expected_json(ref: EpisodeRef, track: Track, challenge: str | None) -> str:
    # The same episodes come back in every submission to a track: build each env once.
    options = {**track.options, "split": ref.split, "challenge": challenge}
    if ref.reference:
        options["strict_agents"] = False  # as the runner builds a reference
    env = make_env(
        load_task(ref.task), scene=ref.scene, n_agents=ref.n_agents, seed=ref.seed, **options
    )
    env.reset(seed=ref.seed)
    return json.dumps(env.recorder.trace["config"])


def expected_config(ref: EpisodeRef, track: Track, challenge: str | None) -> dict[str, Any]:
    """The trace ``config`` of ``ref`` on ``track`` as the server builds it with ``make_env``
    (the track's options, the defaults for every other one); never read from a submission."""
    return json.loads(_expected_json(ref, track, challenge))


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _diff(path: str, got: Any, want: Any) -> list[str]:
    """Field-by-field differences of a submitted value from the expected one."""
    if not isinstance(want, dict) or not isinstance(got, dict):
        return [] if _same(got, want) else [f"{path}: {shown(got)} != {want!r}"]
    out = []
    for name in want:
        if name not in got:
            out.append(f"{path}.{name}: missing (expected {want[name]!r})")
        else:
            out += _diff(f"{path}.{name}", got[name], want[name])
    for name in got:
        if name == "task_file" and path == "config":
            out.append(
                f"config.task_file: the task comes from a file outside the registry "
                f"({shown(got[name])}); out-of-tree tasks are not eligible for the board"
            )
        elif name not in want:
            out.append(f"{path}.{shown(name, 40)}: not expected")
    return out


def _identity(ref: EpisodeRef, track: Track, row: dict[str, Any], trace: dict) -> list[str]:
    """The row says it is ``ref`` of ``track``, and agrees with its trace."""
    want = {
        "task": ref.task,
        "split": ref.split,
        "seed": ref.seed,
        "n_agents": ref.n_agents,
        "comm": ref.comm,
        "reference": ref.reference,
        "suite": track.suite,
        "suite_version": track.suite_version,
        "scene": ref.scene if ref.scene is not None else trace["config"].get("scene"),
        "trace_hash": trace.get("trace_hash"),
    }
    reasons = [
        f"{name}: {shown(row.get(name))} != {shown(value)}"
        for name, value in want.items()
        if not _same(row.get(name), value)
    ]
    if row.get("members") != trace.get("members"):  # a mixed team: who played each agent
        reasons.append(f"members: {shown(row.get('members'))} != the trace's")
    return reasons


def _checklist_difference(got: Any, want: list[dict[str, Any]]) -> str:
    """Where a trace's checklist departs from the one the server grounds for the episode."""
    if not isinstance(got, list) or len(got) != len(want):
        count = len(got) if isinstance(got, list) else shown(got)
        return f"checklist: {count} atoms != {len(want)} (the episode's checklist)"
    atom = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
    submitted = got[atom].get("key") if isinstance(got[atom], dict) else got[atom]
    return (
        f"checklist[{atom}]: {shown(submitted)} != {want[atom]['key']!r} (the trace's checklist "
        "is not the episode's)"
    )


def _seat_members(seats: Seats | None, row: dict[str, Any], trace: dict) -> list[str]:
    """The row's partner and the trace's members against the challenge's assignment."""
    assigned = seats.partner.label if seats is not None else None
    if "partner" in row and not _same(row["partner"], assigned):
        return [f"partner: {shown(row['partner'])} != {assigned!r} (the challenge's assignment)"]
    if seats is None:
        return []
    members = trace.get("members")
    if not isinstance(members, dict):
        return [
            f"members: the trace records none; agent_0 is {seats.focal!r} and every other "
            f"agent the assigned partner {assigned!r}"
        ]
    agents = [f"agent_{k}" for k in range(trace["config"]["n_agents"])]
    reasons = []
    for agent in agents:
        want, who = (
            (seats.focal, "agent_0's player")
            if agent == "agent_0"
            else (assigned, "the challenge's partner")
        )
        if not _same(members.get(agent), want):
            reasons.append(f"members.{agent}: {shown(members.get(agent))} != {want!r} ({who})")
    return reasons


def _rerun_partner(partner: Partner, trace: dict) -> list[str]:
    """Re-run the assigned partner on every agent but agent_0 of the trace."""
    team = make_team(partner.baseline, **partner.kwargs)
    agents = [f"agent_{k}" for k in range(1, trace["config"]["n_agents"])]
    try:
        departure = rerun_seats(trace, team, agents)
    # A forged trace can break the re-run in any way; that is a rejection, not a server error.
    except Exception as err:
        return [
            f"partner: {partner.label!r} cannot be re-run on the trace: {type(err).__name__}: {err}"
        ]
    finally:
        team.close()
    if departure is None:
        return []
    return [
        f"{departure.agent}: at tick {departure.tick} the assigned partner {partner.label!r} "
        f"chooses {shown(departure.rerun, 120)}, the trace has {shown(departure.recorded, 120)}"
    ]


def verify_episode(
    ref: EpisodeRef,
    track: Track,
    challenge: str | None,
    row: dict[str, Any],
    trace: dict,
    seats: Seats | None = None,
) -> EpisodeCheck:
    """Verify one episode (see the module docstring), with ``seats`` the assignment of a run
    episode of a suite with a focal seat; never raises on a bad trace."""
    key = str(row.get("key"))
    recorded = str(trace.get("trace_hash"))

    def rejected(reasons: list[str]) -> EpisodeCheck:
        return EpisodeCheck(key, False, tuple(reasons), {}, recorded)

    try:
        expected = expected_config(ref, track, challenge)
    except ValueError as err:
        return rejected([f"config: the server cannot build this episode: {err}"])
    reasons = _diff("config", trace.get("config"), expected)
    body = trace_hash(trace)
    if body != recorded:
        reasons.append(f"trace_hash: {recorded} != {body} (the hash of the trace's body)")
    reasons += _identity(ref, track, row, trace)
    if not reasons:
        reasons += _seat_members(seats, row, trace)
    if reasons:
        return rejected(reasons)
    try:
        result = replay(trace)
    # A forged trace can break the replay in any way; that is a rejection, not a server error.
    except Exception as err:
        return rejected([f"replay: the decisions do not replay: {type(err).__name__}: {err}"])
    if result.checklist != trace["checklist"]:
        return rejected([_checklist_difference(trace["checklist"], result.checklist)])
    if not result.checklist_matches:
        return rejected(
            [
                f"final.satisfied: {shown(trace['final'].get('satisfied'))} != replayed "
                f"{result.satisfied}"
            ]
        )
    if not result.hash_matches:
        return rejected(
            [f"trace_hash: {recorded} != {result.replayed_hash} (the replayed trace's)"]
        )
    if seats is not None:
        departed = _rerun_partner(seats.partner, trace)
        if departed:
            return rejected(departed)
    metrics = episode_metrics(trace)
    reasons = [
        f"{name}: {shown(row.get(name))} != {value!r}"
        for name, value in metrics.items()
        if name not in row or row[name] != value
    ]
    if reasons:
        return rejected(reasons)
    return EpisodeCheck(key, True, (), metrics, recorded)


def _registry_fields(row: dict[str, Any]) -> list[str]:
    """The row's optional task fields (family, level, version) against the server's registry."""
    task = load_task(row["task"])
    level = task.source.level if task.source is not None else None
    want = {"family": task.family, "level": level, "task_version": task.version}
    return [
        f"{name}: {shown(row[name])} != {want[name]!r} (the task registry's)"
        for name in want
        if name in row and not _same(row[name], want[name])
    ]


def _track_fields(track: Track, challenge: str | None, trace: dict[str, Any]) -> list[str]:
    """The trace config's team size and track options against the manifest's track (checked
    before any replay: a trace of another track is refused at once)."""
    options = trace["config"]["options"]
    want = {**track.options, "challenge": challenge}
    return [
        f"config.options.{name}: {shown(options.get(name))} != {value!r} (the manifest's track)"
        for name, value in want.items()
        if not _same(options.get(name), value)
    ]


def _match(
    bundle: Bundle, refs: list[EpisodeRef], hidden: bool, challenge: str | None
) -> tuple[list[str], list[Any]]:
    """Pair the bundle's rows with the track's episodes: (reasons, [(ref, row, trace)])."""
    baseline = bundle.manifest["baseline"]
    expected = set(refs)
    reasons: list[str] = []
    jobs = []
    keys: set[str] = set()
    matched: dict[EpisodeRef, str] = {}
    hashes: dict[str, str] = {}
    pinned = {r.task for r in refs if r.scene is not None}  # tasks whose scene is part of a cell
    for row in bundle.rows:
        key = row["key"]
        if key in keys:
            reasons.append(f"episode {key}: listed twice")
            continue
        keys.add(key)
        if row["baseline"] != baseline:
            reasons.append(
                f"episode {key}: baseline {shown(row['baseline'])} is not the manifest's "
                f"{shown(baseline)}"
            )
            continue
        ref = EpisodeRef.of_row(row, with_scene=hidden or row.get("task") in pinned)
        if ref not in expected:
            reasons.append(f"episode {key}: not an episode of this track")
            continue
        if ref in matched:
            reasons.append(f"episode {key}: the same episode as {matched[ref]}")
            continue
        if ref.key(baseline) != key:
            reasons.append(f"episode {key}: its fields say it is {ref.key(baseline)}")
            continue
        trace = bundle.traces.get(key)
        if trace is None:
            reasons.append(f"episode {key}: no trace")
            continue
        wrong = _registry_fields(row) + _track_fields(bundle.track, challenge, trace)
        if wrong:
            matched[ref] = key  # present, but wrong: not also reported missing
            reasons += [f"episode {key}: {w}" for w in wrong]
            continue
        digest = str(trace.get("trace_hash"))
        if digest in hashes:
            reasons.append(
                f"episode {key}: the same trace as {hashes[digest]} (trace_hash {digest})"
            )
            continue
        matched[ref] = key
        hashes[digest] = key
        jobs.append((ref, row, trace))
    reasons += [
        f"missing episode {r.key(baseline)}" for r in refs if not r.reference and r not in matched
    ]
    return reasons, jobs


@dataclass(frozen=True)
class Plan:
    """The bundle-level checks of a bundle, and the episode checks still to run.

    Attributes:
        track: the bundle's track.
        challenge: the id of the challenge it answers, else None.
        reasons: bundle-level reasons (empty when every bundle-level check passed).
        jobs: ``(ref, row, trace)`` per episode to replay (empty when ``reasons`` is not).
    """

    track: Track
    challenge: str | None
    reasons: tuple[str, ...]
    jobs: tuple[tuple[EpisodeRef, dict[str, Any], dict[str, Any]], ...]


def plan(bundle: Bundle, challenge: Challenge | None = None) -> Plan:
    """The cheap, bundle-level checks (no replay): the suite and version exist, the challenge
    is the manifest's, every run episode of the track is present (references are optional) and
    none is foreign, listed twice or a copy of another's trace. The server answers an upload
    that fails them at once (422); the replays run later, in the worker pool."""
    track = bundle.track
    claimed = bundle.manifest["challenge"]
    cid = challenge.id if challenge is not None else None

    def rejected(reasons: list[str]) -> Plan:
        return Plan(track, cid, tuple(reasons), ())

    try:
        suite = load_suite(track.suite)
        refs = expected_episodes(track, challenge)
    except ValueError as err:
        return rejected([f"track {track.key}: {err}"])
    if claimed != cid:
        return rejected([f"manifest.challenge: {shown(claimed)} != {cid!r}"])
    if not [r for r in refs if not r.reference]:
        return rejected(
            [f"track {track.key}: the suite has no episode for {track.n_agents} agents"]
        )
    baseline = bundle.manifest["baseline"]
    if suite.focal == "human" and baseline != HUMAN:
        return rejected(
            [f"manifest.baseline: {shown(baseline)} != {HUMAN!r} (people play suite {suite.name})"]
        )
    reasons, jobs = _match(bundle, refs, suite.hidden, cid)
    if reasons:
        return rejected(reasons)
    return Plan(track, cid, (), tuple(jobs))


def seats_of(
    suite: Suite, ref: EpisodeRef, challenge: Challenge | None, baseline: str
) -> Seats | None:
    """Who must have played ``ref`` (None: a suite without a focal seat, or a reference,
    which the focal seat's player plays alone)."""
    if suite.focal is None or ref.reference or challenge is None:
        return None
    partner = challenge.partner_of(ref.task, ref.scene, ref.seed, ref.n_agents)
    if partner is None:
        raise ValueError(f"challenge {challenge.id} assigns no partner to {ref}")
    return Seats(HUMAN if suite.focal == "human" else baseline, partner)


def verify_bundle(
    bundle: Bundle,
    challenge: Challenge | None = None,
    check: Callable[..., EpisodeCheck] = verify_episode,
    mapper: Callable[..., Any] = map,
) -> Verdict:
    """Verify a bundle against the server's registry (and, for a hidden-seed suite, the
    ``challenge`` it answers): :func:`plan`'s bundle-level checks, then
    ``mapper(check, refs, tracks, challenges, rows, traces, seats)`` (``map`` or a process
    pool's; ``seats`` of :func:`seats_of`) checks every episode. ``ok`` only when all pass."""
    checked = plan(bundle, challenge)
    track, cid = checked.track, checked.challenge
    if checked.reasons:
        return Verdict(False, track, cid, checked.reasons, (), frozenset())
    refs, rows, traces = zip(*checked.jobs, strict=True)
    n = len(refs)
    suite, baseline = load_suite(track.suite), bundle.manifest["baseline"]
    seats = [seats_of(suite, ref, challenge, baseline) for ref in refs]
    checks = tuple(mapper(check, refs, [track] * n, [cid] * n, rows, traces, seats))
    run_hashes = frozenset(
        c.trace_hash for c, ref in zip(checks, refs, strict=True) if not ref.reference
    )
    return Verdict(all(c.ok for c in checks), track, cid, (), checks, run_hashes)


def measure(bundle: Bundle, challenge: Challenge | None = None, repeats: int = 3) -> dict[str, Any]:
    """Single-process verification speed of ``bundle``: episodes/s with the expected configs
    still to build (``cold``, a track's first submission) and already built (best of
    ``repeats``, every later one), beside the rate at which the run played the same episodes
    (from the rows' reported ``wall_s``)."""
    _expected_json.cache_clear()
    start = time.perf_counter()
    verdict = verify_bundle(bundle, challenge)
    cold = time.perf_counter() - start
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        verify_bundle(bundle, challenge)
        warm.append(time.perf_counter() - start)
    n = len(verdict.episodes)
    return {
        "episodes": n,
        "verified": verdict.ok,
        "cold_episodes_per_s": round(n / cold, 1),
        "episodes_per_s": round(n / min(warm), 1),
        "run_episodes_per_s": round(
            n / max(sum(r.get("wall_s", 0.0) for r in bundle.rows), 1e-9), 1
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m leaderboard.core.verify",
        description="Verify a submission bundle by replaying every episode.",
    )
    parser.add_argument("bundle", metavar="BUNDLE", help="a .tar.gz of leaderboard.client.pack")
    parser.add_argument("--challenge", help="the challenge file it answers (hidden-seed suites)")
    parser.add_argument(
        "--rate", action="store_true", help="also measure verification and oracle episodes/s"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats for --rate")
    args = parser.parse_args(argv)
    try:
        challenge = load_challenge(args.challenge) if args.challenge else None
        with open(args.bundle, "rb") as stream:
            bundle = read_bundle(stream)
    except BundleError as err:
        print(f"rejected ({err.status}): {err}", file=sys.stderr)
        return 1
    except (ChallengeError, OSError) as err:
        print(f"verify: error: {err}", file=sys.stderr)
        return 2
    verdict = verify_bundle(bundle, challenge)
    state = "verified" if verdict.ok else "rejected"
    print(f"{state}: track {verdict.track.key}, {len(verdict.episodes)} episodes replayed")
    for reason in verdict.explanation:
        print(f"  {reason}")
    if args.rate:
        from benchmark.bench.env import bench_env

        figures = measure(bundle, challenge, args.repeats)
        oracle = bench_env(episodes=30, repeats=args.repeats)["oracle_episodes_per_s"]
        print(json.dumps({"bench": "verify", **figures, "oracle_episodes_per_s": oracle}))
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
