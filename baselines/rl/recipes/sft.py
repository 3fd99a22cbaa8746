"""Supervised warm start: imitate a scripted team's decisions in the RL agent view.

The teacher (``heuristic`` or ``oracle``) plays episodes through the one episode loop
(:func:`benchmark.rollout.run_episode`) inside a :class:`Demonstrator`: at each of its decisions
the acting agent's :class:`~baselines.rl.core.agent_view.AgentView` renders the prompt, and the
teacher's action, written with the view's short names, is the target reply. Decisions naming an
object the agent does not know (the oracle reads the true state) are skipped and counted. A
``tiny`` init builds a byte-level BPE tokenizer on the benchmark's own text (the demonstrations
and every task's instructions) and a small Llama from a local config.
"""

from __future__ import annotations

import copy
import json
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from baselines.rl.core.agent_view import AgentView
from baselines.rl.core.policy import LoraOptions, Policy, resolve_model_dir
from benchmark.agents import Team, make_team
from benchmark.env import CollabEnv, EnvOptions
from benchmark.env.views import TaskInfo
from benchmark.llm.tiny import save_tiny_llama, train_tokenizer
from benchmark.metrics.episode import episode_metrics
from benchmark.rollout import run_episode
from benchmark.skills import skill_names
from benchmark.tasks.spec import task_registry

if TYPE_CHECKING:
    from benchmark.tasks.decompose import Decomposition

TEACHERS = ("heuristic", "oracle")


class Demonstrator(Team):
    """Plays ``teacher`` and records its decisions in the agent view: ``pairs`` holds
    (agent, prompt, reply) in decision order; ``skipped`` counts the decisions that name an
    object the agent does not know (the oracle reads the true state)."""

    def __init__(self, teacher: Team, history: int = 2, max_objects: int = 8) -> None:
        self.teacher = teacher
        self.history, self.max_objects = history, max_objects

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.teacher.reset(agent_ids, task_info)
        self.agents = list(agent_ids)
        self.views = {
            a: AgentView(a, self.agents, task_info.instruction, self.history, self.max_objects)
            for a in self.agents
        }
        self.pairs: list[tuple[str, str, str]] = []
        self.skipped = 0

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        for a in self.agents:
            self.views[a].update(observations[a])
        prompts = {
            a: self.views[a].prompt() for a in self.agents if observations[a]["needs_decision"]
        }
        actions = self.teacher.act(observations)
        for a, prompt in prompts.items():
            action = actions.get(a, "")
            reply = self.views[a].to_reply(action)
            if reply is None:
                self.skipped += 1
                # The view still learns what the agent did, as far as it can name it.
                self.views[a].pending = self.views[a].names_in(action)
                continue
            self.views[a].to_action(reply)
            self.pairs.append((a, prompt, reply))
        return actions

    def rewarded(self, rewards: dict[str, float]) -> None:
        self.teacher.rewarded(rewards)

    def metrics(self) -> dict[str, float]:
        return self.teacher.metrics()

    def plan(self) -> Decomposition | None:
        return self.teacher.plan()

    def close(self) -> None:
        self.teacher.close()


def demonstrations(cfg: Any) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """(prompt, reply) pairs of the teacher's decisions and the teacher's statistics."""
    if cfg.teacher not in TEACHERS:
        raise ValueError(f"teacher={cfg.teacher!r} is not one of {list(TEACHERS)}")
    r = cfg.rollout
    demos: list[dict[str, Any]] = []
    skipped = dropped = 0
    successes = []
    for k in range(cfg.episodes):
        task = cfg.tasks[k % len(cfg.tasks)]
        seed = cfg.seed_start + k
        options = EnvOptions(
            reward_sharing=r.reward_sharing,
            comm=r.comm,
            ambiguity=r.ambiguity,
            split=cfg.split,
            observability="full" if cfg.teacher == "oracle" else "partial",
        )
        env = CollabEnv(task, n_agents=cfg.n_agents, options=options)
        team = Demonstrator(make_team(cfg.teacher), r.history, r.max_objects)
        try:
            trace = run_episode(env, team, seed=seed)
        finally:
            team.close()
        solved = episode_metrics(trace)["SR"]
        successes.append(solved)
        skipped += team.skipped
        if cfg.get("successful_only", False) and not solved:
            dropped += 1
            continue
        demos += [
            {"task": task, "seed": seed, "agent": a, "prompt": prompt, "reply": reply}
            for a, prompt, reply in team.pairs
        ]
    stats = {
        "teacher_SR": sum(successes) / len(successes),
        "demonstrations": len(demos),
        "skipped": skipped,
        "episodes_dropped": dropped,
    }
    return demos, stats


