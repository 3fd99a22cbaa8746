"""The Prometheus logger: gauge names, running means per cell, the trainer's latest values, the
endpoint's life (a taken port, a clean close) and the configs that switch it on."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import httpx
import pytest
from hydra import compose, initialize_config_dir
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.parser import text_string_to_metric_families

from baselines.rl.core.config import register_configs as register_train_configs
from baselines.rl.core.config import train_settings
from benchmark.metrics.specs import METRICS
from benchmark.paths import CONFIGS_DIR
from benchmark.runner.config import LoggerConfig, register_configs
from benchmark.runner.loggers import MetricLoggers
from benchmark.runner.prometheus import PrometheusLogger, gauge_name, with_derived

VALID_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")  # Prometheus' metric name syntax


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The endpoint's samples: (name, sorted labels) -> value."""
    response = httpx.get(url)
    response.raise_for_status()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def test_gauge_names_are_the_namespaced_keys_as_valid_prometheus_names() -> None:
    assert gauge_name("task/SR") == "collab_bench_task_SR"
    assert gauge_name("task/TR") == "collab_bench_task_TR"
    assert gauge_name("comm/messages") == "collab_bench_comm_messages"
    assert gauge_name("losses/kl") == "collab_bench_losses_kl"
    assert gauge_name("losses/entropy") == "collab_bench_losses_entropy"
    assert gauge_name("eval/collab/B") == "collab_bench_eval_collab_B"
    assert gauge_name("perf/tokens-per.s") == "collab_bench_perf_tokens_per_s"
    declared = [m.key for m in METRICS]
    names = [gauge_name(k) for k in declared]
    assert len(set(names)) == len(declared)  # one gauge per declared metric
    registry = CollectorRegistry()
    for name in names:
        assert VALID_NAME.match(name), name
        Gauge(name, "accepted by the client library", registry=registry)
    with pytest.raises(ValueError, match="must not be empty"):
        gauge_name("")


def test_messages_per_decision_is_derived_wherever_both_means_are_there() -> None:
    values = {
        "comm/messages": 3.0,
        "task/L_decisions": 12.0,
        "eval/comm/messages": 1.0,
        "eval/task/L_decisions": 0.0,
    }
    derived = with_derived(values)
    assert derived["comm/messages_per_decision"] == 0.25
    assert "eval/comm/messages_per_decision" not in derived  # no decisions: undefined
    assert {k: derived[k] for k in values} == values


def test_episode_gauges_are_running_means_of_each_cell() -> None:
    logger = PrometheusLogger("127.0.0.1", 0, {"run": "r1"})
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", logger.url)
        cell = {"baseline": "heuristic", "n_agents": 2, "comm": True}
        episodes = [
            {"task/SR": 1.0, "comm/messages": 6.0, "task/L_decisions": 10.0},
            {"task/SR": 0.0, "comm/messages": 2.0, "task/L_decisions": 30.0},
            {"task/SR": 1.0, "comm/messages": 4.0, "task/L_decisions": 20.0},
        ]
        episodes[1]["comm/influence_rate"] = 0.5  # defined in one episode only
        for values in episodes:
            logger.log_episode(values, cell)
        logger.log_episode({"task/SR": 0.0}, {**cell, "comm": False})
        samples = _scrape(logger.url)
        labels = (("baseline", "heuristic"), ("comm", "true"), ("n_agents", "2"), ("run", "r1"))
        assert samples[("collab_bench_task_SR", labels)] == pytest.approx(2 / 3)
        assert samples[("collab_bench_comm_messages", labels)] == pytest.approx(4.0)
        assert samples[("collab_bench_comm_influence_rate", labels)] == 0.5
        assert samples[("collab_bench_comm_messages_per_decision", labels)] == pytest.approx(
            12 / 60
        )
        assert samples[("collab_bench_episodes", labels)] == 3
        off = (("baseline", "heuristic"), ("comm", "false"), ("n_agents", "2"), ("run", "r1"))
        assert samples[("collab_bench_task_SR", off)] == 0.0
        assert samples[("collab_bench_episodes", off)] == 1
        assert httpx.get(logger.url.replace("/metrics", "/other")).status_code == 404
    finally:
        logger.close()


