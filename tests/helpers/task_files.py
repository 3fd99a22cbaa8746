"""Task files written into a test's tmp_path: a minimal valid spec around the goal under test."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_task(
    tmp_path: Path,
    task_id: str,
    goal: list[str],
    scenes: dict,
    *,
    setup: dict | None = None,
    agents: tuple[int, int] = (1, 3),
    limits: tuple[int, int] = (200, 80),
) -> Path:
    """Write ``<task_id>.yaml`` (family ``prepare``) with ``goal`` on ``scenes``; its path.
    ``agents``: (min, max); ``limits``: (ticks, decisions per agent)."""
    data = {
        "id": task_id,
        "family": "prepare",
        "instructions": {"explicit": "Do {subjects}.", "types": "Do it.", "implicit": "Hm."},
        "scenes": scenes,
        "agents": {"min": agents[0], "max": agents[1]},
        "limits": {"ticks": limits[0], "decisions": limits[1]},
        "goal": goal,
        **({"setup": setup} if setup else {}),
    }
    path = tmp_path / f"{task_id}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
