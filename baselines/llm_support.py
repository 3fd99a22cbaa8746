"""What the LLM baselines share: prompt templates, the backend an ``llm`` config describes,
whether to decode under constraints, usage metrics, and :class:`LLMTeam`, the team that takes its
LLM from the resources its worker lends it."""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

from benchmark.agents import Team
from benchmark.env.views import TaskInfo
from benchmark.llm import LLM
from benchmark.llm.resources import LLMPool, LLMResources

# Each LLM baseline keeps its prompt templates in its own package (``<baseline>/prompts/``).
PROMPT_DIRS = tuple(Path(__file__).parent / b / "prompts" for b in ("llm_agents", "llm_planner"))
ADAPTERS_DIR = Path(__file__).parent / "adapters"  # committed LoRA adapters, by name


def load_prompt(name: str) -> str:
    """A prompt template (``baselines/<baseline>/prompts/<name>.txt``; the file name carries its
    version)."""
    for directory in PROMPT_DIRS:
        path = directory / f"{name}.txt"
        if path.is_file():
            return path.read_text()
    known = sorted(p.stem for d in PROMPT_DIRS for p in d.glob("*.txt"))
    raise ValueError(f"no prompt template {name!r}; templates: {known}")


def resolve_adapter(adapter: str) -> Path:
    """The adapter directory of ``adapter``: a committed adapter's name
    (``baselines/adapters/<name>``) or a directory."""
    named = ADAPTERS_DIR / adapter
    path = named if named.is_dir() else Path(adapter).expanduser()
    if not (path / "adapter_config.json").is_file():
        known = sorted(p.parent.name for p in ADAPTERS_DIR.glob("*/adapter_config.json"))
        raise ValueError(
            f"llm.adapter={adapter!r} is neither a committed adapter {known} nor a peft adapter "
            "directory"
        )
    return path


def config_llm(config: dict[str, Any] | None, llms: LLMPool) -> LLM:
    """The backend described by an ``llm`` config (backend, model, options, adapter), from the
    worker's pool ``llms``, where it is loaded once. The config's decoding options
    (``constrained``) do not change the model: both settings share one backend."""
    if not isinstance(config, dict) or config.get("backend") in (None, "none"):
        raise ValueError(
            "this baseline needs an LLM: set llm=smollm2, llm=hf, llm=openai or llm=vllm"
        )
    options = dict(config.get("options") or {})
    if config.get("adapter"):
        if config["backend"] not in ("smollm2", "hf"):
            raise ValueError(
                f"llm.adapter needs a local model (llm=smollm2 or llm=hf), not "
                f"backend {config['backend']!r}"
            )
        options["adapter"] = str(resolve_adapter(str(config["adapter"])))
    return llms.get(config["backend"], config.get("model", ""), **options)


def constrained_default(llm: dict[str, Any] | None, constrained: bool | None) -> bool:
    """Whether a team decodes under constraints: its own ``constrained`` argument when given,
    else the ``llm`` config's ``constrained`` (default True; ``llm.constrained=false`` is the
    free-form ablation)."""
    if constrained is not None:
        return bool(constrained)
    value = (llm or {}).get("constrained", True) if isinstance(llm, dict) else True
    if not isinstance(value, bool):
        raise ValueError(f"llm.constrained must be true or false, got {value!r}")
    return value


class UsageMeter:
    """Per-episode LLM accounting: tokens, latency, calls, and for each output the team reads:
    parse failures (no usable action or plan), fallbacks (a constraint was asked for but the
    output was not decoded under it, so the free-form parser read it) and truncations (the
    generation hit ``max_tokens``)."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.start = llm.usage.snapshot()
        self.parsed = 0
        self.failed = 0
        self.fallbacks = 0
        self.truncated = 0

    def parse(self, ok: bool, fallback: bool = False, truncated: bool = False) -> None:
        self.parsed += 1
        self.failed += not ok
        self.fallbacks += fallback
        self.truncated += truncated

    def metrics(self) -> dict[str, float]:
        now = self.llm.usage.snapshot()
        calls = now["calls"] - self.start["calls"]
        return {
            "llm/calls": calls,
            "llm/tokens_in": now["tokens_in"] - self.start["tokens_in"],
            "llm/tokens_out": now["tokens_out"] - self.start["tokens_out"],
            "llm/latency_ms": round(now["latency_ms"] - self.start["latency_ms"], 1),
            "llm/parse_fail_rate": self.failed / self.parsed if self.parsed else 0.0,
            "llm/fallback_rate": self.fallbacks / self.parsed if self.parsed else 0.0,
            "llm/truncated_rate": self.truncated / self.parsed if self.parsed else 0.0,
        }


class LLMTeam(Team):
    """A team that asks an LLM: the backend its ``llm`` config describes, from the resources
    its worker lends it (:meth:`bind`). ``reset`` takes the LLM the resources make of that
    backend (in a batched rollout, the episode's share of it), starts the episode's
    :class:`UsageMeter` and then :meth:`start`, the team's own start of an episode."""

    llm_config: dict[str, Any] | None
    resources: LLMResources | None = None

    def bind(self, resources: LLMResources) -> None:
        self.resources = resources

    def backend(self) -> LLM:
        """The worker's backend this team asks (the one its ``llm`` config describes)."""
        llms = self._lent().llms
        if llms is None:
            raise ValueError(
                f"{type(self).__name__} loads its LLM from its worker's pool, and its "
                "LLMResources lend none (llms=None)"
            )
        return config_llm(self.llm_config, llms)

    def _lent(self) -> LLMResources:
        if self.resources is None:
            raise ValueError(
                f"{type(self).__name__} asks an LLM and was lent no LLM resources: build it "
                "with make_team(..., resources=LLMResources(...)) or call bind() before reset"
            )
        return self.resources

    def _load_llm(self) -> LLM:
        return self._lent().llm(self.backend())

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.llm = self._load_llm()
        self.meter = UsageMeter(self.llm)
        self.start(agent_ids, task_info)

    @abc.abstractmethod
    def start(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        """The team's state at the start of an episode."""

    def metrics(self) -> dict[str, float]:
        return self.meter.metrics()

    def close(self) -> None:
        """The LLM stays loaded in the worker's pool for the next episode."""