def test_trainer_values_are_the_latest_step_with_kl_and_entropy(tmp_path: Path) -> None:
    cfg = LoggerConfig(console=False, prometheus=True)
    loggers = MetricLoggers(cfg, tmp_path, "grpo-run", {})
    try:
        assert loggers.prometheus is not None
        step_1 = {"losses/kl": 0.03, "losses/entropy": 2.5, "task/SR": 0.0}
        loggers.log_values(step_1, 1)
        step_2 = {
            "losses/kl": 0.01,
            "losses/entropy": 2.0,
            "task/SR": 0.5,
            "task/TR": 0.75,
            "comm/messages": 3.0,
            "task/L_decisions": 12.0,
        }
        loggers.log_values(step_2, 2)
        samples = _scrape(loggers.prometheus.url)
        run = (("run", "grpo-run"),)
        assert samples[("collab_bench_losses_kl", run)] == 0.01
        assert samples[("collab_bench_losses_entropy", run)] == 2.0
        assert samples[("collab_bench_task_SR", run)] == 0.5
        assert samples[("collab_bench_task_TR", run)] == 0.75
        assert samples[("collab_bench_comm_messages_per_decision", run)] == 0.25
        assert samples[("collab_bench_step", run)] == 2
    finally:
        loggers.close()


def test_keys_that_would_share_a_gauge_name_are_refused() -> None:
    logger = PrometheusLogger("127.0.0.1", 0, {"run": "r"})
    try:
        with pytest.raises(ValueError, match=r"'a/b_c' and 'a_b/c' share the gauge name"):
            logger.log_values({"a/b_c": 1.0, "a_b/c": 2.0}, 1)
    finally:
        logger.close()


def test_a_taken_port_is_refused_naming_logger_prometheus_port(tmp_path: Path) -> None:
    first = PrometheusLogger("127.0.0.1", 0, {"run": "first"})
    try:
        port = first.server.server_port
        cfg = LoggerConfig(console=False, prometheus=True, prometheus_port=port)
        with pytest.raises(OSError, match=rf"logger\.prometheus_port={port}: cannot serve"):
            MetricLoggers(cfg, tmp_path, "second", {})
        assert httpx.get(first.url).status_code == 200  # the first one still serves
    finally:
        first.close()
    for bad in (-1, 65536):
        cfg = LoggerConfig(console=False, prometheus=True, prometheus_port=bad)
        with pytest.raises(ValueError, match=rf"logger\.prometheus_port={bad} must be"):
            MetricLoggers(cfg, tmp_path, "bad", {})
    with pytest.raises(ValueError, match=r"logger\.prometheus_final_scrape_s=-1"):
        PrometheusLogger("127.0.0.1", 0, {}, final_scrape_s=-1)


def test_close_waits_for_a_scrape_of_the_final_values_then_frees_the_port() -> None:
    logger = PrometheusLogger("127.0.0.1", 0, {"run": "r"}, final_scrape_s=300)
    port = logger.server.server_port
    logger.log_values({"task/SR": 1.0}, 1)
    scraped: list[float] = []
    scraper = threading.Thread(
        target=lambda: scraped.append(
            _scrape(logger.url)[("collab_bench_task_SR", (("run", "r"),))]
        )
    )
    scraper.start()
    assert logger.close() is True
    scraper.join()
    assert scraped == [1.0]
    assert not logger.thread.is_alive()
    unread = PrometheusLogger("127.0.0.1", port, {"run": "r"})  # the port is free again
    unread.log_values({"task/SR": 0.0}, 1)
    assert unread.close() is False  # nothing scraped it, and it was not asked to wait


def test_the_prometheus_logger_config_composes_for_runs_and_trainers() -> None:
    register_configs()
    register_train_configs()
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        run = compose("run", overrides=["output_dir=/unused", "logger=prometheus"])
        train = compose(
            "train",
            overrides=["output_dir=/unused", "logger=prometheus", "logger.prometheus_port=9464"],
        )
    assert run.logger.prometheus and run.logger.console and not run.logger.wandb
    assert (run.logger.prometheus_host, run.logger.prometheus_port) == ("127.0.0.1", 0)
    settings = train_settings(train)
    assert settings.logger.prometheus and settings.logger.prometheus_port == 9464
