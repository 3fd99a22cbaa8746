"""The rollout workers a trainer plays episodes on: Ray actors (one CPU each, or a GPU share
for vLLM) or one worker in the trainer's process, and the weight sync to them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baselines.rl.core.config import GENERATORS, RolloutSettings
from baselines.rl.core.policy import LoraOptions, Policy
from baselines.rl.core.rollout import EpisodeResult, EpisodeSpec, RolloutWorker

if TYPE_CHECKING:
    from baselines.rl.core.config import TrainSettings


def make_generator(kind: str, model_dir: str, lora: LoraOptions | None, threads: int = 1):
    """A generator for a rollout worker: the torch policy, or vLLM on a GPU."""
    if kind == "torch":
        return Policy(model_dir, lora=lora, threads=threads)
    if kind == "vllm":
        from baselines.rl.core.vllm_generator import VLLMGenerator

        return VLLMGenerator(model_dir, lora=lora)
    raise ValueError(f"generator={kind!r} must be one of {list(GENERATORS)}")


class WorkerPool:
    """Plays episodes with the current weights of ``policies`` (one per policy key).

    Args:
        cfg: the training settings (``workers``, ``policy.generator``, ``ray``).
        policies: the trainer's policies by key (``shared`` or agent names).
        options: how training episodes are played.
        model_dir, lora: what a remote generator loads before the first sync.
        root: the run directory (Ray's temporary files default to ``<root>/ray``).
    """

    def __init__(
        self,
        cfg: TrainSettings,
        policies: dict[str, Policy],
        options: RolloutSettings,
        model_dir: str,
        lora: LoraOptions | None,
        root: Path,
    ) -> None:
        self.cfg = cfg
        self.policies = policies
        self.options = options
        self.root = root
        self.factory = functools.partial(make_generator, cfg.policy.generator, model_dir, lora)
        self._workers: list[Any] = []
        self._local: RolloutWorker | None = None
        self._ray_started = False

    def _weights(self) -> dict[str, Any]:
        return {k: p.weights() for k, p in self.policies.items()}

    def _start(self) -> None:
        if self._local is not None or self._workers:
            return
        in_process = self.cfg.policy.generator == "torch"
        if self.cfg.workers == 0:
            # The torch generator in this process is the trainer's own policy.
            factories = (
                {k: (lambda p=p: p) for k, p in self.policies.items()}
                if in_process
                else dict.fromkeys(self.policies, self.factory)
            )
            self._local = RolloutWorker(factories, self.options)
            return
        import ray

        from benchmark.runner.execute import ray_tmpdir

        if not ray.is_initialized():
            ray_cfg = self.cfg.ray
            tmp, _ = ray_tmpdir(Path(ray_cfg.tmpdir) if ray_cfg.tmpdir else self.root / "ray")
            ray.init(
                address=ray_cfg.address,
                num_cpus=None if ray_cfg.address else max(self.cfg.workers, 1),
                include_dashboard=False,
                log_to_driver=False,
                _temp_dir=None if ray_cfg.address else str(tmp),
            )
            self._ray_started = True
        gpus = 0 if in_process else 1 / self.cfg.workers
        actor = ray.remote(num_cpus=1, num_gpus=gpus)(RolloutWorker)
        self._workers = [
            actor.remote(dict.fromkeys(self.policies, self.factory), self.options)
            for _ in range(self.cfg.workers)
        ]

    def sync_weights(self) -> None:
        """Send the trainer's weights to every generator that is not the trainer's model."""
        self._start()
        if self._local is not None and self.cfg.policy.generator != "torch":
            self._local.load_weights(self._weights())
        if self._workers:
            import ray

            ref = ray.put(self._weights())
            ray.get([w.load_weights.remote(ref) for w in self._workers])

    def play(
        self,
        specs: list[EpisodeSpec],
        keep_trace: bool = False,
        options: RolloutSettings | None = None,
    ) -> list[EpisodeResult]:
        """Play ``specs`` (with ``options`` instead of the training ones if given); results in
        spec order."""
        self._start()
        if self._local is not None:
            return self._local.play(specs, keep_trace, options)
        import ray

        n = len(self._workers)
        chunks = [specs[k::n] for k in range(n)]
        futures = [
            w.play.remote(c, keep_trace, options)
            for w, c in zip(self._workers, chunks, strict=True)
        ]
        results = [r for chunk in ray.get(futures) for r in chunk]
        return sorted(results, key=lambda r: r.spec.index)

    def close(self) -> None:
        if self._workers:
            import ray

            for w in self._workers:
                ray.kill(w)
            self._workers = []
            if self._ray_started:
                ray.shutdown()
