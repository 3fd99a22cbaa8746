"""What the LLM baselines share: prompt templates, one LLM per process, whether to decode under
constraints, and usage metrics."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from benchmark.llm import LLM, make_llm
from benchmark.llm.batching import batched_llm

# Each LLM baseline keeps its prompt templates in its own package (``<baseline>/prompts/``).
PROMPT_DIRS = tuple(Path(__file__).parent / b / "prompts" for b in ("llm_agents", "llm_planner"))
ADAPTERS_DIR = Path(__file__).parent / "adapters"  # committed LoRA adapters, by name
_LLMS: dict[str, LLM] = {}
_LOADING = threading.Lock()  # the episodes of a batched rollout ask at once


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


def shared_llm(config: dict[str, Any]) -> LLM:
    """The backend described by an ``llm`` config (backend, model, options), loaded once per
    process so that every episode a Ray worker runs reuses it."""
    if not isinstance(config, dict) or config.get("backend") in (None, "none"):
        raise ValueError(
            "this baseline needs an LLM: set llm=smollm2, llm=hf, llm=openai or llm=vllm"
        )
    # Decoding options (constrained) do not change the model: both settings share one load.
    model = {k: v for k, v in config.items() if k != "constrained"}
    key = json.dumps(model, sort_keys=True, default=str)
    with _LOADING:
        if key not in _LLMS:
            options = dict(config.get("options") or {})
            if config.get("adapter"):
                if config["backend"] not in ("smollm2", "hf"):
                    raise ValueError(
                        f"llm.adapter needs a local model (llm=smollm2 or llm=hf), not "
                        f"backend {config['backend']!r}"
                    )
                options["adapter"] = str(resolve_adapter(str(config["adapter"])))
            _LLMS[key] = make_llm(config["backend"], model=config.get("model", ""), **options)
    # Inside a batched rollout, the episode's share of the batch (the backend elsewhere).
    return batched_llm(_LLMS[key])


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
