"""The ``policy`` team: trained policies evaluated like any other team (runner inline and on Ray,
replayable traces, held-out evaluation with exact intervals), LoRA adapters, and training
rollouts played by the same team on the one episode loop."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.tiny_policy import warm_started_policy
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from baselines.rl.core.agent_view import AgentView
from baselines.rl.core.config import EvalSettings, RolloutSettings
from baselines.rl.core.policy import LoraOptions, Policy
from baselines.rl.core.policy_team import PolicyTeam, sampling_seed
from baselines.rl.core.rollout import EpisodeSpec, play_episode
from baselines.rl.core.samples import collate, episode_samples
from baselines.rl.recipes.evaluate import (
    evaluate_policy,
    format_row,
    held_out_entries,
    training_config,
)
from benchmark.agents import make_team
from benchmark.env import CollabEnv, EnvOptions
from benchmark.env.replay import replay
from benchmark.llm.base import Sampling
from benchmark.metrics.stats import clopper_pearson
from benchmark.paths import CONFIGS_DIR, REPO_ROOT
from benchmark.rollout import run_episode
from benchmark.runner.config import register_configs

TASK = "transport_apple_fridge_v0"
TEAM = "baselines.rl.core.policy_team:PolicyTeam"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A tiny policy warm-started on a few heuristic episodes."""
    out = tmp_path_factory.mktemp("sft")
    warm_started_policy(out, episodes=4, threads=1)
    return out / "model"


def _reference_play(
    generators: dict[str, Policy], spec: EpisodeSpec, options: RolloutSettings
) -> tuple[dict[str, list[list[Any]]], str]:
    """The episode loop training rollouts ran before they were played by the policy team on
    ``run_episode``: the behaviour the team must reproduce token for token. Per agent, its
    decisions as [prompt ids, generated ids, logprobs, reply, action, reward, segment]."""
    env = CollabEnv(spec.task, n_agents=spec.n_agents, options=options.env_options(spec.split))
    obs, _ = env.reset(seed=spec.seed)
    agents = list(env.possible_agents)
    views = {
        a: AgentView(a, agents, env.instruction, options.history, options.max_objects)
        for a in agents
    }
    out: dict[str, list[list[Any]]] = {a: [] for a in agents}
    context: dict[str, list[int]] = {a: [] for a in agents}
    segment = dict.fromkeys(agents, 0)
    call = 0
    infos: dict[str, Any] = {}
    while env.agents:
        for a in agents:
            views[a].update(obs[a])
        deciding = [a for a in agents if obs[a]["needs_decision"]]
        prompts = []
        for a in deciding:
            g = generators.get(a) or generators["shared"]
            text = views[a].prompt()
            if options.mode == "concat" and context[a]:
                ids = g.encode("\n" + text)
                if len(context[a]) + len(ids) + options.max_tokens > options.max_context:
                    context[a], segment[a] = [], segment[a] + 1
                    ids = g.encode(text)
                ids = context[a] + ids
            else:
                ids = g.encode(text)
            prompts.append(ids)
        sampling = Sampling(
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            top_p=options.top_p,
            seed=(spec.gen_seed * 1_000_003 + call) % 2**63,
        )
        call += 1
        generated = {}
        for key, g in generators.items():
            mine = [k for k, a in enumerate(deciding) if key in (a, "shared")]
            if mine:
                outs = g.generate([prompts[k] for k in mine], sampling)
                generated.update(zip(mine, outs, strict=True))
        actions = {}
        for k, a in enumerate(deciding):
            gen, logp = generated[k]
            reply = (generators.get(a) or generators["shared"]).decode(gen)
            actions[a] = views[a].to_action(reply)
            out[a].append([prompts[k], gen, logp, reply, actions[a], 0.0, segment[a]])
            if options.mode == "concat":
                context[a] = prompts[k] + gen
        obs, rewards, _, _, infos = env.step(actions)
        for a, r in rewards.items():
            if out[a]:
                out[a][-1][5] += float(r)
    return out, next(iter(infos.values()))["trace"]["trace_hash"]


