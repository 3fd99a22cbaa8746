"""What each algorithm's loss receives from ``Trainer.update``: GRPO's group-normalised
advantages with trajectory-balancing weights, PPO's whitened GAE advantages and unwhitened
returns, SPPO's soft-mean advantages on the plain mask, and zero-variance groups dropped.

The batches are hand-made (the returns are chosen, the tokens are the task text), so every
value the loss gets is known; the model is a real tiny Llama, the update the trainer's own. A
recording wrapper around the registered loss captures its inputs and calls the real one.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from baselines.rl.core import algos
from baselines.rl.core.config import AlgoSettings, PolicySettings, TrainSettings
from baselines.rl.core.samples import Sample, collate
from baselines.rl.core.trainer import Trainer
from benchmark.llm.tiny import save_tiny_llama, train_tokenizer
from benchmark.runner.config import LoggerConfig
from benchmark.tasks.spec import task_registry

# (group, unit, return) per sample; sample k generates 2 + k tokens, which identifies its row
# in whatever order the minibatch takes. Group 0: units 0, 1, 2 with returns 1, 0, 0.5 and 3, 1
# and 2 samples; group 1: two units with return 2 (no group-relative signal).
SAMPLES = [
    (0, 0, 1.0),
    (0, 0, 1.0),
    (0, 0, 1.0),
    (0, 1, 0.0),
    (0, 2, 0.5),
    (0, 2, 0.5),
    (1, 3, 2.0),
    (1, 3, 2.0),
    (1, 4, 2.0),
    (1, 4, 2.0),
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    corpus = [text for task in task_registry().values() for text in task.instructions.values()]
    out = tmp_path_factory.mktemp("tiny")
    return save_tiny_llama(out, train_tokenizer(corpus, vocab_size=300), hidden=32, layers=1)


def _trainer(model: Path, out: Path, **algo) -> Trainer:
    settings = TrainSettings(
        trainer=AlgoSettings(minibatch_size=64, **algo),
        policy=PolicySettings(init=str(model)),
        logger=LoggerConfig(console=False, wandb=False),
        workers=0,
        threads=1,
        output_dir=str(out),
    )
    return Trainer(settings, out, log=lambda *_: None)


def _samples(trainer: Trainer) -> list[Sample]:
    prompts = [trainer.policy.encode(text) for text in ("Put the apple in the fridge.", "Tidy.")]
    vocab = len(trainer.policy.tokenizer)
    out = []
    for k, (group, unit, R) in enumerate(SAMPLES):
        prompt = prompts[group]
        gen = [(7 * k + 3 * j) % (vocab - 10) + 5 for j in range(2 + k)]
        ids = prompt + gen
        out.append(
            Sample(
                ids=ids,
                mask=[0] * len(prompt) + [1] * len(gen),
                logprobs=[0.0] * len(ids),
                rewards=[(len(ids) - 1, R)],
                R=R,
                group=(group,),
                unit=(unit,),
                agent="agent_0",
                turn=k,
            )
        )
    return out


@pytest.fixture
def loss_inputs(monkeypatch) -> list[dict]:
    """The inputs of every registered policy loss call (the real loss still runs)."""
    calls: list[dict] = []
    for name, entry in list(algos.POLICY_LOSSES.items()):

        def record(logp, old_logp, advantages, mask, _fn=entry.fn, _name=name, **params):
            calls.append(
                {
                    "loss": _name,
                    "adv": advantages.detach(),
                    "mask": mask.detach(),
                    "unit_size": params.get("unit_size"),
                }
            )
            return _fn(logp, old_logp, advantages, mask, **params)

        monkeypatch.setitem(algos.POLICY_LOSSES, name, dataclasses.replace(entry, fn=record))
    return calls


def _by_sample(mask: torch.Tensor) -> list[int]:
    """The sample index of each captured row (its generated length is 2 + k)."""
    return [int((row > 0).sum()) - 2 for row in mask]


def test_grpo_loss_gets_group_normalised_advantages_and_balanced_weights(
    tiny_model: Path, tmp_path: Path, loss_inputs: list[dict]
) -> None:
    trainer = _trainer(tiny_model, tmp_path)
    stats = trainer.update(collate(_samples(trainer), trainer.policy.tokenizer.pad_token_id))
    (call,) = loss_inputs
    assert call["loss"] == "clipped"
    # Group 1 is dropped; group 0's unit returns 1, 0, 0.5 have mean 0.5 and std 0.5.
    unit_adv = {0: 0.5 / (0.5 + 1e-6), 1: -0.5 / (0.5 + 1e-6), 2: 0.0}
    # 6 samples of 3 units with 3, 1 and 2 samples: weights (6 / 3) / n_u.
    unit_weight = {0: 2 / 3, 1: 2.0, 2: 1.0}
    rows = _by_sample(call["mask"])
    assert sorted(rows) == [0, 1, 2, 3, 4, 5]
    for row, k in enumerate(rows):
        unit = SAMPLES[k][1]
        assert call["adv"][row].tolist() == pytest.approx([unit_adv[unit]] * call["adv"].shape[1])
        generated = call["mask"][row][call["mask"][row] > 0]
        assert generated.tolist() == pytest.approx([unit_weight[unit]] * (2 + k))
    assert stats["charts/samples"] == 6 and stats["charts/zero_variance_frac"] == pytest.approx(0.4)
    # Per-sample std of the unit returns of its group: 0.5 for 6 samples, 0 for 4.
    assert stats["charts/group_reward_std"] == pytest.approx(0.3)


def test_grpo_options_reach_the_loss(
    tiny_model: Path, tmp_path: Path, loss_inputs: list[dict]
) -> None:
    trainer = _trainer(
        tiny_model,
        tmp_path,
        norm_by_std=False,
        balance_trajectories=False,
        filter_zero_variance=False,
    )
    stats = trainer.update(collate(_samples(trainer), trainer.policy.tokenizer.pad_token_id))
    (call,) = loss_inputs
    unit_adv = {0: 0.5, 1: -0.5, 2: 0.0, 3: 0.0, 4: 0.0}  # centred only
    rows = _by_sample(call["mask"])
    assert sorted(rows) == list(range(len(SAMPLES)))
    for row, k in enumerate(rows):
        assert float(call["adv"][row, 0]) == pytest.approx(unit_adv[SAMPLES[k][1]])
    assert set(call["mask"].unique().tolist()) == {0.0, 1.0}  # no trajectory weights
    assert stats["charts/samples"] == len(SAMPLES) and stats["charts/zero_variance_frac"] == 0


def test_ppo_loss_gets_whitened_gae_advantages_and_unwhitened_returns(
    tiny_model: Path, tmp_path: Path, loss_inputs: list[dict], monkeypatch
) -> None:
    value_inputs: list[dict] = []
    value_loss = algos.clipped_value_loss

    def record_value_loss(values, old_values, returns, mask, clip, loss_agg):
        value_inputs.append({"returns": returns.detach(), "mask": mask.detach()})
        return value_loss(values, old_values, returns, mask, clip, loss_agg)

    monkeypatch.setattr(algos, "clipped_value_loss", record_value_loss)
    trainer = _trainer(tiny_model, tmp_path, name="ppo", gamma=1.0, lam=0.9)
    batch = collate(_samples(trainer), trainer.policy.tokenizer.pad_token_id)
    stats = trainer.update(batch)
    (call,), (values_call,) = loss_inputs, value_inputs
    # The value head starts at zero, so GAE sees zero values: A_t = 0.9^(n - 1 - t) R.
    raw, returns = algos.gae(batch.rewards, torch.zeros_like(batch.rewards), batch.mask, 1.0, 0.9)
    whitened = algos.masked_whiten(raw, batch.mask)
    generated = call["mask"] > 0
    adv = call["adv"][generated]
    assert float(adv.mean()) == pytest.approx(0.0, abs=1e-5)
    assert float(adv.std(unbiased=False)) == pytest.approx(1.0, abs=1e-5)
    assert float(raw[batch.mask > 0].mean()) > 0.5  # so the whitening did something
    width = call["adv"].shape[1]
    for row, k in enumerate(_by_sample(call["mask"])):
        assert torch.allclose(call["adv"][row], whitened[k, :width], atol=1e-6)
        assert torch.allclose(values_call["returns"][row], returns[k, :width], atol=1e-6)
    assert stats["charts/samples"] == len(SAMPLES)  # no group filtering for value-based PPO
    assert stats["charts/value_mean"] == 0.0 and "losses/value" in stats


def test_sppo_loss_gets_soft_mean_advantages_on_the_plain_mask(
    tiny_model: Path, tmp_path: Path, loss_inputs: list[dict]
) -> None:
    trainer = _trainer(tiny_model, tmp_path, name="sppo", beta=2.0)
    trainer.update(collate(_samples(trainer), trainer.policy.tokenizer.pad_token_id))
    (call,) = loss_inputs
    assert call["loss"] == "sppo" and call["adv"].dim() == 1
    unit_returns = torch.tensor([1.0, 0.0, 0.5])
    expected = algos.sppo_advantages(unit_returns, torch.zeros(3, dtype=torch.long), beta=2.0)
    rows = _by_sample(call["mask"])
    assert sorted(rows) == [0, 1, 2, 3, 4, 5]  # the zero-variance group is dropped
    for row, k in enumerate(rows):
        assert float(call["adv"][row]) == pytest.approx(float(expected[SAMPLES[k][1]]))
    assert set(call["mask"].unique().tolist()) == {0.0, 1.0}  # balancing is for clipped losses
    # Units 0, 1 and 2 have 3, 1 and 2 samples in the update batch.
    sizes = {0: 3.0, 1: 1.0, 2: 2.0}
    assert call["unit_size"].tolist() == [sizes[SAMPLES[k][1]] for k in rows]


@pytest.mark.parametrize("target", ["per_trajectory", "per_decision"])
def test_sppo_update_regresses_to_its_target(tiny_model: Path, tmp_path: Path, target: str) -> None:
    # One pass over one minibatch: the old policy is the current one, so every log-ratio is 0
    # when the loss is taken and the loss is the mean squared target.
    trainer = _trainer(tiny_model, tmp_path, name="sppo", eta=2.0, sppo_target=target)
    stats = trainer.update(collate(_samples(trainer), trainer.policy.tokenizer.pad_token_id))
    unit_adv = algos.sppo_advantages(torch.tensor([1.0, 0.0, 0.5]), torch.zeros(3).long())
    kept = [unit for _, unit, _ in SAMPLES[:6]]  # group 1 has no signal and is dropped
    n = {0: 3, 1: 1, 2: 2}
    spread = target == "per_trajectory"
    shares = [2.0 * float(unit_adv[u]) / (n[u] if spread else 1) for u in kept]
    assert stats["losses/policy"] == pytest.approx(sum(x * x for x in shares) / 6, rel=1e-5)


def test_a_batch_of_zero_variance_groups_leaves_the_policy_alone(
    tiny_model: Path, tmp_path: Path, loss_inputs: list[dict]
) -> None:
    trainer = _trainer(tiny_model, tmp_path)
    samples = [s for s in _samples(trainer) if s.group == (1,)]
    before = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    stats = trainer.update(collate(samples, trainer.policy.tokenizer.pad_token_id))
    assert loss_inputs == [] and trainer.grad_norms == []
    assert stats["charts/samples"] == 0 and stats["charts/zero_variance_frac"] == 1.0
    after = trainer.policy.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
