"""A real Prometheus server (Debian's ``prometheus``, started here as a plain process) scrapes
the ``/metrics`` endpoint of a real evaluation run and of a real training step, and its query
API gives back the metrics they computed themselves."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.tiny_policy import warm_started_policy
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from rich.console import Console

from baselines.rl.core.app import train
from baselines.rl.core.config import TrainConfig
from benchmark.paths import CONFIGS_DIR, REPO_ROOT
from benchmark.runner.app import run
from benchmark.runner.config import register_configs

register_configs()
PATIENCE_S = 180.0  # a generous bound for Prometheus to start and to ingest a scrape
SUITE = (
    "suite.entries=[{task: transport_produce_fridge_v0, split: test, n_agents: [2], "
    "seeds: [0, 1, 2]}, {task: switch_off_bedroom_v0, split: test, n_agents: [2], seeds: [0]}]"
)


def _prometheus_binary() -> str:
    """Debian's prometheus, installed by ``make monitoring`` where it is missing."""
    found = shutil.which("prometheus")
    if found is None and shutil.which("make") and shutil.which("apt-get"):
        subprocess.run(["make", "-s", "monitoring"], cwd=REPO_ROOT, check=False)
        found = shutil.which("prometheus")
    if found is None:
        pytest.skip("the prometheus binary is absent and `make monitoring` could not install it")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A Prometheus on loopback scraping 127.0.0.1:<target port> every second: its API URL and
    the target port."""
    binary = _prometheus_binary()
    target, web = _free_port(), _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: collab_bench\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
    )
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    api = f"http://127.0.0.1:{web}"
    try:
        deadline = time.monotonic() + PATIENCE_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited: {(tmp_path / 'prometheus.log').read_text()}")
            try:
                if httpx.get(f"{api}/-/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                pytest.fail(f"prometheus not ready: {(tmp_path / 'prometheus.log').read_text()}")
            time.sleep(0.2)
        yield api, target
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _query(api: str, expr: str) -> float | None:
    """The value of an instant query with one series, or None while it has none."""
    response = httpx.get(f"{api}/api/v1/query", params={"query": expr})
    response.raise_for_status()
    result = response.json()["data"]["result"]
    if not result:
        return None
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def test_a_real_prometheus_scrapes_the_running_means_of_a_run(
    prometheus: tuple[str, int], tmp_path: Path
) -> None:
    api, port = prometheus
    out = tmp_path / "run"
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        cfg = compose(
            "run",
            overrides=[
                f"output_dir={out}",
                SUITE,
                "baseline=heuristic",
                "comm=[true,false]",
                "workers=0",
                "reference=false",
                "logger=prometheus",
                "logger.console=false",
                f"logger.prometheus_port={port}",
                f"logger.prometheus_final_scrape_s={PATIENCE_S}",
            ],
        )
    with open(os.devnull, "w") as sink:
        result = run(cfg, Console(file=sink))
    rows = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    overall = {rec["comm"]: rec for rec in result["table"] if rec["family"] == "all"}
    assert set(overall) == {True, False}
    for comm, rec in overall.items():
        cell = [r for r in rows if r["comm"] == comm and r["status"] == "ok"]
        assert len(cell) == 4
        labels = f'run="{out.name}",baseline="heuristic",n_agents="2",comm="{str(comm).lower()}"'

        def last(gauge: str, labels: str = labels) -> float | None:
            # The endpoint is gone once the run has ended, and Prometheus then marks its series
            # stale; the last value before that is what the run served at its end.
            return _query(api, f"last_over_time(collab_bench_{gauge}{{{labels}}}[1h])")

        deadline = time.monotonic() + PATIENCE_S
        while last("episodes") != len(cell):  # the scrape of the final values is in
            assert time.monotonic() < deadline, f"no scrape of the final values (comm={comm})"
            time.sleep(0.5)
        assert last("task_SR") == pytest.approx(rec["SR"]["mean"], rel=1e-12)
        assert last("task_TR") == pytest.approx(rec["TR"]["mean"], rel=1e-12)
        assert last("comm_messages") == pytest.approx(rec["messages"]["mean"], rel=1e-12)
        per_decision = sum(r["messages"] for r in cell) / sum(r["L_decisions"] for r in cell)
        assert last("comm_messages_per_decision") == pytest.approx(per_decision, rel=1e-12)


def test_a_real_prometheus_scrapes_a_training_step_with_its_kl_and_entropy(
    prometheus: tuple[str, int], tmp_path: Path
) -> None:
    api, port = prometheus
    warm_started_policy(tmp_path / "sft", episodes=1)
    out = tmp_path / "train"
    cfg = OmegaConf.structured(TrainConfig)
    cfg.merge_with(
        {
            "policy": {"init": str(tmp_path / "sft" / "model")},
            "data": {"seeds_per_step": 1, "group_size": 2},
            "rollout": {"max_tokens": 4},
            "eval": {"episodes": 1},
            "logger": {
                "console": False,
                "wandb": False,
                "prometheus": True,
                "prometheus_port": port,
                "prometheus_final_scrape_s": PATIENCE_S,
            },
            "workers": 0,
            "threads": 1,
            "steps": 1,
            "output_dir": str(out),
            # A KL term, and an update even when every return of the group is equal.
            "trainer": {"minibatch_size": 16, "kl_coef": 0.01, "filter_zero_variance": False},
        }
    )
    with open(os.devnull, "w") as sink:
        train(cfg, Console(file=sink))
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    (step,) = [r for r in rows if r["kind"] == "train"]

    def last(gauge: str) -> float | None:
        return _query(api, f'last_over_time(collab_bench_{gauge}{{run="{out.name}"}}[1h])')

    deadline = time.monotonic() + PATIENCE_S
    while last("step") != 1:  # a scrape after the training step is in
        assert time.monotonic() < deadline, "no scrape after the training step"
        time.sleep(0.5)
    assert step["losses/kl"] > 0 and step["losses/entropy"] > 0
    for key in ("losses/kl", "charts/approx_kl", "losses/entropy", "task/SR", "task/TR"):
        assert last(key.replace("/", "_")) == pytest.approx(step[key], rel=1e-12), key
    per_decision = step["comm/messages"] / step["task/L_decisions"]
    assert last("comm_messages_per_decision") == pytest.approx(per_decision, rel=1e-12)
