"""Mutation testing of the benchmark's pure modules with mutmut (``make mutation``).

Each target is one module and the fast test files that exercise it. For each target, the
packages are copied into ``outputs/mutation/<module>/``, mutmut mutates only that module and runs
only those tests against each mutant, and every mutant the tests let through is written with its
diff to ``outputs/mutation/report.md``: the survivors, the timeouts and suspicious ones, and
the functions no selected test reaches.

    python scripts/mutation.py                                  # every target in TARGETS
    python scripts/mutation.py benchmark/metrics/stats.py=tests/test_metrics.py

Add a module by adding a line to TARGETS. A target whose module does not exist is skipped with a
message, so is a listed test file that does not exist, and a target left without tests.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("benchmark", "baselines", "leaderboard")  # copied whole, so imports resolve
DATA = ("scenes", "tasks", "configs")  # read by the packages at import or test time
ISOLATIONS = ("fork", "forkserver")


@dataclass(frozen=True)
class Target:
    """One module to mutate and the tests that must catch its mutants.

    Attributes:
        module: path of the module from the repository root.
        tests: test files (from the repository root) run against each mutant.
        isolation: how mutmut starts each mutant's test run: ``fork`` from its own process, or
            ``forkserver`` from a clean server process (for torch, which is not fork-safe
            once it has started its thread pools).
    """

    module: str
    tests: tuple[str, ...]
    isolation: str = "fork"

    def __post_init__(self) -> None:
        if not self.module.endswith(".py"):
            raise ValueError(f"module: {self.module!r} is not a .py file path")
        if not self.tests:
            raise ValueError(f"tests: {self.module} needs at least one test file")
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"isolation: {self.isolation!r} is not one of {ISOLATIONS}")

    @property
    def slug(self) -> str:
        return self.module.removesuffix(".py").replace("/", ".")


TARGETS = (
    Target("benchmark/metrics/episode.py", ("tests/test_metrics.py",)),
    Target("benchmark/env/rewards.py", ("tests/test_rewards.py", "tests/test_env.py")),
    Target("baselines/rl/core/algos.py", ("tests/test_rl_algos.py",), isolation="forkserver"),
)

# mutmut's statuses that mean the tests did not catch a mutant, in report order.
UNCAUGHT = ("survived", "timeout", "suspicious", "segfault")


@dataclass
class Outcome:
    target: Target
    seconds: float
    counts: collections.Counter
    diffs: dict[str, list[tuple[str, str]]]  # status -> [(mutant, diff)]
    unreached: collections.Counter  # function -> mutants no selected test reaches


def parse_target(text: str) -> Target:
    """``module.py=test_a.py[,test_b.py]`` from the command line; a module listed in TARGETS
    keeps its isolation there."""
    module, sep, tests = text.partition("=")
    if not sep or not tests:
        raise argparse.ArgumentTypeError(f"{text!r}: expected MODULE.py=TEST.py[,TEST.py]")
    isolation = next((t.isolation for t in TARGETS if t.module == module), "fork")
    try:
        return Target(module, tuple(t for t in tests.split(",") if t), isolation)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def runnable(target: Target) -> Target | None:
    """The target with its missing test files dropped, or None (with the reason printed)."""
    if not (REPO / target.module).is_file():
        print(f"skip {target.module}: the module does not exist (yet)", flush=True)
        return None
    missing = [t for t in target.tests if not (REPO / t).is_file()]
    for t in missing:
        print(f"note {target.module}: test file {t} does not exist, running without it")
    tests = tuple(t for t in target.tests if t not in missing)
    if not tests:
        print(f"skip {target.module}: none of its test files exist", flush=True)
        return None
    return Target(target.module, tests, target.isolation)


def _toml(value: object) -> str:
    # Strings and lists of strings only; JSON's escapes are valid TOML basic strings.
    return json.dumps(value)


def prepare(target: Target, work: Path) -> None:
    """A fresh scratch project: the packages, data and tests, and mutmut's settings."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in (*PACKAGES, *DATA, "tests"):
        shutil.copytree(REPO / name, work / name, ignore=skip)
    project = (REPO / "pyproject.toml").read_text()
    if re.search(r"^\[tool\.mutmut\]", project, flags=re.MULTILINE):
        raise SystemExit("pyproject.toml has a [tool.mutmut] table; the settings live here")
    settings = {
        "source_paths": list(PACKAGES),
        "only_mutate": [target.module],
        "also_copy": list(DATA),
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-p", "no:xdist"],
        "pytest_add_cli_args_test_selection": list(target.tests),
        "process_isolation": target.isolation,
    }
    table = "\n".join(f"{k} = {_toml(v)}" for k, v in settings.items())
    (work / "pyproject.toml").write_text(f"{project}\n[tool.mutmut]\n{table}\n")


