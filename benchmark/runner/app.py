"""The main job: evaluate a baseline on a suite and report task and collaboration metrics.

Called by ``python -m benchmark.run`` (Hydra). Builds the episode jobs, skips those the run
directory already holds, runs the rest inline or on Ray, records each row as it finishes, then
writes ``summary.md`` / ``summary.csv`` and prints the summary table.
"""

from __future__ import annotations

import itertools
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from benchmark.results.challenge import load_challenge
from benchmark.results.crossplay import (
    SWAPPED,
    crossplay_markdown,
    crossplay_members,
    parse_population,
    write_crossplay,
)
from benchmark.results.members import write_members
from benchmark.results.references import ReferenceJoin
from benchmark.results.run_dir import RunDirectory
from benchmark.results.suite import Suite, parse_suite, suite_episodes
from benchmark.results.summary import comm_deltas, summarize, write_summary
from benchmark.runner.config import RunConfig
from benchmark.runner.execute import ray_tmpdir, run_inline, run_on_ray
from benchmark.runner.jobs import Job
from benchmark.runner.loggers import MetricLoggers
from benchmark.tasks.spec import resolve_task, task_source


def _as_list(value: Any) -> list[Any] | None:
    if value is None:
        return None
    return list(value) if isinstance(value, list | tuple) or OmegaConf.is_list(value) else [value]


def run_suite(cfg: DictConfig) -> Suite:
    """The run's suite (:func:`benchmark.results.suite.parse_suite`, the board's parser too),
    with the run's ``seeds`` and ``n_agents`` overrides."""
    suite = parse_suite(
        OmegaConf.to_container(cfg.suite, resolve=True), f"suite {cfg.suite.name!r}"
    )
    if cfg.challenge and (cfg.seeds is not None or cfg.n_agents is not None):
        raise ValueError("a challenge fixes the episodes: do not set seeds or n_agents with it")
    return suite.with_overrides(seeds=_as_list(cfg.seeds), n_agents=_as_list(cfg.n_agents))


