"""Trainer checkpoints: model (and value head), optimiser, RNG states, step and data position,
written atomically as ``checkpoints/step_<k>.pt``; the newest complete one is resumed."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

_NAME = re.compile(r"^step_(\d+)\.pt$")


def rng_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def save_checkpoint(folder: Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``state`` for ``step`` (via a temporary file and a rename) and prune old ones."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step_{step}.pt"
    tmp = folder / f".step_{step}.pt.tmp"
    torch.save({**state, "step": step, "rng": rng_state()}, tmp)
    os.replace(tmp, path)
    for old in checkpoints(folder)[:-keep] if keep > 0 else []:
        old.unlink()
    return path


def checkpoints(folder: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def load_checkpoint(folder: Path, step: int) -> dict[str, Any]:
    """The state of the checkpoint of ``step``, RNG states left as they are (a rollback)."""
    path = folder / f"step_{step}.pt"
    if not path.is_file():
        found = [p.name for p in checkpoints(folder)]
        raise FileNotFoundError(f"no checkpoint of step {step} in {folder} (found: {found})")
    return torch.load(path, weights_only=False)


def load_latest(folder: Path) -> dict[str, Any] | None:
    """The newest checkpoint's state (RNG states restored), or None."""
    found = checkpoints(folder)
    if not found:
        return None
    state = torch.load(found[-1], weights_only=False)
    set_rng_state(state["rng"])
    return state
