"""The KL guard: its pure decisions (thresholds, the index margin, rollbacks, reasons), and the
real training job on a tiny SFT-initialised policy rolling back a real divergence (one update
with an absurd learning rate) to the last checkpoint that passed.

Kept cheap like tests/test_rl_trainer.py: one seed x two rollouts per step, four generated
tokens per decision, one held-out episode per evaluation, a few steps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.tiny_policy import tiny_train_config, warm_started_policy
from omegaconf import OmegaConf

from baselines.rl.core.app import train
from baselines.rl.core.checks import ConfigError
from baselines.rl.core.config import TrainConfig, train_settings
from baselines.rl.core.guard import GuardSettings, KLGuard
from baselines.rl.core.policy import LoraOptions, Policy
from baselines.rl.core.trainer import REF_KL, Trainer

ROOT = Path(__file__).resolve().parents[1]
LR = 1e-4


# ---------------------------------------------------------------------- the decisions alone
def _guard(**settings) -> KLGuard:
    guard = KLGuard(GuardSettings(enabled=True, **settings), lr=LR)
    guard.checkpoint_saved(0)
    return guard


def test_kl_at_or_under_the_threshold_passes_and_over_it_rolls_back() -> None:
    guard = _guard(max_kl=0.02)
    assert guard.check_step(1, 0.0).passed and guard.check_step(2, 0.02).passed
    guard.checkpoint_saved(2)
    decision = guard.check_step(3, 0.5)
    assert decision.action == "rollback" and decision.restore_step == 2
    assert decision.lr == pytest.approx(LR * 0.5) and guard.lr == decision.lr
    assert decision.kl == 0.5 and decision.rollbacks == 1
    assert "KL to the reference 0.5 > max_kl 0.02" in decision.reason
    assert "checkpoint of step 2" in decision.reason and "lr -> 5e-05" in decision.reason


def test_a_kl_that_is_not_a_number_fails() -> None:
    assert _guard().check_step(1, float("nan")).action == "rollback"


def test_each_rollback_multiplies_the_lr_and_the_next_after_the_last_stops() -> None:
    guard = _guard(max_rollbacks=2, lr_factor=0.1)
    first, second = guard.check_step(1, 1.0), guard.check_step(2, 1.0)
    assert [first.action, second.action] == ["rollback", "rollback"]
    assert second.lr == pytest.approx(LR * 0.01)
    stop = guard.check_step(3, 1.0)
    assert stop.action == "stop" and stop.restore_step == 0 and stop.lr == second.lr
    assert "2 rollbacks spent (max_rollbacks=2)" in stop.reason and "stopping" in stop.reason


def test_a_failure_before_any_checkpoint_passed_stops_with_nothing_to_restore() -> None:
    guard = KLGuard(GuardSettings(enabled=True), lr=LR)
    decision = guard.check_step(1, 1.0)
    assert decision.action == "stop" and decision.restore_step is None
    assert "no checkpoint has passed yet" in decision.reason


def test_an_index_drop_beyond_the_margin_below_the_best_evaluation_rolls_back() -> None:
    guard = _guard(max_index_drop=0.1)
    assert guard.check_eval(0, 0.5).passed  # the first evaluation sets the reference
    assert guard.check_eval(1, 0.7).passed
    assert guard.check_eval(2, 0.6).passed  # 0.1 below the best: within the margin
    decision = guard.check_eval(3, 0.55)
    assert decision.action == "rollback" and decision.index == 0.55
    assert "held-out TR 0.550 is 0.150 below the best passing evaluation (0.700 at step 1)" in (
        decision.reason
    )
    assert guard.best == (1, 0.7) and guard.last == (2, 0.6)  # a failed evaluation is not kept


def test_the_last_passing_evaluation_can_be_the_reference_instead() -> None:
    guard = _guard(max_index_drop=0.1, index_reference="last")
    for step, index in enumerate([0.7, 0.6, 0.5, 0.4]):  # a slow slide, 0.1 at a time
        assert guard.check_eval(step, index).passed
    assert guard.check_eval(4, 0.25).action == "rollback"


def test_an_evaluation_without_the_index_passes_and_is_not_kept() -> None:
    guard = _guard()
    assert guard.check_eval(0, None).passed and guard.best is None


def test_the_state_round_trips_through_plain_values() -> None:
    guard = _guard()
    guard.check_eval(0, 0.4)
    guard.check_step(1, 1.0)
    state = json.loads(json.dumps(guard.state_dict()))
    again = KLGuard(GuardSettings(enabled=True), lr=1.0)
    again.load_state_dict(state)
    assert again.state_dict() == guard.state_dict()
    assert (again.lr, again.rollbacks, again.good_step, again.best) == (LR / 2, 1, 0, (0, 0.4))


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"max_kl": 0.0}, "guard.max_kl"),
        ({"lr_factor": 1.0}, "guard.lr_factor"),
        ({"max_index_drop": 1.5}, "guard.max_index_drop"),
        ({"max_rollbacks": -1}, "guard.max_rollbacks"),
        ({"index_reference": "worst"}, "guard.index_reference"),
    ],
)
def test_bad_guard_settings_are_rejected_by_their_dotted_name(values: dict, field: str) -> None:
    cfg = OmegaConf.structured(TrainConfig)
    cfg.merge_with({"output_dir": "/unused", "guard": values})
    with pytest.raises(ConfigError, match=field):
        train_settings(cfg)


def test_the_guard_module_does_not_import_torch() -> None:
    code = (
        "import sys, baselines.rl.core.guard; assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={"PYTHONPATH": "."})


# ---------------------------------------------------------------------- the measurement
def test_the_reference_kl_is_the_exact_kl_of_the_next_token_distributions(
    tiny_model: Path,
) -> None:
    policy = Policy(tiny_model, threads=1)
    policy.freeze_reference()
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(5, 300, (12,), generator=g).tolist()
    rows = [prompt + torch.randint(5, 300, (n,), generator=g).tolist() for n in (3, 5, 4)]
    ids = torch.zeros(3, max(map(len, rows)), dtype=torch.long)
    attn = torch.zeros_like(ids)
    for b, r in enumerate(rows):
        ids[b, : len(r)], attn[b, : len(r)] = torch.tensor(r), 1
    starts = torch.full((3,), len(prompt))
    assert float(policy.reference_kl(ids, attn, starts).abs().max()) == 0.0  # not moved yet
    with torch.no_grad():
        head = policy.model.lm_head.weight
        head.add_(0.5 * torch.randn(head.shape, generator=g))
    kl = policy.reference_kl(ids, attn, starts)
    with torch.no_grad():
        logp = torch.log_softmax(policy.model(input_ids=ids, attention_mask=attn).logits, -1)
        logq = torch.log_softmax(
            policy.reference.frozen_model()(input_ids=ids, attention_mask=attn).logits, -1
        )
    expected = (logp.exp() * (logp - logq)).sum(-1)  # position t-1 predicts token t
    for b, r in enumerate(rows):
        for t in range(len(prompt), len(r)):
            assert float(kl[b, t]) > 0
            assert float(kl[b, t]) == pytest.approx(float(expected[b, t - 1]), rel=1e-4, abs=1e-6)
        assert float(kl[b, len(r) :].abs().sum()) == 0.0  # padding is not scored
    # The plain path (every position after the first) agrees where both score.
    plain = policy.reference_kl(ids, attn)
    assert torch.allclose(plain[:, len(prompt) :], kl[:, len(prompt) :], atol=1e-5)


def test_under_lora_the_reference_is_the_adapter_it_started_from(tiny_model: Path) -> None:
    """GRPO from an SFT or DAgger adapter is measured against that adapter, not against the
    base model: KL 0 before any update, positive after one, and scoring the reference leaves
    the policy's own weights as they were."""
    policy = Policy(tiny_model, lora=LoraOptions(r=4, alpha=8), threads=1)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a trained start: every adapter weight away from its init
        for p in policy.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    ids = torch.randint(5, 300, (2, 14), generator=g)
    attn = torch.ones_like(ids)
    base_kl = float(policy.reference_kl(ids, attn).sum())
    assert base_kl > 0, "without a frozen reference the base model is the reference"
    policy.freeze_reference()
    assert float(policy.reference_kl(ids, attn).abs().max()) == 0.0
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    moved = policy.weights()
    kl = policy.reference_kl(ids, attn)
    assert float(kl[:, 1:].min()) > 0
    assert all(torch.equal(moved[k], v) for k, v in policy.weights().items())
    with torch.no_grad():
        own = policy.forward(ids, attn).logp
        ref = policy.forward(ids, attn, reference=True).logp
    assert not torch.allclose(own, ref)
    assert torch.equal(policy.forward(ids, attn).logp, own)