@pytest.mark.parametrize("mode", ["per_step", "concat_per_agent"])
def test_rollouts_on_the_episode_loop_play_exactly_the_reference_loop(
    mode: str, model: Path
) -> None:
    shared = Policy(model, threads=1)
    if mode == "per_step":
        generators = {"shared": shared}
        options = RolloutSettings(max_tokens=8, temperature=0.9, history=1)
    else:
        other = Policy(model, threads=1)
        with torch.no_grad():
            other.model.lm_head.weight.mul_(1.5)  # a second, different policy for agent_1
        generators = {"agent_0": shared, "agent_1": other}
        options = RolloutSettings(mode="concat", max_context=160, max_tokens=8)
    spec = EpisodeSpec(TASK, 2, 4, "train", gen_seed=29)
    expected, trace_hash = _reference_play(generators, spec, options)
    result = play_episode(generators, spec, options, keep_trace=True)
    got = {
        a: [
            [d.prompt_ids, d.gen_ids, d.logprobs, d.reply, d.action, d.reward, d.segment]
            for d in ds
        ]
        for a, ds in result.decisions.items()
    }
    assert got == expected
    assert result.trace["trace_hash"] == trace_hash
    assert [d.turn for d in result.decisions["agent_0"]] == list(
        range(len(result.decisions["agent_0"]))
    )
    if mode != "per_step":
        assert max(d.segment for ds in result.decisions.values() for d in ds) > 0


def test_each_decision_collects_the_rewards_until_the_agents_next_decision(model: Path) -> None:
    team = PolicyTeam(generators={"shared": Policy(model, threads=1)}, episode_seed=3)
    env = CollabEnv(TASK, n_agents=2, options=EnvOptions(split="train"))
    obs, _ = env.reset(seed=5)
    team.reset(list(env.possible_agents), env.task_info())
    # Who decides at each step (the others are busy), then that step's rewards.
    pattern = [{"agent_0", "agent_1"}, {"agent_0"}, {"agent_1"}, {"agent_0"}, {"agent_0"}]
    for t, deciding in enumerate(pattern):
        observed = {a: {**o, "needs_decision": int(a in deciding)} for a, o in obs.items()}
        assert set(team.act(observed)) == deciding
        team.rewarded({"agent_0": 10.0**t, "agent_1": 2 * 10.0**t})
    got = {a: [d.reward for d in ds] for a, ds in team.decisions.items()}
    assert got == {"agent_0": [1.0, 110.0, 1000.0, 10000.0], "agent_1": [22.0, 22200.0]}
    assert team.metrics()["llm/calls"] == 6.0


def _run_cfg(tmp_path: Path, *overrides: str):
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        return compose(
            "run", overrides=[f"output_dir={tmp_path}", "logger.console=false", *overrides]
        )


def test_the_policy_config_carries_the_training_defaults_and_is_registered(
    model: Path, tmp_path: Path
) -> None:
    cfg = _run_cfg(tmp_path, "baseline=policy", f"baseline.checkpoint={model}")
    kwargs = OmegaConf.to_container(cfg.baseline.kwargs, resolve=True)
    assert kwargs["checkpoint"] == str(model) and kwargs["adapter"] is None
    rollout, evaluation = RolloutSettings(), EvalSettings()
    for name in ("history", "max_objects", "max_tokens", "top_p", "mode", "max_context"):
        assert kwargs[name] == getattr(rollout, name), name
    assert kwargs["temperature"] == evaluation.temperature
    team = make_team(TEAM, **kwargs)
    assert isinstance(team, PolicyTeam) and team.history == rollout.history
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["collab_bench.agents"]["policy"] == TEAM
    missing = _run_cfg(tmp_path, "baseline=policy")
    with pytest.raises(ValueError, match=r"baseline\.checkpoint="):
        make_team(TEAM, **OmegaConf.to_container(missing.baseline.kwargs, resolve=True))


