"""Imitation at scale: SFT that resumes where it was interrupted, routine decisions thinned,
DAgger labelling the learner's own states with the teacher's decisions, and imitation
accuracy by skill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from safetensors.torch import load_file

from baselines.llm_agents.team import LLMAgentsTeam, read_decision
from baselines.rl.core.config import SFTConfig
from baselines.rl.recipes.dagger import DaggerTeam, collect
from baselines.rl.recipes.imitation import (
    action_of,
    heldout_decisions,
    imitation_accuracy,
    skill_of,
)
from baselines.rl.recipes.sft import keep_routine, run_sft
from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.llm.base import Generation
from benchmark.llm.resources import LLMResources

TASKS = ["transport_apple_fridge_v0", "switch_off_bedroom_v0", "search_phone_bedroom_v0"]


class Interrupted(Exception):
    pass


def _sft(tiny_model: Path, **changes) -> OmegaConf:
    cfg = OmegaConf.structured(SFTConfig)
    cfg.merge_with(
        {
            "format": "llm_agents",
            "prompt": "llm_agents_v4",
            "tasks": TASKS[:1],
            "episodes": 1,
            "init": str(tiny_model),
            "lora": True,
            "lora_r": 4,
            "lora_alpha": 8,
            "batch_size": 8,
            "epochs": 2,
            "lr": 1e-3,
            "threads": 1,
            "name": None,
            "max_demos": 48,
            **changes,
        }
    )
    return cfg


def test_sft_interrupted_and_resumed_ends_with_the_weights_of_an_uninterrupted_run(
    tmp_path: Path, tiny_model: Path
) -> None:
    whole = run_sft(_sft(tiny_model), tmp_path / "whole", log=lambda _: None)

    def stop_at_step_8(line: str) -> None:
        if line.startswith("step 8:"):
            raise Interrupted

    cut = _sft(tiny_model, checkpoint_every=4)
    with pytest.raises(Interrupted):  # in the second epoch (6 steps an epoch)
        run_sft(cut, tmp_path / "cut", log=stop_at_step_8)
    assert (tmp_path / "cut" / "checkpoint.pt").is_file()
    said: list[str] = []
    resumed = run_sft(cut, tmp_path / "cut", log=said.append)
    assert any(line.startswith("resumed at epoch 2, demonstration 16") for line in said)
    assert not (tmp_path / "cut" / "checkpoint.pt").exists()  # a finished run keeps none
    a = load_file(str(tmp_path / "whole" / "adapter" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "cut" / "adapter" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)
    assert resumed["epoch_losses"] == pytest.approx(whole["epoch_losses"])
    # Without resume the run starts over (the demonstrations are played again).
    assert run_sft(_sft(tiny_model, resume=False, epochs=1), tmp_path / "cut", log=said.append)


def test_routine_decisions_are_thinned_and_the_others_all_kept() -> None:
    demos = [{"reply": json.dumps({"action": a})} for a in ["explore"] * 200 + ["pickup Apple"] * 5]
    kept = keep_routine(demos, 0.25, seed=0)
    assert sum(action_of(d["reply"]) == "pickup Apple" for d in kept) == 5
    assert 30 <= sum(action_of(d["reply"]) == "explore" for d in kept) <= 70
    assert keep_routine(demos, 1.0, seed=0) == demos
    assert len(keep_routine(demos, 0.0, seed=0)) == 5
    with pytest.raises(ValueError, match=r"routine_keep=1\.5"):
        keep_routine(demos, 1.5, seed=0)


def test_dagger_labels_the_learners_own_states_with_the_teachers_decisions(
    tiny_model: Path, llm_pool
) -> None:
    llm = {"backend": "hf", "model": str(tiny_model), "options": {}}
    env = make_env(TASKS[0], n_agents=2, seed=3)
    obs, _ = env.reset(seed=3)
    dagger = DaggerTeam(LLMAgentsTeam(llm=llm, prompt="llm_agents_v4"), make_team("heuristic"))
    dagger.bind(LLMResources(llm_pool))
    shadow = make_team("heuristic")  # the teacher fed the same observations, on its own
    agents = list(env.possible_agents)
    dagger.reset(agents, env.task_info())
    shadow.reset(agents, env.task_info())
    played, said = [], []
    for _ in range(8):
        deciding = [a for a in agents if obs[a]["needs_decision"]]
        before = len(dagger.pairs)
        actions = dagger.act(obs)
        teacher = shadow.act(obs)
        for (agent, chat, reply), a in zip(dagger.pairs[before:], deciding, strict=True):
            assert agent == a and chat == dagger.learner.chats[a]  # the learner's prompt
            head = teacher[a].partition("|")[0].strip()
            assert read_decision(reply, dagger.learner.constraint(a, obs[a]).schema)
            said.append(action_of(reply) == dagger.learner.names[a].shorten(head))
            played.append(actions[a].partition("|")[0].strip() == head)
        obs, *_ = env.step(actions)  # the learner's actions are what the env plays
    assert said and all(said)  # every label is the teacher's decision there
    assert not all(played)  # and the random learner went its own way
    dagger.close()


def test_a_dagger_round_goes_on_from_the_episodes_not_yet_written(
    tmp_path: Path, tiny_model: Path
) -> None:
    llm = {"backend": "hf", "model": str(tiny_model), "options": {}}
    out = tmp_path / "round.jsonl"
    episodes = [(TASKS[1], 5), (TASKS[2], 6)]
    first = collect(episodes[:1], llm, out, batch=1, log=lambda _: None)
    rows = out.read_text().splitlines()
    assert len(rows) == first[0]["decisions"] - first[0]["skipped"] > 0
    # An interruption after the demonstrations of episode 2 were written, before its summary.
    with out.open("a") as f:
        f.write(json.dumps({"task": TASKS[2], "seed": 6, "chat": [], "reply": "{}"}) + "\n")
    both = collect(episodes, llm, out, batch=2, log=lambda _: None)
    assert [(r["task"], r["seed"]) for r in both] == episodes
    assert both[0] == first[0]  # not played again
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == sum(r["decisions"] - r["skipped"] for r in both)
    assert all(line["chat"] for line in lines)  # the half-written episode's row is gone


class KnowsTheAnswers:
    """A stand-in learner that replies what the teacher decided, or always explores."""

    def __init__(self, answers: dict[str, str], explore_only: bool = False) -> None:
        self.answers, self.explore_only = answers, explore_only

    def generate(self, chats, sampling, constraints=None) -> list[Generation]:
        out = []
        for chat in chats:
            text = (
                json.dumps({"action": "explore"})
                if self.explore_only
                else self.answers[json.dumps(chat)]
            )
            out.append(Generation(text, [1], [0.0], [1], "stop", constrained=True))
        return out


def test_imitation_accuracy_is_counted_by_the_teachers_skill() -> None:
    decisions, stats = heldout_decisions(TASKS, episodes=3, per_skill=5)
    assert stats["teacher_SR"] > 0 and decisions
    skills = {skill_of(action_of(d["reply"])) for d in decisions}
    assert "explore" in skills and len(skills) >= 4
    assert all(sum(skill_of(action_of(d["reply"])) == s for d in decisions) <= 5 for s in skills)
    answers = {json.dumps(d["chat"]): d["reply"] for d in decisions}
    perfect = imitation_accuracy(KnowsTheAnswers(answers), decisions)
    assert perfect["all"]["n"] == len(decisions)
    assert all(row["action"] == row["skill"] == 1.0 for row in perfect.values())
    explorer = imitation_accuracy(KnowsTheAnswers(answers, explore_only=True), decisions)
    assert explorer["explore"]["action"] == 1.0
    assert all(row["chosen"] == {"explore": row["n"]} for s, row in explorer.items() if s in skills)
    assert perfect["explore"]["chosen"] == {"explore": perfect["explore"]["n"]}
    assert explorer["critical"]["action"] == explorer["critical"]["target"] == 0.0
    assert explorer["all"]["action"] == pytest.approx(
        explorer["explore"]["n"] / len(decisions), abs=5e-4
    )
