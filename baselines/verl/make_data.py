"""Write the train and validation parquet files of the ``collab_bench`` verl agent loop.

    python -m baselines.verl.make_data --out data/collab_bench \\
        --tasks transport_apple_fridge_v0,switch_off_kitchen_v0 --n-agents 2 \\
        --train-seeds 0:256 --val-seeds 0:32 --batch-size 64

One row per (episode, agent): for each team size, seed and task, the n agent rows of the episode,
one after another in agent order. Training episodes draw their scene from the ``train`` scene split
and validation episodes from the held-out ``val`` split (``scenes/splits.yaml``). Each scene is
the one the environment builds for the seed, so a row names its episode exactly.

The columns are the ones verl's ``RLHFDataset`` and trainers read:

* ``prompt``: a one-message chat naming the episode. The agent loop writes its own prompts, and
  this one is only there because verl needs the column.
* ``data_source`` and ``agent_name``: both ``collab_bench``.
* ``reward_model``: a dummy. The loop sets each sample's reward itself.
* ``extra_info``: task, scene, seed, n_agents, agent, split, episode_key, index.

The hub needs every agent row of an episode in one batch, so the recipe must read the rows in
order, with ``data.shuffle=false``, and use batch sizes (``data.train_batch_size``, and
``data.val_batch_size`` if set) that are multiples of n_agents. With several team sizes, each
batch must also hold one team size only. ``--batch-size`` checks that every batch of that many
rows holds whole episodes, and fails otherwise. The agent loop checks the batch size and the
shuffle setting again at run time.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from baselines.verl.rows import AGENT_NAME, EpisodeRow, check_batches
from benchmark.tasks.episode import make_episode
from benchmark.tasks.spec import resolve_task


def parse_seeds(text: str, option: str) -> list[int]:
    """``"0:64"`` (a range, end excluded) or ``"1,5,9"``; ValueError naming ``option``."""
    try:
        if ":" in text:
            lo, hi = (int(x) for x in text.split(":"))
            seeds = list(range(lo, hi))
        else:
            seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(
            f"{option}={text!r}: give a range 'start:end' or 'a,b,c' of integers"
        ) from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ValueError(f"{option}={text!r}: need distinct non-negative seeds, at least one")
    return seeds


def episode_rows(
    tasks: Sequence[str], n_agents: Sequence[int], seeds: Sequence[int], split: str
) -> list[EpisodeRow]:
    """The rows of every (team size, seed, task) episode, agent rows together, in that order.
    Raises ValueError naming the task when an episode cannot be built."""
    specs = {task: resolve_task(task) for task in tasks}
    rows = []
    for n in n_agents:
        for seed in seeds:
            for task in tasks:
                try:
                    scene = make_episode(specs[task], None, n, seed, split=split).scene
                except ValueError as err:
                    raise ValueError(
                        f"--tasks {task} with n_agents={n}, seed={seed}: {err}"
                    ) from err
                rows += [EpisodeRow(task, scene, seed, n, f"agent_{k}", split) for k in range(n)]
    return rows


def records(rows: Sequence[EpisodeRow]) -> list[dict[str, Any]]:
    """The parquet records of ``rows`` (see the module docstring for the columns)."""
    return [
        {
            "data_source": AGENT_NAME,
            "agent_name": AGENT_NAME,
            "prompt": [
                {
                    "role": "user",
                    "content": f"CollabBench {r.task} in {r.scene}, seed {r.seed}: {r.agent} "
                    f"of {r.n_agents}",
                }
            ],
            "ability": "embodied_collaboration",
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": r.as_extra_info(index),
        }
        for index, r in enumerate(rows)
    ]


def write_parquet(rows: Sequence[EpisodeRow], path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records(rows)), path)
    return path


def read_rows(path: str | Path) -> list[EpisodeRow]:
    """The rows of a parquet file written by :func:`write_parquet`, in file order; ValueError
    naming the file when a row is not a ``collab_bench`` row."""
    import pyarrow.parquet as pq

    infos = pq.read_table(path, columns=["extra_info"]).column("extra_info").to_pylist()
    try:
        return [EpisodeRow.from_extra_info(info) for info in infos]
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.verl.make_data", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", required=True, help="output directory (train/val.parquet)")
    parser.add_argument("--tasks", required=True, help="task ids or task files, comma-separated")
    parser.add_argument("--n-agents", default="2", help="team sizes, comma-separated (2)")
    parser.add_argument("--train-seeds", default="0:64", help="'start:end' or 'a,b' (0:64)")
    parser.add_argument("--val-seeds", default="0:16", help="'start:end' or 'a,b' (0:16)")
    parser.add_argument("--train-split", default="train", help="scene split of training (train)")
    parser.add_argument("--val-split", default="val", help="held-out scene split (val)")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="check that batches hold whole episodes"
    )
    args = parser.parse_args(argv)
    try:
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
        if not tasks:
            raise ValueError("--tasks: give at least one task id")
        try:
            sizes = [int(x) for x in args.n_agents.split(",")]
        except ValueError:
            raise ValueError(
                f"--n-agents={args.n_agents!r}: give integers, comma-separated"
            ) from None
        if not sizes or min(sizes) < 1:
            raise ValueError(f"--n-agents={args.n_agents!r}: team sizes must be >= 1")
        if args.train_split == args.val_split:
            raise ValueError(f"--val-split={args.val_split!r} must differ from --train-split")
        out = Path(args.out)
        written = []
        for name, seeds, split in (
            ("train", parse_seeds(args.train_seeds, "--train-seeds"), args.train_split),
            ("val", parse_seeds(args.val_seeds, "--val-seeds"), args.val_split),
        ):
            rows = episode_rows(tasks, sizes, seeds, split)
            if args.batch_size is not None:
                check_batches(rows, args.batch_size)
            written.append((write_parquet(rows, out / f"{name}.parquet"), len(rows)))
    except ValueError as err:
        print(f"make_data: {err}", file=sys.stderr)
        return 2
    for path, n in written:
        print(f"make_data: {path}: {n} rows")
    print(
        "make_data: train with data.shuffle=false and data.train_batch_size a multiple of "
        f"n_agents ({','.join(map(str, sizes))})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
