"""The real AI2-THOR adapter fails clearly, and without waiting for a start that never ends,
where no Unity build can be had."""

from __future__ import annotations

import importlib.util
import threading

import pytest

from benchmark.sim.thor import ThorController, ThorUnavailable


def test_without_a_unity_build_the_adapter_raises_a_clear_error_not_a_hang() -> None:
    with pytest.raises(ThorUnavailable) as info:
        ThorController(scene="FloorPlan1", agentCount=2, start_timeout=60)
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

    started, release = threading.Event(), threading.Event()

    def never_starts(self, **_kwargs):
        started.set()
        release.wait(600)

    monkeypatch.setattr(ai2thor.controller.Controller, "__init__", never_starts)
    try:
        with pytest.raises(ThorUnavailable, match=r"did not start within 0\.5 s"):
            ThorController(scene="FloorPlan1", start_timeout=0.5)
        # The start was still running when the adapter gave up: it did not wait for it.
        assert started.is_set() and not release.is_set()
    finally:
        release.set()