def test_held_out_evaluation_runs_through_the_runner_inline_and_on_ray(
    model: Path, tmp_path: Path
) -> None:
    train = training_config()
    train.data.tasks = [TASK, "transport_produce_fridge_v0"]
    options = {"episodes": 3, "train": train, "team": TEAM}
    (inline,) = evaluate_policy(str(model), tmp_path / "inline", workers=0, **options)
    (on_ray,) = evaluate_policy(str(model), tmp_path / "ray", workers=2, **options)
    rows = {}
    for name in ("inline", "ray"):
        lines = (tmp_path / name / "episodes.jsonl").read_text().splitlines()
        rows[name] = {r["key"]: r for r in map(json.loads, lines)}
    assert sorted((r["task"], r["seed"], r["split"]) for r in rows["inline"].values()) == [
        (TASK, 1_000_000, "val"),
        (TASK, 1_000_002, "val"),
        ("transport_produce_fridge_v0", 1_000_001, "val"),
    ]
    # The same episodes sample the same way whichever process plays them.
    assert {k: r["trace_hash"] for k, r in rows["inline"].items()} == {
        k: r["trace_hash"] for k, r in rows["ray"].items()
    }
    for row in rows["ray"].values():
        assert row["status"] == "ok" and row["llm/calls"] == row["L_decisions"] > 0
        assert row["llm/tokens_out"] >= row["llm/calls"]
        trace = json.loads((tmp_path / "ray" / row["trace_path"]).read_text())
        assert replay(trace).ok
    successes = sum(r["SR"] for r in rows["inline"].values())
    assert inline["episodes"] == 3 and inline["errors"] == 0
    assert (inline["SR_lo"], inline["SR_hi"]) == pytest.approx(clopper_pearson(successes, 3))
    assert inline["SR"] == on_ray["SR"] and inline["redundancy"] == on_ray["redundancy"]
    assert "SR" in format_row(inline) and (tmp_path / "ray" / "summary.md").is_file()


def test_episodes_get_their_own_sampling_seed_from_the_episode_seed() -> None:
    seeds = []
    for episode_seed in (0, 1, 0):
        env = CollabEnv(TASK, n_agents=2, options=EnvOptions(split="val"))
        env.reset(seed=episode_seed)
        seeds.append(sampling_seed(0, env.task_info().seed))
    assert seeds[0] == seeds[2] != seeds[1]
    assert sampling_seed(1, 0) != seeds[0]
    assert held_out_entries(training_config(), 2)[0]["seeds"] == [1_000_000, 1_000_001]


def _play(team: PolicyTeam, seed: int = 2) -> list[tuple[list[int], list[float]]]:
    env = CollabEnv(TASK, n_agents=2, options=EnvOptions(split="train"))
    run_episode(env, team, seed=seed)
    return [(d.gen_ids, d.logprobs) for ds in team.decisions.values() for d in ds]


def test_a_lora_adapter_is_applied_on_the_checkpoint(model: Path, tmp_path: Path) -> None:
    lora = Policy(model, lora=LoraOptions(r=4, alpha=8), threads=1)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in lora.model.named_parameters():
            if "lora_B" in name:  # zero at initialisation: give the adapter an effect
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    lora.model.save_pretrained(tmp_path / "adapter")
    lora.save_pretrained(tmp_path / "merged")
    seeded = {"episode_seed": 5, "max_tokens": 6}
    base = PolicyTeam(str(model), **seeded)
    adapted = PolicyTeam(str(model), adapter=str(tmp_path / "adapter"), **seeded)
    merged = PolicyTeam(str(tmp_path / "merged"), **seeded)
    got, want = _play(adapted), _play(merged)
    assert [ids for ids, _ in got] == [ids for ids, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    assert got != _play(base)
    # The adapted logprobs are those of the peft model itself (adapters not merged).
    result = play_episode(
        adapted.generators["shared"],
        EpisodeSpec(TASK, 2, 2, "train", gen_seed=5),
        RolloutSettings(max_tokens=6),
    )
    batch = collate(episode_samples(result), lora.tokenizer.pad_token_id)
    with torch.no_grad():
        out = lora.forward(batch.input_ids, batch.attention_mask, entropy=False)
    assert float(((out.logp - batch.rollout_logp).abs() * batch.mask).max()) < 1e-4


def test_bad_policy_team_arguments_are_rejected_with_the_field_named(
    model: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="mode"):
        PolicyTeam(str(model), mode="tree")
    with pytest.raises(ValueError, match="temperature"):
        PolicyTeam(str(model), temperature=-1.0)
    with pytest.raises(ValueError, match="needs a checkpoint"):
        PolicyTeam()
    with pytest.raises(ValueError, match="not both"):
        PolicyTeam(str(model), generators={"shared": Policy(model, threads=1)})
    with pytest.raises(ValueError, match="no-such-policy"):
        PolicyTeam("no-such-policy")
    with pytest.raises(ValueError, match=r"adapter_config\.json"):
        PolicyTeam(str(model), adapter=str(tmp_path))
    team = PolicyTeam(generators={"agent_0": Policy(model, threads=1)})
    env = CollabEnv(TASK, n_agents=2, options=EnvOptions(split="train"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="agent_1"):
        team.reset(list(env.possible_agents), env.task_info())
