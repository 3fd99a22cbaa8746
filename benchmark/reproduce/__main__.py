"""``python -m benchmark.reproduce``: regenerate the paper's tables.

Examples::

    python -m benchmark.reproduce table=main                # run, then outputs/paper/main.*
    python -m benchmark.reproduce table=all --check         # and compare with the committed ones
    python -m benchmark.reproduce table=all source=reference check=true   # rebuild from bundles
    python -m benchmark.reproduce table=scaling short=true check=true     # the few-seed CI run

``--check`` is ``check=true``. The exit status is 1 when a check finds a difference; each one
is printed with its table, row and column.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from benchmark.reproduce.app import Options, reproduce


@hydra.main(version_base="1.3", config_path="../../configs", config_name="reproduce")
def main(cfg: DictConfig) -> None:
    raw = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(raw, dict)
    unknown = set(raw) - set(Options.__dataclass_fields__)
    if unknown:
        raise SystemExit(
            f"unknown option(s) {sorted(unknown)}; options: {sorted(Options.__dataclass_fields__)}"
        )
    opts = Options(**raw)  # type: ignore[arg-type]
    failed = 0
    for outcome in reproduce(opts):
        print(f"[reproduce] {outcome.spec.name}: " + ", ".join(str(p) for p in outcome.files))
        if outcome.checked:
            for problem in outcome.problems:
                print(f"[check] {problem}")
            verdict = "holds" if not outcome.problems else f"{len(outcome.problems)} difference(s)"
            print(f"[check] {outcome.spec.name}: {verdict}")
            failed += bool(outcome.problems)
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    sys.argv = ["check=true" if a == "--check" else a for a in sys.argv]
    main()
