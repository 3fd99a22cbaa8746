"""The LLM figures of ``python -m benchmark.bench llm``: generated tokens/s of the embedded
SmolLM2, ``llm_agents`` decisions/s played one episode after another and K episodes at once
(:mod:`benchmark.llm.batching`), and the peak RSS of a worker playing one episode of each LLM
baseline."""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import yaml

from benchmark.paths import CONFIGS_DIR

if TYPE_CHECKING:
    from benchmark.llm.resources import LLMResources


def _tokens_per_s(llm: Any, batch: int, max_tokens: int, repeats: int) -> float:
    from benchmark.llm import Sampling

    chats = [
        [{"role": "user", "content": f"List three things found in a kitchen. ({k})"}]
        for k in range(batch)
    ]
    llm.generate(chats[:1], Sampling(max_tokens=4))  # warm-up
    best = 0.0
    for r in range(repeats):
        start = time.perf_counter()
        gens = llm.generate(chats, Sampling(max_tokens=max_tokens, temperature=1.0, seed=r))
        best = max(best, sum(len(g.token_ids) for g in gens) / (time.perf_counter() - start))
    return best


DECODE_PROMPT = [{"role": "user", "content": "List ten things found in a kitchen, one a line."}]


def _decode_rate(generate: Any, tokens: int, repeats: int) -> float:
    """Decoding tokens/s at batch 1: (tokens - 1) over the time beyond a 1-token generation
    of the same prompt (its prefill), best of ``repeats``. ``generate(n)`` generates ``n``
    tokens greedily and returns how many it generated."""
    generate(2)  # warm-up
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        generate(1)
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        made = generate(tokens)
        spent = time.perf_counter() - start - prefill
        if made > 1 and spent > 0:
            best = max(best, (made - 1) / spent)
    return best


def decode_batch1(
    tokens: int = 64, repeats: int = 2, dtypes: Sequence[str] = ("float32", "bfloat16", "int4")
) -> dict[str, Any]:
    """Batch-1 decoding tokens/s of the embedded SmolLM2 on one thread: the ``hf`` backend in
    each precision (int4 also through transformers' own step, and the rate its weight matmuls
    alone would allow), and llama.cpp on the GGUF file itself when ``llama_cpp``
    (``llama-cpp-python``) is installed, measured in the same run."""
    import torch

    from benchmark.llm import Sampling
    from benchmark.llm.hf import HFBackend
    from benchmark.llm.smollm2 import smollm2_dir

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out: dict[str, Any] = {"decode_threads": 1, "decode_tokens": tokens}
    # Each precision over the static KV cache (the default), and 4 bits also stepping through
    # transformers' forward, to show what the static decoder saves.
    runs = [(dtype, True) for dtype in dtypes]
    runs += [("int4", False)] if "int4" in dtypes else []
    try:
        for dtype, static in runs:
            llm = HFBackend(smollm2_dir(), dtype=dtype, prefix_cache=0, static_decode=static)

            def generate(n: int, llm: HFBackend = llm) -> int:
                return len(llm.generate([DECODE_PROMPT], Sampling(max_tokens=n))[0].token_ids)

            key = f"hf_{dtype}" if static else f"hf_{dtype}_transformers_step"
            out[f"{key}_decode_tokens_per_s"] = round(_decode_rate(generate, tokens, repeats), 1)
            if dtype == "int4" and static:
                out["int4_matmuls_only_tokens_per_s"] = round(1 / _int4_matmul_seconds(llm), 1)
            del llm
    finally:
        torch.set_num_threads(threads)
    out["llamacpp_decode_tokens_per_s"] = _llamacpp_rate(tokens, repeats)
    return out


def _int4_matmul_seconds(llm: Any, passes: int = 50) -> float:
    """Seconds a batch-1 token spends in the int4 decoder's weight matmuls alone: each
    layer's fused q/k/v, o, fused gate/up and down projections and the 8-bit head, called in a
    token's order with nothing between them (so every weight is read from memory once a pass,
    as in decoding), best of 3 runs of ``passes`` passes. The ceiling on tokens/s of any decode
    loop built on these kernels, whatever its other work."""
    import torch

    from benchmark.llm.int4 import GROUP

    body = llm.model.model
    calls = []
    for layer, qkv, gate_up in llm.static._layers(body):
        for part in (qkv.fused, layer.self_attn.o_proj, gate_up.fused, layer.mlp.down_proj):
            w = getattr(part, "base_layer", part)
            calls.append((w, torch.randn(1, w.in_features, dtype=torch.bfloat16)))
    head = llm.model.get_output_embeddings()
    x = torch.randn(1, head.in_features, dtype=torch.bfloat16)

    def one_pass() -> None:
        for w, inputs in calls:
            torch._weight_int4pack_mm_for_cpu(inputs, w.packed, GROUP, w.scales_zeros)
        torch._weight_int8pack_mm(x, head.qweight, head.scales)

    one_pass()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(passes):
            one_pass()
        best = min(best, (time.perf_counter() - start) / passes)
    return best