def mutmut(work: Path, *args: str, log: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the copies, not the repo
    cmd = [sys.executable, "-m", "mutmut", *args]
    if log is None:
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, check=False)
        out = proc.stdout + proc.stderr
    else:
        with log.open("w") as handle:
            proc = subprocess.run(cmd, cwd=work, env=env, stdout=handle, stderr=subprocess.STDOUT)
        out = log.read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"mutmut {' '.join(args)} exited {proc.returncode}:\n{out[-3000:]}")
    return out


def function_of(mutant: str) -> str:
    """``benchmark.metrics.stats.x_t_interval__mutmut_4`` -> ``t_interval``; a method's mutant,
    ``...xǁClassǁname__mutmut_1``, -> ``Class.name``."""
    name = mutant.partition("__mutmut_")[0].rpartition(".")[2]
    if name.startswith("x_"):
        return name.removeprefix("x_")
    return name.removeprefix("xǁ").replace("ǁ", ".")


def run_target(target: Target, out_dir: Path) -> Outcome:
    work = out_dir / target.slug
    prepare(target, work)
    print(f"mutating {target.module} against {', '.join(target.tests)} ...", flush=True)
    start = time.perf_counter()
    mutmut(work, "run", log=work / "mutmut-run.log")
    seconds = time.perf_counter() - start
    statuses = {}
    for line in mutmut(work, "results", "--all", "true").splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            statuses[name] = status
    diffs: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for name, status in sorted(statuses.items(), key=lambda kv: _natural(kv[0])):
        if status in UNCAUGHT:
            diffs[status].append((name, _diff(mutmut(work, "show", name))))
    unreached = collections.Counter(function_of(n) for n, s in statuses.items() if s == "no tests")
    return Outcome(target, seconds, collections.Counter(statuses.values()), diffs, unreached)


def _natural(name: str) -> tuple[str, int]:
    head, _, number = name.rpartition("_")
    return head, int(number) if number.isdigit() else 0


def _diff(shown: str) -> str:
    lines = shown.splitlines()
    start = next((k for k, line in enumerate(lines) if line.startswith("---")), 0)
    return "\n".join(lines[start:])


def score(counts: collections.Counter) -> str:
    """Killed / mutants some selected test ran against."""
    checked = counts["killed"] + sum(counts[s] for s in UNCAUGHT)
    return f"{counts['killed'] / checked:.0%}" if checked else "n/a"


def report(outcomes: list[Outcome], skipped: list[str]) -> str:
    lines = [
        "# Mutation testing: surviving mutants",
        "",
        "Produced by `make mutation` (`scripts/mutation.py`, mutmut). A survivor is a change to",
        "the code that every selected test still passes; each needs a test that fails on it, or",
        "a reason it cannot change behaviour.",
        "",
        "| module | tests | mutants | killed | survived | timeout/suspicious | no test reaches"
        " | score | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        c = o.counts
        odd = sum(c[s] for s in UNCAUGHT if s != "survived")
        lines.append(
            f"| `{o.target.module}` | {', '.join(o.target.tests)} | {sum(c.values())}"
            f" | {c['killed']} | {c['survived']} | {odd} | {c['no tests']} | {score(c)}"
            f" | {o.seconds:.0f} |"
        )
    if skipped:
        lines += ["", f"Skipped (module or all its test files missing): {', '.join(skipped)}."]
    for o in outcomes:
        lines += ["", f"## `{o.target.module}`"]
        uncaught = collections.Counter(
            function_of(name) for found in o.diffs.values() for name, _ in found
        )
        if uncaught:
            by_function = ", ".join(f"`{f}` ({n})" for f, n in uncaught.most_common())
            lines += ["", f"Uncaught mutants by function: {by_function}."]
        if o.unreached:
            reached = ", ".join(f"`{f}` ({n})" for f, n in sorted(o.unreached.items()))
            lines += ["", f"Functions no selected test calls (mutants): {reached}."]
        for status in UNCAUGHT:
            for name, diff in o.diffs.get(status, []):
                lines += ["", f"### {status}: `{name}`", "", "```diff", diff, "```"]
        if not any(o.diffs.values()):
            lines += ["", "Every mutant a test reached was killed."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "targets",
        nargs="*",
        type=parse_target,
        help="MODULE.py=TEST.py[,TEST.py] (default: the TARGETS in this script)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "mutation")
    args = parser.parse_args(argv)
    outcomes, skipped = [], []
    for listed in args.targets or TARGETS:
        target = runnable(listed)
        if target is None:
            skipped.append(listed.module)
            continue
        outcome = run_target(target, args.out)
        c = outcome.counts
        print(
            f"  {sum(c.values())} mutants: {c['killed']} killed, {c['survived']} survived,"
            f" {c['no tests']} reached by no test, score {score(c)}, {outcome.seconds:.0f} s",
            flush=True,
        )
        outcomes.append(outcome)
    path = args.out / "report.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report(outcomes, skipped))
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