# ---------------------------------------------------------------------- the real training job
@pytest.fixture(scope="module")
def sft_model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sft")
    warm_started_policy(out, episodes=6)
    return out / "model"


def _cfg(model: Path, out: Path, **overrides) -> OmegaConf:
    guarded = {
        "eval": {"every": 0},
        "checkpoint_every": 1,
        "keep_checkpoints": 0,
        "trainer": {
            "filter_zero_variance": False,  # every step updates (the returns tie)
            "lr": LR,
        },
        "guard": {"enabled": True},
    }
    return tiny_train_config(model, out, guarded, overrides)


def _diverge_at(monkeypatch: pytest.MonkeyPatch, step: int, lr: float = 10.0) -> None:
    """Make the update that produces step ``step`` use learning rate ``lr``, then put the
    optimiser's own rate back: a real divergence of the real weights."""
    update = Trainer.update

    def absurd_once(self: Trainer, batch, key: str = "shared") -> dict[str, float]:
        if self.step + 1 != step:
            return update(self, batch, key)
        groups = self.optimizers[key].param_groups
        kept = [g["lr"] for g in groups]
        for g in groups:
            g["lr"] = lr
        try:
            return update(self, batch, key)
        finally:
            for g, value in zip(groups, kept, strict=True):
                g["lr"] = value

    monkeypatch.setattr(Trainer, "update", absurd_once)