def build_jobs(cfg: DictConfig) -> list[Job]:
    """Every episode of the run (:func:`benchmark.results.suite.suite_episodes`, the list the
    leaderboard expects), the one-agent references included when ``reference`` is set. On a
    suite with a focal seat each run episode is a mixed team: the baseline on agent_0 and the
    partner the challenge assigns on the other agents (rows keep the baseline's name and say
    the ``partner``)."""
    if not cfg.suite.entries:
        raise ValueError(f"suite {cfg.suite.name!r} has no entries")
    suite = run_suite(cfg)
    if suite.focal == "human":
        raise ValueError(
            f"suite {suite.name!r}: people play agent_0 of its episodes; play each with "
            "python -m benchmark.play challenge=<file> episode=<k>"
        )
    if suite.focal is not None and cfg.get("partners"):
        raise ValueError(
            f"suite {suite.name!r}: its challenge assigns the partners; do not set partners"
        )
    baseline = cfg.baseline
    env_options = {**OmegaConf.to_container(baseline.env), **OmegaConf.to_container(cfg.env)}
    challenge = load_challenge(cfg.challenge) if cfg.challenge else None
    if challenge is not None:
        env_options["challenge"] = challenge.id
    team_kwargs = OmegaConf.to_container(baseline.kwargs, resolve=True)
    tasks = {e.task: resolve_task(e.task) for e in suite.entries}
    references = bool(cfg.reference and not cfg.reference_from)
    episodes = [
        ep
        for comm in _as_list(cfg.comm)
        for ep in suite_episodes(suite, bool(comm), challenge, references=references)
    ]
    for ep in episodes:
        task = tasks[ep.task]
        if ep.scene is not None and ep.scene not in task.candidate_scenes():
            raise ValueError(
                f"suite entry {ep.task}: scene {ep.scene!r} is not among the task's scenes "
                f"{task.candidate_scenes()}"
            )
        if not ep.reference and not task.min_agents <= ep.n_agents <= task.max_agents:
            raise ValueError(
                f"suite entry {ep.task}: n_agents={ep.n_agents} is outside the task's "
                f"range {task.min_agents}-{task.max_agents}"
            )
    partners = (
        parse_population(OmegaConf.to_container(cfg.partners, resolve=True))
        if cfg.get("partners")
        else []
    )
    jobs = []
    for ep in episodes:
        task = tasks[ep.task]
        source = task_source(task) or {"path": "", "sha256": ""}
        jobs.append(
            Job(
                task=task.id,
                split=ep.split,
                n_agents=ep.n_agents,
                seed=ep.seed,
                comm=ep.comm,
                baseline=baseline.name,
                team_kwargs=team_kwargs,
                env_options=env_options,
                reference=ep.reference,
                task_file=source["path"],
                task_sha256=source["sha256"],
                scene=ep.scene,
            )
        )
        selfplay = jobs[-1]
        if ep.reference or ep.n_agents < 2:
            continue
        assigned = challenge and challenge.partner_of(ep.task, ep.scene, ep.seed, ep.n_agents)
        if assigned:  # a focal seat: the team on agent_0, the assigned partner on the rest
            members = crossplay_members(baseline.name, team_kwargs, assigned.member())
            jobs[-1] = replace(
                selfplay, team="mixed", team_kwargs={"members": members}, partner=assigned.label
            )
        # Cross-play: the focal team on agent_0, the partner the rest; with swap, also the
        # focal team on the last agent (the policy-swap drop).
        for partner, swapped in itertools.product(partners, (False, True)[: 1 + bool(cfg.swap)]):
            label = partner["label"] + (SWAPPED if swapped else "")
            members = crossplay_members(
                baseline.name, team_kwargs, partner, ep.n_agents, swapped=swapped
            )
            jobs.append(
                replace(
                    selfplay,
                    baseline=f"{baseline.name}+{label}",
                    team="mixed",
                    team_kwargs={"members": members},
                    partner=label,
                )
            )
    keys = [j.key for j in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError("the suite lists the same episode twice")
    return jobs


def _check_task_files(jobs: list[Job], rows: list[dict[str, Any]]) -> None:
    """Resuming must not mix versions of a task file: rows already in the run directory must
    come from the content the suite's task files have now."""
    recorded = {r["key"]: r.get("task_sha256", "") for r in rows}
    for job in jobs:
        before = recorded.get(job.key)
        if before is not None and before != job.task_sha256:
            raise ValueError(
                f"task {job.task}: {job.task_file} has changed (sha256 {job.task_sha256}) since "
                f"this run directory's rows were recorded (sha256 {before}); run into a new "
                "output_dir"
            )


def _summary_table(table: list[dict[str, Any]]) -> Table:
    """The console table; with several team sizes it adds the scaling columns (parallel
    efficiency, EI, blocked ticks, collisions)."""
    out = Table(title="Results (mean [95% CI])")
    levels = any("level" in rec for rec in table)
    scaling = len({rec["n_agents"] for rec in table}) > 1
    for col in ("baseline", "comm", "n", "family", "level", "eps", "err", "SR", "TR", "B", "L"):
        if col != "level" or levels:
            out.add_column(col)
    out.add_column("speedup")
    extra = ("parallel_efficiency", "EI", "blocked_ticks", "collisions") if scaling else ()
    for name in extra:
        out.add_column({"parallel_efficiency": "eff", "blocked_ticks": "blocked"}.get(name, name))

    def fmt(cell: dict[str, Any]) -> str:
        if cell["mean"] is None:
            return "-"
        return f"{cell['mean']:.2f} ± {(cell['hi'] - cell['lo']) / 2:.2f}"

    for rec in table:
        out.add_row(
            rec["baseline"],
            "on" if rec["comm"] else "off",
            str(rec["n_agents"]),
            rec["family"],
            *([str(rec["level"])] if levels else []),
            str(rec["episodes"]),
            str(rec["errors"]),
            fmt(rec["SR"]),
            fmt(rec["TR"]),
            fmt(rec["B"]),
            fmt(rec["L"]),
            fmt(rec["speedup"]),
            *(fmt(rec[name]) for name in extra),
        )
    return out


def check_keys(cfg: DictConfig, schema: type = RunConfig) -> None:
    """Reject keys the schema does not know (Hydra's ``+key=...`` can add them)."""
    valid = set(schema.__dataclass_fields__)
    unknown = sorted(set(cfg.keys()) - valid)
    if unknown:
        raise ValueError(f"unknown config key(s) {unknown}; valid keys are {sorted(valid)}")


def _references(reference_from: str | None) -> list[dict[str, Any]]:
    """The one-agent rows of the ``reference_from`` run, marked as references (none if unset)."""
    if not reference_from:
        return []
    previous = RunDirectory(reference_from)
    references = [{**r, "reference": True} for r in previous.rows() if r.get("n_agents") == 1]
    if not references:
        raise ValueError(f"reference_from={reference_from!r} holds no one-agent rows")
    return references


def run(cfg: DictConfig, console: Console | None = None) -> dict[str, Any]:
    """Run (or resume) the configured evaluation; returns the overall summary records."""
    check_keys(cfg)
    if cfg.batch_episodes < 1:
        raise ValueError(f"batch_episodes={cfg.batch_episodes} must be at least 1")
    console = console or Console(width=None if Console().is_terminal else 130)
    root = Path(cfg.output_dir).resolve()
    rundir = RunDirectory(root)
    container = OmegaConf.to_container(cfg, resolve=True)
    (root / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    jobs = build_jobs(cfg)
    _check_task_files(jobs, rundir.rows())
    if cfg.retry_errors:
        again = rundir.set_aside_errors()
        if again:
            console.print(
                f"{len(again)} error rows set aside in {rundir.root / 'episodes.errors.jsonl'}; "
                "playing those episodes again"
            )
    done = rundir.done()
    todo = [j for j in jobs if j.key not in done]
    manifest = rundir.write_manifest(container, cfg.suite.version, finished=not todo)
    stamp = {
        "config_hash": manifest["config_hash"],
        "code_version": manifest["code_version"],
        "suite": cfg.suite.name,
        "suite_version": cfg.suite.version,
    }
    references = _references(cfg.reference_from)
    # Rows reach the loggers with their speedup, efficiency and EI once the reference is known.
    join = ReferenceJoin(
        rundir.rows(), references, one_agent_jobs=sum(j.n_agents == 1 for j in todo)
    )
    loggers = MetricLoggers(cfg.logger, root, root.name, container)
    if loggers.prometheus is not None:
        console.print(f"Prometheus metrics at {loggers.prometheus.url}")
    tmp, inside = ray_tmpdir(Path(cfg.ray.tmpdir) if cfg.ray.tmpdir else root / "ray")
    if cfg.workers > 0 and not inside and todo:
        manifest["ray_tmpdir"] = str(tmp)
        (root / "manifest.json").write_text(json.dumps(manifest, indent=1))
    console.print(
        f"{len(jobs)} episodes ({len(jobs) - len(todo)} already in {root}), "
        f"{'inline' if cfg.workers == 0 else f'{cfg.workers} Ray workers'}"
    )

    def on_death(job: Job, reason: str, again: bool) -> None:
        if cfg.logger.console:
            then = "playing it again" if again else "recording an error row"
            console.print(f"[yellow]{job.key}: {reason}; {then}[/yellow]", soft_wrap=True)

    results = (
        run_inline(todo, cfg.retries, cfg.batch_episodes)
        if cfg.workers == 0
        else run_on_ray(
            todo,
            cfg.workers,
            cfg.retries,
            cfg.ray.address,
            tmp,
            batch=cfg.batch_episodes,
            on_death=on_death,
        )
    )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=console, disable=not cfg.logger.console) as progress:
            bar = progress.add_task("episodes", total=len(todo))
            for result in results:
                row = rundir.record({**result["row"], **stamp}, result["trace"])
                for ready in join.add(row):
                    loggers.log_episode(ready)
                if cfg.replay and result["trace"] is not None:
                    from benchmark.media.viewer import write_episode_media

                    write_episode_media(
                        result["trace"], rundir.media / row["key"].replace("/", "__")
                    )
                progress.advance(bar)
    finally:
        for row in join.flush():
            loggers.log_episode(row)
        loggers.close()
        if cfg.workers > 0 and not inside and todo:
            shutil.rmtree(tmp, ignore_errors=True)
    rows = rundir.rows()
    table = summarize(rows, rundir.load_trace, references)
    deltas = comm_deltas(rows)
    write_summary(root, table, deltas)
    crossplay = write_crossplay(root, rows, rundir.load_trace)
    write_members(root, rows, rundir.load_trace)
    if cfg.logger.console:
        console.print(
            _summary_table(
                [r for r in table if r["family"] == "all"]
                + [r for r in table if r["family"] != "all"]
            )
        )
        if crossplay:
            console.print("Cross-play against self-play (crossplay.md):")
            console.print(crossplay_markdown(crossplay), markup=False)
        console.print(
            f"Wrote {len(rows)} episode rows, traces and summary.md/summary.csv to {root}"
        )
    return {"table": table, "deltas": deltas, "rows": rows, "root": root, "crossplay": crossplay}
