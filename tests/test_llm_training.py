"""Training the LLM baselines' model: demonstrations in their own prompts, LoRA adapters that
know their base model, and the baselines as trainable rollout teams (on a tiny model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from baselines.llm_agents.team import read_decision
from baselines.llm_support import config_llm, resolve_adapter
from baselines.rl.core.config import SFTConfig
from baselines.rl.core.policy import LoraOptions, Policy
from baselines.rl.recipes.llm_demos import llm_demonstrations
from benchmark.llm.adapters import merge_adapter, save_adapter
from benchmark.llm.resources import LLMPool
from benchmark.llm.tiny import save_tiny_llama
from benchmark.tasks.decompose import validate

TASKS = ["transport_apple_fridge_v0", "switch_off_bedroom_v0", "search_phone_bedroom_v0"]


def _sft_config(**changes) -> OmegaConf:
    cfg = OmegaConf.structured(SFTConfig)
    cfg.merge_with({"tasks": TASKS, "episodes": 3, **changes})
    return cfg


def test_agent_demonstrations_are_replies_the_agents_schema_accepts() -> None:
    demos, stats = llm_demonstrations(_sft_config(format="llm_agents", teacher="heuristic"))
    assert stats["demonstrations"] == len(demos) > 20
    actions = set()
    for d in demos:
        system, _user = d["chat"]
        assert system["role"] == "system" and d["agent"] in system["content"]
        assert "|" not in d["reply"]  # handles, never objectIds
        value = json.loads(d["reply"])
        actions.add(value["action"].split()[0])
    # The teacher's skills come through, not only exploration.
    assert {"navigate", "pickup"} <= actions
    # Only successful teacher episodes when asked; the others are counted as dropped.
    kept, kept_stats = llm_demonstrations(
        _sft_config(format="llm_agents", teacher="heuristic", successful_only=True)
    )
    assert len(kept) <= len(demos)
    assert kept_stats["episodes_dropped"] == round(3 * (1 - stats["teacher_SR"]))


def test_a_replayed_demonstration_prompt_accepts_its_reply() -> None:
    from baselines.rl.recipes.llm_demos import AgentsDemonstrator
    from benchmark.agents import make_team
    from benchmark.env import make_env

    env = make_env(TASKS[0], n_agents=2, seed=1)
    obs, _ = env.reset(seed=1)
    demo = AgentsDemonstrator(make_team("heuristic"))
    demo.reset(list(env.possible_agents), env.task_info())
    for _ in range(6):
        actions = demo.act(obs)
        for a, _chat, reply in demo.pairs[-len(actions) :]:
            schema = demo.view.constraint(a, obs[a]).schema
            assert read_decision(reply, schema) is not None, reply
        obs, *_ = env.step(actions)
        if not env.agents:
            break


def test_plan_demonstrations_are_valid_plans_over_the_listed_objects() -> None:
    demos, stats = llm_demonstrations(_sft_config(format="llm_planner", teacher="oracle"))
    assert stats["teacher_SR"] == 1.0 and len(demos) == 3
    for d in demos:
        items = json.loads(d["reply"])
        listed = {
            line.split(": ")[0] for line in d["chat"][0]["content"].splitlines() if ": " in line
        }
        plan = validate(items, listed, ["agent_0", "agent_1"], {})
        assert plan.ok and plan.invalid == 0 and not plan.errors
    with pytest.raises(ValueError, match="learns from teacher=oracle"):
        llm_demonstrations(_sft_config(format="llm_planner", teacher="heuristic"))


def _tiny_pair(tmp_path: Path, tokenizer_dir: Path) -> tuple[Path, Path]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    return (
        save_tiny_llama(tmp_path / "a", tok, seed=0),
        save_tiny_llama(tmp_path / "b", tok, seed=1),
    )


def test_an_adapter_loads_on_its_base_model_only(tmp_path: Path, tiny_model: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    base_a, base_b = _tiny_pair(tmp_path, tiny_model)
    policy = Policy(base_a, lora=LoraOptions(r=4, alpha=8))
    with torch.no_grad():  # a non-zero adapter, so merging it changes the outputs
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.05)
    saved = save_adapter(policy.model, tmp_path / "adapter", "tiny-a")
    assert json.loads((saved / "base_model.json").read_text())["name"] == "tiny-a"
    ids = torch.tensor([[1, 2, 3, 4]])
    plain = AutoModelForCausalLM.from_pretrained(base_a)
    merged = merge_adapter(AutoModelForCausalLM.from_pretrained(base_a), saved, "tiny-a")
    assert not torch.allclose(plain(ids).logits, merged(ids).logits)
    with pytest.raises(ValueError, match=r"was trained on 'tiny-a'.*not on this model 'tiny-b'"):
        merge_adapter(AutoModelForCausalLM.from_pretrained(base_b), saved, "tiny-b")
    with pytest.raises(ValueError, match="neither a committed adapter"):
        resolve_adapter("no-such-adapter")
    with pytest.raises(ValueError, match=r"llm\.adapter needs a local model"):
        config = {"backend": "openai", "model": "m", "adapter": str(saved), "options": {}}
        config_llm(config, LLMPool())


def test_llm_agents_play_and_record_decisions_as_a_training_team(tiny_model: Path) -> None:
    from baselines.rl.core.rollout import EpisodeSpec, RolloutSettings, play_episode

    policy = Policy(tiny_model, lora=LoraOptions(r=4, alpha=8))
    spec = EpisodeSpec(TASKS[1], n_agents=2, seed=0, split="train", gen_seed=7)
    options = RolloutSettings(team="llm_agents", temperature=1.0)
    first = play_episode(policy, spec, options)
    again = play_episode(policy, spec, options)
    decisions = [d for ds in first.decisions.values() for d in ds]
    assert decisions and set(first.decisions) == {"agent_0", "agent_1"}
    for d in decisions:
        assert d.gen_ids and len(d.gen_ids) == len(d.logprobs)
        assert all(lp <= 0 for lp in d.logprobs)
    # Seeded per episode: the same spec plays the same way.
    assert [d.gen_ids for ds in again.decisions.values() for d in ds] == [
        d.gen_ids for d in decisions
    ]
    for agent, ds in first.decisions.items():
        assert first.returns[agent] == pytest.approx(sum(d.reward for d in ds))
    # The planner's plans are its decisions.
    planned = play_episode(policy, spec, RolloutSettings(team="llm_planner"))
    assert set(planned.decisions) == {"planner"} and planned.decisions["planner"]


# Two whole llm_agents episodes and an update (about 35 s): the team's rollouts are checked
# above, as are adapters saved and loaded; GRPO updates on the policy team in test_rl_trainer.py.
@pytest.mark.slow
def test_a_grpo_step_on_the_llm_agents_team_updates_and_saves_the_adapter(
    tmp_path: Path, tiny_model: Path
) -> None:
    from baselines.rl.core.app import train
    from baselines.rl.core.config import TrainConfig

    cfg = OmegaConf.structured(TrainConfig)
    cfg.merge_with(
        {
            "policy": {"init": str(tiny_model), "lora": True, "lora_r": 4, "lora_alpha": 8},
            "rollout": {"team": "llm_agents"},
            "data": {"tasks": TASKS[:1], "seeds_per_step": 1, "group_size": 2},
            "trainer": {"max_samples": 6, "minibatch_size": 3, "filter_zero_variance": False},
            "eval": {"every": 0, "episodes": 0},
            "logger": {"console": False, "wandb": False},
            "steps": 1,
            "workers": 0,
            "output_dir": str(tmp_path / "run"),
        }
    )
    result = train(cfg)
    assert result["steps"] == 1
    adapter = tmp_path / "run" / "final_adapter"
    assert (adapter / "adapter_model.safetensors").stat().st_size < 10 * 2**20
    assert (adapter / "base_model.json").is_file()