def _rows(run: Path, kind: str) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["kind"] == kind]


def _checkpoint(run: Path, step: int) -> dict:
    return torch.load(run / "checkpoints" / f"step_{step}.pt", weights_only=False)


def _same_weights(a: dict, b: dict) -> bool:
    ma, mb = a["policies"]["shared"]["model"], b["policies"]["shared"]["model"]
    return ma.keys() == mb.keys() and all(torch.equal(ma[k], mb[k]) for k in ma)


def test_the_guard_does_not_fire_on_normal_steps(sft_model: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = train(_cfg(sft_model, run, steps=3, eval={"every": 1}))
    assert result["steps"] == 3 and not _rows(run, "guard")
    kls = [r[REF_KL] for r in _rows(run, "train")]
    assert len(kls) == 3 and all(0 < kl < 0.02 for kl in kls), kls
    assert [r["step"] for r in _rows(run, "eval")] == [0, 1, 2, 3]
    assert all(r["charts/lr"] == LR for r in _rows(run, "train"))
    assert _checkpoint(run, 0)["guard"]["good_step"] == 0  # the start is the first that passed
    assert _checkpoint(run, 3)["guard"]["good_step"] == 3


def test_a_real_divergence_rolls_back_to_the_last_passing_checkpoint_with_a_lower_lr(
    sft_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    _diverge_at(monkeypatch, step=3)
    result = train(_cfg(sft_model, run, steps=4))
    assert result["steps"] == 4
    train_rows = {r["step"]: r for r in _rows(run, "train")}
    assert train_rows[3][REF_KL] > 0.02  # the absurd update really left the reference
    assert all(train_rows[s][REF_KL] < 0.02 for s in (1, 2, 4))
    (row,) = _rows(run, "guard")
    assert row["step"] == 3 and row["guard/action"] == "rollback"
    assert row["guard/restore_step"] == 2 and row["guard/kl"] == train_rows[3][REF_KL]
    assert row["guard/lr"] == pytest.approx(LR / 2) and row["guard/rollbacks"] == 1
    assert "> max_kl 0.02" in row["guard/reason"] and "step 2" in row["guard/reason"]
    # The weights after the rollback (saved at step 3) are those of the passing step 2, with
    # the optimiser's state of step 2 and the lowered learning rate.
    restored, passing = _checkpoint(run, 3), _checkpoint(run, 2)
    assert _same_weights(restored, passing)
    for a, b in zip(
        restored["optimizers"]["shared"]["state"].values(),
        passing["optimizers"]["shared"]["state"].values(),
        strict=True,
    ):
        assert torch.equal(a["exp_avg"], b["exp_avg"])
    assert restored["optimizers"]["shared"]["param_groups"][0]["lr"] == pytest.approx(LR / 2)
    assert train_rows[4]["charts/lr"] == pytest.approx(LR / 2)  # training went on, slower
    # A resumed run keeps the lowered rate and the count of rollbacks.
    resumed = Trainer(_cfg(sft_model, run, steps=4), run, log=lambda *_: None)
    try:
        assert resumed.step == 4 and resumed.lr == pytest.approx(LR / 2)
        assert (resumed.guard.rollbacks, resumed.guard.good_step) == (1, 4)
    finally:
        resumed.close()


def test_after_max_rollbacks_training_stops_on_the_last_passing_weights(
    sft_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    _diverge_at(monkeypatch, step=2)
    result = train(_cfg(sft_model, run, steps=4, guard={"max_rollbacks": 0}))
    assert result["steps"] == 2  # stopped at the divergence
    (row,) = _rows(run, "guard")
    assert row["guard/action"] == "stop" and row["guard/restore_step"] == 1
    assert "max_rollbacks=0" in row["guard/reason"]
    assert [r["step"] for r in _rows(run, "eval")] == [0, 2]  # the final: restored weights
    assert _same_weights(_checkpoint(run, 2), _checkpoint(run, 1))
    final = Policy(run / "final_model", threads=1).model.state_dict()
    saved = _checkpoint(run, 1)["policies"]["shared"]["model"]
    assert final.keys() == saved.keys()
    assert all(torch.equal(final[k], saved[k]) for k in saved)


def test_a_held_out_index_drop_rolls_back_at_the_evaluation(
    sft_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tiny policy scores TR 0 on its held-out episode, so there is nothing to drop from:
    # the real evaluations' TR is replaced by a scripted sequence (0.5, then a drop to 0.3).
    scripted = iter([0.5, 0.3, 0.45])
    evaluate = Trainer.evaluate

    def scripted_tr(self: Trainer) -> dict[str, float]:
        return {**evaluate(self), "eval/task/TR": next(scripted)}

    monkeypatch.setattr(Trainer, "evaluate", scripted_tr)
    run = tmp_path / "run"
    result = train(_cfg(sft_model, run, steps=2, eval={"every": 1}))
    assert result["steps"] == 2 and result["final"]["eval/task/TR"] == 0.45
    (row,) = _rows(run, "guard")
    assert (row["step"], row["guard/action"], row["guard/restore_step"]) == (1, "rollback", 0)
    assert row["guard/index"] == 0.3 and row["guard/kl"] is None
    assert "held-out TR 0.300 is 0.200 below the best passing evaluation" in row["guard/reason"]
    assert _same_weights(_checkpoint(run, 1), _checkpoint(run, 0))
    assert _checkpoint(run, 2)["guard"]["best"] == [0, 0.5]


def test_an_evaluation_interrupted_under_the_guard_resumes_at_it_not_before_the_update(
    sft_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the guard a step's weights are saved before its held-out evaluation as a resume
    point (not as passed): a run killed during that evaluation resumes by evaluating and judging
    them, without playing the update again."""
    evaluate = Trainer.evaluate
    calls = {"n": 0}

    def killed_at_step_2(self: Trainer) -> dict[str, float]:
        calls["n"] += 1
        if self.step == 2:
            raise KeyboardInterrupt  # the process dies during step 2's evaluation
        return evaluate(self)

    monkeypatch.setattr(Trainer, "evaluate", killed_at_step_2)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(_cfg(sft_model, run, steps=3, eval={"every": 2}, keep_checkpoints=2))
    pending = _checkpoint(run, 2)
    assert pending["pending_eval"] is True and pending["guard"]["good_step"] == 1
    assert (run / "checkpoints" / "step_1.pt").exists()  # the last that passed stays
    assert [r["step"] for r in _rows(run, "train")] == [1, 2]

    monkeypatch.setattr(Trainer, "evaluate", evaluate)
    result = train(_cfg(sft_model, run, steps=3, eval={"every": 2}, keep_checkpoints=2))
    assert result["steps"] == 3
    assert [r["step"] for r in _rows(run, "train")] == [1, 2, 3]  # update 2 is not replayed
    assert [r["step"] for r in _rows(run, "eval")] == [0, 2, 3]
    assert _checkpoint(run, 3)["pending_eval"] is False
    assert _checkpoint(run, 3)["guard"]["good_step"] == 3