def _llamacpp_rate(tokens: int, repeats: int) -> float | None:
    """llama.cpp's batch-1 decoding tokens/s on the embedded GGUF file (one thread), or None
    when ``llama_cpp`` is not installed."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    from benchmark.llm.smollm2 import smollm2_gguf

    model = Llama(str(smollm2_gguf()), n_threads=1, n_ctx=512, verbose=False)

    def generate(n: int) -> int:
        reply = model.create_chat_completion(DECODE_PROMPT, max_tokens=n, temperature=0.0)
        return int(reply["usage"]["completion_tokens"])

    return round(_decode_rate(generate, tokens, repeats), 1)


def bench_llm(repeats: int = 2, max_tokens: int = 48, rss: bool = False) -> dict[str, Any]:
    """Generated tokens/s of the embedded SmolLM2 at batch 1 and 8 (KV cache, CPU), and of a
    tiny randomly initialised model with the same tokenizer; with ``rss`` also the peak RSS of
    a worker playing one whole episode of each LLM baseline (:func:`llm_episode_rss`, the
    longest part: an episode of the embedded model takes minutes)."""
    import tempfile

    import torch
    from transformers import AutoTokenizer

    from benchmark.llm import make_llm
    from benchmark.llm.hf import HFBackend
    from benchmark.llm.smollm2 import smollm2_dir
    from benchmark.llm.tiny import save_tiny_llama

    smol = make_llm("smollm2")
    b1 = _tokens_per_s(smol, 1, max_tokens, repeats)
    b8 = _tokens_per_s(smol, 8, max_tokens, repeats)
    with tempfile.TemporaryDirectory(prefix="tiny-llm") as tmp:
        save_tiny_llama(tmp, AutoTokenizer.from_pretrained(smollm2_dir()), hidden=64)
        tiny = HFBackend(tmp, name="tiny-random")
        tiny_b8 = _tokens_per_s(tiny, 8, max_tokens, repeats)
    return {
        "bench": "llm",
        "smollm2_tokens_per_s_batch1": round(b1, 1),
        "smollm2_tokens_per_s_batch8": round(b8, 1),
        "batch8_over_batch1": round(b8 / b1, 2),
        "tiny_tokens_per_s_batch8": round(tiny_b8, 1),
        "threads": torch.get_num_threads(),
        **bench_llm_agents(),
        **decode_batch1(repeats=repeats),
        **(llm_episode_rss() if rss else {}),
        "python": platform.python_version(),
    }


def llm_episode_rss(
    task: str = "switch_off_kitchen_v0",
    baselines: Sequence[str] = ("llm_agents", "llm_planner"),
    batched: int = 6,
) -> dict[str, Any]:
    """Peak RSS (MiB) of a runner worker on the smoke suite (``baseline=<name> llm=smollm2
    suite=smoke``), each in a fresh process as a worker plays it (:mod:`benchmark.runner.peak_rss`,
    all processes at once, as on that many workers): one episode of ``task`` for each baseline
    (the oracle's is the floor of such a process without an LLM), and ``llm_agents`` playing the
    first ``batched`` smoke episodes at once (``batch_episodes``). ``*_episode_s``: the (longest)
    episode's wall time."""
    from concurrent.futures import ThreadPoolExecutor

    from hydra import compose, initialize_config_dir

    from benchmark.runner.app import build_jobs
    from benchmark.runner.config import register_configs
    from benchmark.runner.jobs import Job
    from benchmark.runner.peak_rss import episode_peak_rss

    register_configs()

    def smoke_jobs(name: str) -> list[Job]:
        llm = "none" if name == "oracle" else "smollm2"
        overrides = [f"baseline={name}", f"llm={llm}", "suite=smoke", "output_dir=unused"]
        with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
            cfg = compose("run", overrides=[*overrides, "reference=false", "comm=[true]"])
        return build_jobs(cfg)

    names = ("oracle", *baselines)
    runs: list[Job | list[Job]] = []
    for name in names:
        matching = [j for j in smoke_jobs(name) if j.task == task]
        if len(matching) != 1:
            raise ValueError(f"task {task!r}: not one episode of the smoke suite")
        runs += matching
    together = smoke_jobs("llm_agents")[:batched]
    if len(together) < batched:
        raise ValueError(f"batched={batched}: the smoke suite has {len(together)} episodes")
    runs.append(together)
    with ThreadPoolExecutor(len(runs)) as pool:  # threads that each wait on one process
        measured = list(pool.map(episode_peak_rss, runs))
    out: dict[str, Any] = {"rss_task": task}
    labels = [*names, f"llm_agents_batched{batched}"]
    for label, got in zip(labels, measured, strict=True):
        out[f"{label}_peak_rss_mb"] = got["peak_rss_mb"]
        out[f"{label}_episode_s"] = got["episode_s"]
        if got["status"] != "ok":
            out[f"{label}_rss_error"] = f"{got['status']}: {got['reason']}"
    return out


SMOKE = CONFIGS_DIR / "suite" / "smoke.yaml"


def _smoke_episodes(k: int) -> list[tuple[str, int]]:
    """``k`` episodes of the smoke suite: its tasks in order, then again with the next seeds."""
    tasks = [e["task"] for e in yaml.safe_load(SMOKE.read_text())["entries"]]
    return [(tasks[i % len(tasks)], i // len(tasks)) for i in range(k)]


def _ready_episode(task: str, seed: int) -> tuple[Any, dict[str, Any]]:
    """An env reset for the episode (scene set-up is not part of the timing)."""
    from benchmark.env import make_env

    env = make_env(task, n_agents=2, seed=seed, split="test")
    obs, _ = env.reset(seed=seed)
    return env, obs


def _decision_rounds(
    env: Any, obs: dict[str, Any], rounds: int, llm: dict[str, Any], lent: LLMResources
) -> tuple[int, list]:
    """The first ``rounds`` decision rounds of an ``llm_agents`` team in a reset env, lent the
    LLM resources ``lent``: (LLM decisions made, the actions of each round)."""
    from benchmark.agents import make_team

    team = make_team("llm_agents", resources=lent, llm=llm)
    team.reset(list(env.possible_agents), env.task_info())
    played = []
    while env.agents and len(played) < rounds:
        actions = team.act(obs)
        played.append(actions)
        obs, rewards, _, _, _ = env.step(actions)
        team.rewarded(rewards)
    return int(team.metrics()["llm/calls"]), played


def bench_llm_agents(k: int = 8, rounds: int = 4) -> dict[str, Any]:
    """``llm_agents`` on the embedded SmolLM2: LLM decisions/s playing ``k`` smoke episodes one
    after another and all at once (:func:`benchmark.llm.batching.run_batched`), the first
    ``rounds`` decision rounds of each, side by side; and whether both chose the same actions
    (greedy decoding: they must)."""
    from benchmark.llm.batching import run_batched
    from benchmark.llm.resources import LLMPool, LLMResources

    llm = {"backend": "smollm2", "model": "", "options": {}}
    llms = LLMPool()  # one model for both ways of playing
    episodes = _smoke_episodes(k)
    # Load the model before timing.
    _decision_rounds(*_ready_episode(*episodes[0]), 1, llm, LLMResources(llms))
    ready = [_ready_episode(task, seed) for task, seed in episodes]
    start = time.perf_counter()
    alone = [_decision_rounds(env, obs, rounds, llm, LLMResources(llms)) for env, obs in ready]
    sequential = time.perf_counter() - start
    ready = [_ready_episode(task, seed) for task, seed in episodes]
    start = time.perf_counter()
    together, stats = run_batched(
        [
            lambda seat, e=e, o=o: _decision_rounds(e, o, rounds, llm, LLMResources(llms, seat))
            for e, o in ready
        ]
    )
    batched = time.perf_counter() - start
    for result in together:
        if isinstance(result, BaseException):
            raise result
    decisions = sum(n for n, _ in alone)
    return {
        "llm_agents_episodes": k,
        "llm_agents_rounds": rounds,
        "llm_agents_decisions": decisions,
        "llm_agents_decisions_per_s_sequential": round(decisions / sequential, 3),
        "llm_agents_decisions_per_s_batched": round(decisions / batched, 3),
        "llm_agents_batched_over_sequential": round(sequential / batched, 2),
        "llm_agents_batches": stats.batches,
        "llm_agents_same_actions": [a for _, a in alone] == [a for _, a in together],
    }