def tokenizer_corpus(demos: list[dict[str, Any]]) -> list[str]:
    """The benchmark's own text: prompts, replies, every task instruction, the skill words."""
    corpus = [d["prompt"] + "\n" + d["reply"] for d in demos]
    for spec in task_registry().values():
        corpus += list(spec.instructions.values())
    corpus.append(" ".join(skill_names()) + " say all agent_0 agent_1 agent_2 agent_3 agent_4")
    return corpus


def build_tiny(out: Path, demos: list[dict[str, Any]], size: dict[str, int], seed: int) -> Path:
    tokenizer = train_tokenizer(tokenizer_corpus(demos), vocab_size=int(size["vocab"]))
    return save_tiny_llama(
        out,
        tokenizer,
        hidden=int(size["hidden"]),
        layers=int(size["layers"]),
        heads=int(size["heads"]),
        seed=seed,
    )


def encode_demos(policy: Policy, demos: list[dict[str, Any]]) -> list[tuple[list[int], int]]:
    """(ids, prompt length) per demonstration; the reply ends with end-of-sequence. A ``chat``
    demonstration is encoded by the chat template as the LLM backends encode it."""
    eos = policy.tokenizer.eos_token_id
    out = []
    for d in demos:
        chat = d.get("chat")
        prompt = chat_ids(policy.tokenizer, chat) if chat else policy.encode(d["prompt"])
        reply = policy.tokenizer(d["reply"], add_special_tokens=False)["input_ids"]
        out.append((prompt + list(reply) + [eos], len(prompt)))
    return out


def chat_ids(tokenizer: Any, chat: list[dict[str, str]]) -> list[int]:
    """The prompt ids of ``chat`` with the generation prompt, as the ``hf`` backend builds them."""
    from benchmark.llm.hf import FALLBACK_TEMPLATE
    from benchmark.llm.prefix_cache import template_ids

    if tokenizer.chat_template is None:  # as the backend renders it (a model without a template)
        tokenizer = copy.copy(tokenizer)
        tokenizer.chat_template = FALLBACK_TEMPLATE
    return template_ids(tokenizer, chat, generation_prompt=True)


