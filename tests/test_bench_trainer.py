"""The trainer benchmark compares like with like: our GRPO loss and gradient equal TRL's on a
shared batch (the timing target is checked by running ``make bench``, not here)."""

from __future__ import annotations

import sys

import pytest

from baselines.rl.recipes.bench import TrainerBenchSpec, compare

SMALL = TrainerBenchSpec(
    prompts=2, group_size=2, prompt_len=16, completion_len=4, hidden=32, layers=2, threads=1
)


def test_missing_trl_names_the_bench_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "trl", None)
    with pytest.raises(ImportError, match=r"\.\[bench\]"):
        compare(SMALL, repeats=1, log=lambda _: None)


def test_our_grpo_loss_and_gradient_equal_trls() -> None:
    pytest.importorskip("trl")
    figures = compare(SMALL, repeats=1, log=lambda _: None)
    # Unequal completion lengths make the token-mean loss non-zero, so equality is not vacuous.
    assert abs(figures["loss_trl"]) > 1e-3
    assert figures["loss_ours"] == pytest.approx(figures["loss_trl"], abs=1e-5)
    assert figures["grad_norm_ours"] == pytest.approx(figures["grad_norm_trl"], rel=1e-4)
    assert figures["ours_ms"] > 0 and figures["trl_ms"] > 0
