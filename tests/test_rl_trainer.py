"""The trainers on the real environment with a tiny SFT-initialised policy: token bookkeeping,
update direction, every algorithm, exact resume (in-process and after a killed process), and
Ray rollout actors playing exactly what the in-process worker plays.

Kept cheap: one seed x two rollouts per step, four generated tokens per decision, one held-out
episode per evaluation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers.tiny_policy import tiny_train_config, warm_started_policy
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from baselines.rl.core.app import train
from baselines.rl.core.config import RolloutSettings, register_configs
from baselines.rl.core.history import continue_history
from baselines.rl.core.policy import Policy
from baselines.rl.core.rollout import EpisodeSpec, play_episode
from baselines.rl.core.samples import collate, episode_samples
from baselines.rl.core.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
TASK = "transport_apple_fridge_v0"


@pytest.fixture(scope="session")
def sft_model(tmp_path_factory) -> Path:
    """A tiny policy warm-started on a few heuristic episodes (tokenizer trained on them)."""
    out = tmp_path_factory.mktemp("sft")
    result = warm_started_policy(out, episodes=6)
    assert result["demonstrations"] > 50 and result["epoch_losses"][0] > 0
    demos = (out / "demos.jsonl").read_text().splitlines()
    assert all(json.loads(d)["prompt"].endswith("Action:") for d in demos)
    return out / "model"


def _cfg(model: Path, out: Path, **overrides) -> OmegaConf:
    return tiny_train_config(model, out, overrides)


def test_generated_ids_and_logprobs_are_kept_exactly(sft_model: Path) -> None:
    policy = Policy(sft_model, threads=1)
    spec = EpisodeSpec(TASK, 2, 3, "train", gen_seed=11)
    result = play_episode(policy, spec, RolloutSettings(max_tokens=8))
    again = play_episode(policy, spec, RolloutSettings(max_tokens=8))
    first = [d.gen_ids for ds in result.decisions.values() for d in ds]
    assert first == [d.gen_ids for ds in again.decisions.values() for d in ds]  # seeded
    batch = collate(episode_samples(result), policy.tokenizer.pad_token_id)
    with torch.no_grad():
        out = policy.forward(batch.input_ids, batch.attention_mask)
    # The trainer's recomputed logprobs of the generated ids equal the rollout's.
    diff = ((out.logp - batch.rollout_logp).abs() * batch.mask).max()
    assert float(diff) < 1e-4
    decision = result.decisions["agent_0"][0]
    assert policy.decode(decision.gen_ids).strip() == decision.reply.strip()
    assert batch.mask.sum() == sum(len(g) for g in first)


def test_update_raises_the_likelihood_of_positive_advantage_replies(
    sft_model: Path, tmp_path: Path
) -> None:
    trainer = Trainer(_cfg(sft_model, tmp_path, trainer={"entropy_coef": 0.0}), tmp_path)
    results = trainer.play(trainer.train_specs(0))
    samples = [s for r in results for s in episode_samples(r)]
    # Judge the two rollouts of each seed against each other by a synthetic return: rollout 0
    # wins. The update must move probability towards the winners' replies.
    for s in samples:
        s.R = 1.0 if s.unit[0] % 2 == 0 else 0.0
    batch = collate(samples, trainer.policy.tokenizer.pad_token_id)

    def mean_logp(rows: torch.Tensor) -> float:
        with torch.no_grad():
            part = batch.select(rows)
            out = trainer.policy.forward(part.input_ids, part.attention_mask)
        return float((out.logp * part.mask).sum() / part.mask.sum())

    winners = torch.nonzero(batch.R == 1.0).squeeze(-1)
    losers = torch.nonzero(batch.R == 0.0).squeeze(-1)
    before = (mean_logp(winners), mean_logp(losers))
    stats = trainer.update(batch)
    after = (mean_logp(winners), mean_logp(losers))
    assert after[0] > before[0] and after[1] < before[1]
    assert stats["charts/zero_variance_frac"] == 0.0 and stats["charts/group_reward_std"] > 0
    assert stats["charts/logprob_mismatch"] < 1e-4


@pytest.mark.parametrize("algo", ["grpo", "ppo", "sppo", "sppo:per_decision"])
def test_every_trainer_runs_a_step_with_its_losses(
    algo: str, sft_model: Path, tmp_path: Path
) -> None:
    algo, _, target = algo.partition(":")
    extra = {"trainer": {"name": algo, "filter_zero_variance": False, "kl_coef": 0.05}}
    if target:
        extra["trainer"]["sppo_target"] = target
    if algo == "ppo":
        extra["trainer"]["return_mode"] = "to_go"
    trainer = Trainer(_cfg(sft_model, tmp_path, **extra), tmp_path)
    before = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    stats = trainer.train_step()
    changed = any(
        not torch.equal(before[k], v) for k, v in trainer.policy.model.state_dict().items()
    )
    assert changed
    for key in (
        "losses/policy",
        "losses/kl",
        "losses/entropy",
        "charts/grad_norm",
        "perf/rollout_s",
        "perf/update_s",
        "perf/tokens_per_s",
        "task/SR",
        "collab/B",
    ):
        assert key in stats and stats[key] == stats[key], key  # present and not NaN
    if algo == "ppo":
        assert "losses/value" in stats
        assert trainer.policy.value_head is not None


def test_concat_mode_and_per_agent_policies(sft_model: Path, tmp_path: Path) -> None:
    cfg = _cfg(
        sft_model,
        tmp_path,
        rollout={"mode": "concat", "max_context": 256},
        policy={"sharing": "per_agent"},
        trainer={"filter_zero_variance": False},
    )
    trainer = Trainer(cfg, tmp_path)
    assert sorted(trainer.policies) == ["agent_0", "agent_1"]
    results = trainer.play(trainer.train_specs(0))
    samples = [s for r in results for s in episode_samples(r, "concat")]
    decisions = [d for r in results for ds in r.decisions.values() for d in ds]
    # One sequence per agent and segment; every generated token is in the loss mask once.
    assert len(samples) < len(decisions)
    assert sum(sum(s.mask) for s in samples) == sum(len(d.gen_ids) for d in decisions)
    assert max(len(s.ids) for s in samples) <= 256
    before = {
        k: p.model.state_dict()["lm_head.weight"].clone() for k, p in trainer.policies.items()
    }
    trainer.update_samples(samples)
    after = {k: p.model.state_dict()["lm_head.weight"] for k, p in trainer.policies.items()}
    assert all(not torch.equal(before[k], after[k]) for k in before)
    assert not torch.equal(after["agent_0"], after["agent_1"])  # each trained on its own agent


@pytest.mark.parametrize("distinct", [False, True], ids=["shared_prompts", "distinct_prompts"])
def test_rows_scored_from_their_prompt_length_give_the_same_results(
    sft_model: Path, distinct: bool
) -> None:
    """Rows sharing a prompt run it once; rows with distinct prompts run left-padded with the
    vocabulary projection on their continuations only: the same logprobs, entropies, values
    and gradients as scoring every position."""
    policy = Policy(sft_model, value_head=True, threads=1)
    g = torch.Generator().manual_seed(0)
    # Seeded here: the global generator's state depends on which tests ran before in the worker.
    torch.nn.init.normal_(policy.value_head.weight, generator=g)
    prompts = [torch.randint(5, 400, (n,), generator=g).tolist() for n in (20, 13, 17, 9, 25, 11)]
    rows, starts = [], []
    for k in range(6):
        prompt = prompts[k] if distinct else prompts[k % 2]
        rows.append(prompt + torch.randint(5, 400, (3 + k,), generator=g).tolist())
        starts.append(len(prompt))
    ids = torch.zeros(6, max(map(len, rows)), dtype=torch.long)
    attn, mask = torch.zeros_like(ids), torch.zeros(ids.shape)
    for b, r in enumerate(rows):
        ids[b, : len(r)], attn[b, : len(r)] = torch.tensor(r), 1
        mask[b, starts[b] : len(r)] = 1
    outs, grads = [], []
    for lengths in (None, torch.tensor(starts)):
        out = policy.forward(ids, attn, values=True, prompt_lengths=lengths)
        ((out.logp + out.values) * mask).sum().backward()
        grads.append([p.grad.clone() for p in policy.parameters()])
        policy.model.zero_grad()
        policy.value_head.zero_grad()
        outs.append(out)
    for field in ("logp", "entropy", "values"):
        a, b = getattr(outs[0], field), getattr(outs[1], field)
        assert float(((a - b) * mask).abs().max().detach()) < 1e-4, field
    for a, b in zip(*grads, strict=True):
        # Summation order differs, so rounding scales with the gradient's magnitude (entries
        # in the hundreds): compare against that, not entry by entry.
        assert float((a - b).abs().max()) <= 1e-5 * float(b.abs().max()) + 1e-6


def _comparable(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if not k.startswith("perf/")}


def test_resume_continues_exactly_as_the_uninterrupted_run(sft_model: Path, tmp_path: Path) -> None:
    straight = Trainer(_cfg(sft_model, tmp_path / "a"), tmp_path / "a")
    straight.train_step()
    expected = _comparable(straight.train_step())
    first = Trainer(_cfg(sft_model, tmp_path / "b"), tmp_path / "b")
    first.train_step()
    first.save()
    del first
    torch.manual_seed(12345)  # a fresh process would not share the RNG either
    resumed = Trainer(_cfg(sft_model, tmp_path / "b"), tmp_path / "b")
    assert resumed.step == 1
    assert _comparable(resumed.train_step()) == expected


def test_a_lora_checkpoint_holds_the_adapters_alone_and_resumes_exactly(
    sft_model: Path, tmp_path: Path
) -> None:
    lora = {"policy": {"lora": True, "lora_r": 4, "lora_alpha": 8}}
    straight = Trainer(_cfg(sft_model, tmp_path / "a", **lora), tmp_path / "a")
    straight.train_step()
    expected = _comparable(straight.train_step())
    first = Trainer(_cfg(sft_model, tmp_path / "b", **lora), tmp_path / "b")
    first.train_step()
    saved = torch.load(first.save(), weights_only=False)["policies"]["shared"]
    trainable = {n for n, p in first.policy.model.named_parameters() if p.requires_grad}
    assert saved["model_part"] == "trainable" and set(saved["model"]) == trainable
    assert all("lora_" in n for n in saved["model"])
    del first
    torch.manual_seed(12345)
    resumed = Trainer(_cfg(sft_model, tmp_path / "b", **lora), tmp_path / "b")
    assert resumed.step == 1
    assert _comparable(resumed.train_step()) == expected
    # Other LoRA placement: the checkpoint's adapters are not this policy's, and it says so.
    other = {"policy": {"lora": True, "lora_r": 4, "lora_alpha": 8, "lora_layers": 1}}
    with pytest.raises(ValueError, match="adapter tensors are not this policy's"):
        Trainer(_cfg(sft_model, tmp_path / "b", **other), tmp_path / "b")


def test_ray_actors_play_what_the_local_worker_plays(sft_model: Path, tmp_path: Path) -> None:
    local = Trainer(_cfg(sft_model, tmp_path / "l"), tmp_path / "l")
    remote = Trainer(_cfg(sft_model, tmp_path / "r", workers=2), tmp_path / "r")
    try:
        specs = local.train_specs(0)
        remote.sync_weights()
        a, b = local.play(specs), remote.play(specs)
    finally:
        remote.close()
    assert [r.spec for r in a] == [r.spec for r in b]
    for x, y in zip(a, b, strict=True):
        assert {k: [d.gen_ids for d in v] for k, v in x.decisions.items()} == {
            k: [d.gen_ids for d in v] for k, v in y.decisions.items()
        }
        assert x.metrics == y.metrics


def _train_overrides(model: Path, steps: int) -> list[str]:
    return [
        f"policy.init={model}",
        f"steps={steps}",
        "workers=0",
        "threads=1",
        "data.seeds_per_step=1",
        "data.group_size=2",
        "rollout.max_tokens=4",
        "eval.episodes=1",
        "eval.every=0",
        "checkpoint_every=1",
        "logger=console",
        "trainer.entropy_coef=0.01",
        "trainer.minibatch_size=16",
    ]


def _train_cmd(model: Path, out: Path, steps: int) -> list[str]:
    overrides = [*_train_overrides(model, steps), f"hydra.run.dir={out}"]
    return [sys.executable, "-m", "baselines.train", *overrides]


def _train_rows(out: Path) -> dict[int, dict]:
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: _comparable(r) for r in rows if r["kind"] == "train"}


# Three training processes, one killed (about 30 s): resuming is checked in process above and
# for a missed evaluation below; this is the real SIGKILL of a whole training process.
@pytest.mark.slow
def test_a_killed_training_process_resumes_where_it_stopped(
    sft_model: Path, tmp_path: Path
) -> None:
    # The uninterrupted run, in this process, composed from the same command-line overrides.
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        overrides = [*_train_overrides(sft_model, 2), f"output_dir={tmp_path / 'full'}"]
        train(compose("train", overrides=overrides))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        _train_cmd(sft_model, killed, 2),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not (killed / "checkpoints" / "step_1.pt").exists():
        assert time.time() < deadline and proc.poll() is None, "no checkpoint before the kill"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL  # killed, not finished
    subprocess.run(
        _train_cmd(sft_model, killed, 2), cwd=ROOT, env=env, check=True, capture_output=True
    )
    full, resumed = _train_rows(tmp_path / "full"), _train_rows(killed)
    for row in (full[2], resumed[2]):
        row.pop("wall_s")
    assert resumed[2] == full[2]
    # The resumed run's log is one history, as the uninterrupted run's: no step twice, and a
    # clock that goes on from the checkpoint's.
    logged = [json.loads(x) for x in (killed / "metrics.jsonl").read_text().splitlines()]
    straight = [
        json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [(r["kind"], r["step"]) for r in logged] == [(r["kind"], r["step"]) for r in straight]
    clock = [r["wall_s"] for r in logged]
    assert clock == sorted(clock)


def test_an_evaluation_missed_by_a_kill_after_its_checkpoint_is_made_on_resume(
    sft_model: Path, tmp_path: Path
) -> None:
    """A process killed after saving step 1 and before evaluating it: the resumed run evaluates
    step 1's weights first, so its log is the uninterrupted run's, evaluation for evaluation."""
    import shutil

    register_configs()
    overrides = [*_train_overrides(sft_model, 2), "eval.every=1"]
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        train(compose("train", overrides=[*overrides, f"output_dir={tmp_path / 'full'}"]))
        killed = tmp_path / "killed"
        shutil.copytree(tmp_path / "full", killed)
        # What the kill leaves: step 1's checkpoint, the log up to step 1's training row.
        (killed / "checkpoints" / "step_2.pt").unlink()
        rows = (killed / "metrics.jsonl").read_text().splitlines()[:2]
        assert [(json.loads(r)["kind"], json.loads(r)["step"]) for r in rows] == [
            ("eval", 0),
            ("train", 1),
        ]
        (killed / "metrics.jsonl").write_text("".join(r + "\n" for r in rows))
        train(compose("train", overrides=[*overrides, f"output_dir={killed}"]))

    def evals(out: Path) -> dict[int, dict]:
        rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
        assert [(r["kind"], r["step"]) for r in rows] == [
            ("eval", 0),
            ("train", 1),
            ("eval", 1),
            ("train", 2),
            ("eval", 2),
        ]
        return {r["step"]: _comparable(r) for r in rows if r["kind"] == "eval"}

    full, resumed = evals(tmp_path / "full"), evals(killed)
    for row in (*full.values(), *resumed.values()):
        row.pop("wall_s")
    assert resumed == full  # the same weights, evaluated on the same held-out episodes


def test_a_resumed_history_keeps_the_rows_up_to_its_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    rows = [
        {"kind": k, "step": s, "wall_s": float(s)}
        for k, s in [("eval", 0), ("train", 1), ("train", 2), ("eval", 2), ("train", 3)]
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"kind": "tr')
    assert continue_history(path, 2) == rows[:4]
    assert [json.loads(x) for x in path.read_text().splitlines()] == rows[:4]
    abandoned = (tmp_path / "metrics.abandoned.jsonl").read_text().splitlines()
    assert abandoned == [json.dumps(rows[4]), '{"kind": "tr']
    assert continue_history(path, 2) == rows[:4]  # again: nothing more to move
    assert continue_history(path, None) == [] and path.read_text() == ""  # a fresh start
    assert len((tmp_path / "metrics.abandoned.jsonl").read_text().splitlines()) == 6
    path.write_text('{"kind": "train", "step": 1}\nnot json\n{"kind": "train", "step": 2}\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2: not a JSON row"):
        continue_history(path, 2)


@pytest.mark.slow
def test_one_lora_grpo_step_on_the_embedded_smollm2(tmp_path: Path) -> None:
    """The same trainer, LoRA adapters on SmolLM2-135M-Instruct, one CPU step."""
    cfg = _cfg(
        Path("unused"),
        tmp_path,
        policy={"init": "smollm2", "lora": True},
        data={"seeds_per_step": 1, "group_size": 2},
        rollout={"max_tokens": 8},
        trainer={"filter_zero_variance": False, "kl_coef": 0.05, "minibatch_size": 8},
        threads=2,
    )
    cfg.data.tasks = [TASK]
    trainer = Trainer(cfg, tmp_path)
    trainable = {n for n, p in trainer.policy.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    base = {n: p.clone() for n, p in trainer.policy.model.named_parameters() if n in trainable}
    stats = trainer.train_step()
    assert stats["losses/kl"] == stats["losses/kl"] and stats["charts/grad_norm"] > 0
    after = dict(trainer.policy.model.named_parameters())
    assert any(not torch.equal(base[n], after[n]) for n in trainable)
    trainer.save()
    saved = trainer.policy.save_pretrained(tmp_path / "merged")
    assert (saved / "config.json").is_file()


def test_the_training_job_logs_evaluations_and_the_report_reads_them(
    sft_model: Path, tmp_path: Path
) -> None:
    from baselines.rl.recipes.report import write_report

    run = tmp_path / "run"
    cfg = _cfg(sft_model, run, steps=2, eval={"every": 1})
    result = train(cfg)
    assert result["steps"] == 2 and (run / "final_model" / "config.json").is_file()
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["eval", "train", "eval", "train", "eval"]
    # Running the finished run again evaluates nothing again and logs nothing more.
    again = train(cfg)
    assert (run / "metrics.jsonl").read_text().splitlines() == [json.dumps(r) for r in rows]
    assert again["steps"] == 2 and again["final"]["eval/task/SR"] == rows[-1]["eval/task/SR"]
    (summary,) = write_report([run], tmp_path / "report")
    assert summary["steps"] == 2 and summary["SR_before"] == rows[0]["eval/task/SR"]
    assert summary["SR_after"] == rows[-1]["eval/task/SR"]
    assert (tmp_path / "report" / "curves.png").stat().st_size > 1000
    assert "SR_before" in (tmp_path / "report" / "report.md").read_text()
    with pytest.raises(ValueError, match=r"no metrics\.jsonl"):
        write_report([tmp_path / "missing"], tmp_path / "r2")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"trainer": {"name": "dqn"}}, "trainer.name"),
        ({"trainer": {"kl_estimator": "k4"}}, "trainer.kl_estimator"),
        ({"trainer": {"return_mode": "discounted"}}, "trainer.return_mode"),
        ({"trainer": {"group_by": ["scene"]}}, "trainer.group_by"),
        ({"trainer": {"loss_agg": "sum"}}, "trainer.loss_agg"),
        ({"policy": {"sharing": "mixed"}}, "policy.sharing"),
        ({"policy": {"generator": "jax"}}, "policy.generator"),
        ({"policy": {"init": "no-such-policy"}}, "no-such-policy"),
    ],
)
def test_bad_training_configs_are_rejected_before_any_rollout(
    override: dict, field: str, sft_model: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=field):
        Trainer(_cfg(sft_model, tmp_path, **override), tmp_path)
    assert not (tmp_path / "checkpoints").exists()