def _evenly(demos: list[dict[str, Any]], keep: int) -> list[dict[str, Any]]:
    """``keep`` demonstrations drawn evenly across the list (all when ``keep`` is 0)."""
    if keep <= 0 or keep >= len(demos):
        return demos
    return [demos[k * len(demos) // keep] for k in range(keep)]


ROUTINE_SKILLS = ("explore", "wait")  # decisions repeated many times an episode


def decision_weight(reply: str, routine: float) -> float:
    """The loss weight of a demonstration: ``routine`` for a reply whose action is a routine
    skill (``explore``, ``wait``: most of an episode's decisions, and the easiest), 1 for the
    rest (pickup, put, open, toggle, a navigate to a target: the decisions that matter). A
    reply in JSON (``{"action": ...}``) or a plain action line."""
    try:
        action = json.loads(reply).get("action", "")
    except (json.JSONDecodeError, AttributeError):
        action = reply
    skill = str(action).partition("|")[0].split(" ", 1)[0].strip()
    return routine if skill in ROUTINE_SKILLS else 1.0


def reply_loss(
    policy: Policy, rows: list[tuple[list[int], int]], weights: list[float] | None = None
) -> torch.Tensor:
    """Mean negative log-likelihood of the reply tokens, scoring only those: the rows are
    left-padded so that every reply ends at the last position, and the vocabulary projection
    runs on the last (longest reply) positions alone instead of the whole prompt (a reply is a
    few dozen tokens, a prompt a few hundred, the vocabulary 49k wide). Equal to
    :func:`sft_loss`. ``weights`` (one per row) weigh each row's reply tokens."""
    pad = policy.tokenizer.pad_token_id
    width = max(len(ids) for ids, _ in rows)
    keep = max(len(ids) - start for ids, start in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros(len(rows), keep)
    for b, (row, start) in enumerate(rows):
        ids[b, width - len(row) :] = torch.tensor(row)
        attn[b, width - len(row) :] = 1
        mask[b, keep - (len(row) - start) :] = 1
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    dev = policy.device
    out = policy.model(
        input_ids=ids.to(dev),
        attention_mask=attn.to(dev),
        position_ids=positions.to(dev),
        logits_to_keep=keep + 1,
    )
    # The logit at a position scores the next token: the last keep + 1 positions score the
    # last keep tokens, and the very last one scores nothing.
    logsm = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)
    logp = logsm.gather(-1, ids[:, width - keep :].to(dev).unsqueeze(-1)).squeeze(-1)
    mask = mask.to(dev)
    if weights is not None:
        mask = mask * torch.tensor(weights, dtype=mask.dtype, device=dev).unsqueeze(-1)
    return -(logp * mask).sum() / mask.sum()


def sft_loss(policy: Policy, rows: list[tuple[list[int], int]]) -> torch.Tensor:
    """Mean negative log-likelihood of the reply tokens, scoring every position (the
    reference :func:`reply_loss` is checked against)."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), policy.tokenizer.pad_token_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros(ids.shape)
    for b, (row, start) in enumerate(rows):
        ids[b, : len(row)] = torch.tensor(row)
        attn[b, : len(row)] = 1
        mask[b, start : len(row)] = 1
    out = policy.forward(ids, attn, entropy=False)
    mask = mask.to(out.logp.device)
    return -(out.logp * mask).sum() / mask.sum()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    tmp.replace(path)


def keep_routine(demos: list[dict[str, Any]], share: float, seed: int) -> list[dict[str, Any]]:
    """The demonstrations with only a seeded ``share`` of the routine ones (``explore``,
    ``wait``) kept, in their order; the others are all kept."""
    if not 0 <= share <= 1:
        raise ValueError(f"routine_keep={share}: a share is between 0 and 1")
    rng = random.Random(seed)
    return [d for d in demos if decision_weight(d["reply"], 0.0) > 0 or rng.random() < share]


def sft_demonstrations(cfg: Any, output_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The demonstrations this run trains on and their statistics: read back from
    ``output_dir`` when a run there got as far (``resume``), else from ``demos_file`` or played
    by the teacher, then thinned (``routine_keep``, ``max_demos``) and written there."""
    used, stats_file = output_dir / "demos.jsonl", output_dir / "demos.json"
    if cfg.get("resume", True) and used.is_file() and stats_file.is_file():
        return _read_jsonl(used), json.loads(stats_file.read_text())
    if cfg.get("demos_file"):
        path = Path(cfg.demos_file)
        if not path.is_file():
            raise ValueError(f"demos_file={str(path)!r} is not a file")
        demos = _read_jsonl(path)
        stats: dict[str, Any] = {"demonstrations": len(demos), "demos_file": str(path)}
    elif cfg.get("format", "rl_view") != "rl_view":
        from baselines.rl.recipes.llm_demos import llm_demonstrations

        demos, stats = llm_demonstrations(cfg)
    else:
        demos, stats = demonstrations(cfg)
    demos = keep_routine(demos, float(cfg.get("routine_keep", 1.0)), cfg.seed)
    demos = _evenly(demos, int(cfg.get("max_demos", 0)))
    stats["demonstrations_used"] = len(demos)
    if not demos:
        raise ValueError("the teacher produced no usable demonstrations")
    _write_jsonl(used, demos)
    stats_file.write_text(json.dumps(stats, indent=1))
    return demos, stats


CHECKPOINT = "checkpoint.pt"


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def run_sft(cfg: Any, output_dir: Path, log: Any = print) -> dict[str, Any]:
    """Collect demonstrations, build or load the model, fine-tune it, and save it. Every
    ``checkpoint_every`` steps the run's state (trainable weights, optimizer, data order, loss
    so far) is saved in ``output_dir``; run again there (``resume``) and it continues from it."""
    torch.manual_seed(cfg.seed)
    output_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    llm_format = cfg.get("format", "rl_view") != "rl_view"
    demos, stats = sft_demonstrations(cfg, output_dir)
    log(
        f"{stats['demonstrations_used']} demonstrations "
        + (
            f"from {cfg.episodes} {cfg.teacher} episodes (teacher SR {stats['teacher_SR']:.2f}, "
            f"{stats['skipped']} decisions skipped)"
            if "teacher_SR" in stats
            else f"of {stats['demonstrations']} in {stats.get('demos_file')}"
        )
    )
    if llm_format and cfg.init == "tiny":
        raise ValueError(f"format={cfg.format} trains the LLM baselines' model: init=smollm2")
    init_dir = (
        build_tiny(output_dir / "init", demos, cfg.tiny, cfg.seed)
        if cfg.init == "tiny"
        else resolve_model_dir(cfg.init)
    )
    lora = (
        LoraOptions(
            r=cfg.lora_r,
            alpha=cfg.lora_alpha,
            target_modules=tuple(cfg.lora_targets),
            layers=int(cfg.get("lora_layers", 0)),
        )
        if cfg.get("lora")
        else None
    )
    policy = Policy(init_dir, lora=lora, threads=cfg.threads)
    if cfg.get("init_adapter"):
        if lora is None:
            raise ValueError("init_adapter starts LoRA training: set lora=true")
        from baselines.llm_support import resolve_adapter
        from benchmark.llm.adapters import load_trainable

        load_trainable(policy.model, resolve_adapter(cfg.init_adapter), cfg.init)
    rows = encode_demos(policy, demos)
    routine = float(cfg.get("routine_weight", 1.0))
    if routine < 0:
        raise ValueError(f"routine_weight={routine}: a loss weight is >= 0")
    weights = [decision_weight(d["reply"], routine) for d in demos]
    optimizer = torch.optim.AdamW(list(policy.parameters()), lr=cfg.lr)
    rng = random.Random(cfg.seed)
    every = int(cfg.get("checkpoint_every", 0))
    bf16 = bool(cfg.get("bf16", False))
    ckpt = output_dir / CHECKPOINT
    state: dict[str, Any] = {
        "epoch": 0,
        "next": 0,
        "order": None,
        "epoch_losses": [],
        "losses": [],
        "seconds": 0.0,
    }
    if cfg.get("resume", True) and ckpt.is_file():
        state = torch.load(ckpt, weights_only=False)
        policy.load_weights(state.pop("weights"))
        optimizer.load_state_dict(state.pop("optimizer"))
        rng.setstate(state.pop("rng"))
        log(f"resumed at epoch {state['epoch'] + 1}, demonstration {state['next']}")
    steps = 0
    policy.model.train()
    while state["epoch"] < cfg.epochs:
        if state["order"] is None:
            state["order"] = list(range(len(rows)))
            rng.shuffle(state["order"])
        order = state["order"]
        for k in range(state["next"], len(order), cfg.batch_size):
            batch = order[k : k + cfg.batch_size]
            with torch.autocast(policy.device.type, torch.bfloat16, enabled=bf16):
                loss = reply_loss(policy, [rows[i] for i in batch], [weights[i] for i in batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(policy.parameters()), 1.0)
            optimizer.step()
            state["epoch_losses"].append(loss.item())
            state["next"] = k + cfg.batch_size
            steps += 1
            if every and steps % every == 0:
                seconds = state["seconds"] + time.perf_counter() - start
                _save_checkpoint(
                    ckpt,
                    {
                        **state,
                        "seconds": seconds,
                        "weights": policy.weights(),
                        "optimizer": optimizer.state_dict(),
                        "rng": rng.getstate(),
                    },
                )
                done = state["epoch"] * len(order) + min(state["next"], len(order))
                log(
                    f"step {steps}: {done}/{cfg.epochs * len(order)} demonstrations, "
                    f"loss {sum(state['epoch_losses'][-every:]) / every:.4f}, {seconds:.0f} s"
                )
        state["losses"].append(sum(state["epoch_losses"]) / max(1, len(state["epoch_losses"])))
        log(f"epoch {state['epoch'] + 1}/{cfg.epochs}: loss {state['losses'][-1]:.4f}")
        state.update(epoch=state["epoch"] + 1, next=0, order=None, epoch_losses=[])
    policy.model.eval()
    if lora is not None:
        saved = save_lora(policy, output_dir / "adapter", cfg.get("adapter"))
    else:
        from baselines.rl.core.policy import policies_dir

        saved = policy.save_pretrained(output_dir / "model")
        if cfg.name:
            saved = policy.save_pretrained(policies_dir() / cfg.name)
    result = {
        **stats,
        "epoch_losses": state["losses"],
        "seconds": round(state["seconds"] + time.perf_counter() - start, 1),
        "parameters": sum(p.numel() for p in policy.model.parameters()),
        "trained_parameters": sum(p.numel() for p in policy.parameters()),
        "saved": str(saved),
    }
    (output_dir / "sft.json").write_text(json.dumps(result, indent=1))
    ckpt.unlink(missing_ok=True)
    log(f"saved {saved} ({result['parameters']:,} parameters, {result['seconds']} s)")
    return result


def save_lora(policy: Policy, out: Path, name: str | None) -> Path:
    """Save ``policy``'s LoRA adapter to ``out`` and, with ``name``, as the committed adapter
    ``baselines/adapters/<name>`` (what ``llm.adapter=<name>`` loads)."""
    from baselines.llm_support import ADAPTERS_DIR
    from benchmark.llm.adapters import save_adapter

    base = policy.model_dir.name
    saved = save_adapter(policy.model, out, base)
    if name:
        saved = save_adapter(policy.model, ADAPTERS_DIR / name, base)
    return saved
