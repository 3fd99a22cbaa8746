"""The real AI2-THOR adapter fails clearly, and quickly, where no Unity build can be had."""

from __future__ import annotations

import importlib.util
import time

import pytest

from benchmark.sim.thor import ThorController, ThorUnavailable


def test_without_a_unity_build_the_adapter_raises_a_clear_error_not_a_hang() -> None:
    start = time.monotonic()
    with pytest.raises(ThorUnavailable) as info:
        ThorController(scene="FloorPlan1", agentCount=2, start_timeout=60)
    assert time.monotonic() - start < 90
    message = str(info.value)
    if importlib.util.find_spec("ai2thor") is None:
        assert "'thor' extra" in message
    else:
        assert "Unity build" in message


def test_a_start_that_never_returns_is_cut_off_at_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("ai2thor")
    import ai2thor.controller

    def never_starts(self, **_kwargs):
        time.sleep(30)

    monkeypatch.setattr(ai2thor.controller.Controller, "__init__", never_starts)
    start = time.monotonic()
    with pytest.raises(ThorUnavailable, match=r"did not start within 0\.5 s"):
        ThorController(scene="FloorPlan1", start_timeout=0.5)
    assert time.monotonic() - start < 5
