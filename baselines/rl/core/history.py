"""A training run's log (``metrics.jsonl``) across restarts: the rows a run resumed from a
checkpoint continues, the others set aside in ``metrics.abandoned.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmark.paths import write_atomically

ROW_KEYS = ("kind", "step", "wall_s")  # what every metrics row carries besides its values


def continue_history(path: Path, step: int | None) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl`` at ``path`` that a run resumed from the checkpoint of
    ``step`` continues (``step`` None: a fresh start continues none); the others are appended
    to ``metrics.abandoned.jsonl`` beside it, and ``path`` keeps the continued ones."""
    if not path.is_file():
        return []
    kept: list[dict[str, Any]] = []
    dropped: list[str] = []
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                dropped.append(line)  # a torn last line: the killed process mid-write
                continue
            raise ValueError(f"{path}:{n}: not a JSON row: {line[:80]!r}") from None
        if step is not None and isinstance(row.get("step"), int) and row["step"] <= step:
            kept.append(row)
        else:
            dropped.append(line)
    if dropped:
        with path.with_name("metrics.abandoned.jsonl").open("a") as f:
            f.write("".join(line + "\n" for line in dropped))
        # replaced whole: a crash keeps the old log
        write_atomically(path, "".join(json.dumps(row) + "\n" for row in kept))
    return kept
