"""Live monitoring: gauges of a run's metrics on an in-process Prometheus ``/metrics`` endpoint.

Every logged key becomes a gauge named ``collab_bench_`` + the key with each character that a
Prometheus name cannot hold replaced by ``_`` (:func:`gauge_name`): ``task/SR`` ->
``collab_bench_task_SR``, ``comm/messages`` -> ``collab_bench_comm_messages``, ``losses/kl`` ->
``collab_bench_losses_kl``, ``eval/task/TR`` -> ``collab_bench_eval_task_TR``. TR, the fraction of
checklist atoms done, is the collaboration index.

* Evaluation runs (:meth:`PrometheusLogger.log_episode`): each gauge is the running mean over the
  finished episodes of a (baseline, n_agents, comm) cell, labelled with ``run``, ``baseline``,
  ``n_agents`` and ``comm``; ``collab_bench_episodes`` counts them.
* Trainers (:meth:`PrometheusLogger.log_values`): each gauge is the latest step's value (KL in
  ``losses/kl`` and ``charts/approx_kl``, entropy in ``losses/entropy``, the rollouts' ``task/SR``,
  ...), labelled with ``run``; ``collab_bench_step`` is the step.

Both add the communication frequency ``comm/messages_per_decision`` (messages sent / decisions,
:func:`with_derived`); ``comm/messages`` is the messages per episode.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Gauge, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from benchmark.metrics.specs import BY_NAME

log = logging.getLogger(__name__)
PREFIX = "collab_bench"
PATH = "/metrics"
EPISODE_LABELS = ("baseline", "n_agents", "comm")
_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def gauge_name(key: str) -> str:
    """The Prometheus name of a logged key: ``collab_bench_`` + the key, every character other
    than ASCII letters, digits and ``_`` replaced by ``_``.

    >>> gauge_name("task/SR")
    'collab_bench_task_SR'
    """
    if not key:
        raise ValueError("a logged key must not be empty")
    return f"{PREFIX}_{_INVALID.sub('_', key)}"


def with_derived(values: dict[str, float]) -> dict[str, float]:
    """``values`` plus ``<prefix>comm/messages_per_decision`` (messages / decisions) wherever
    ``<prefix>comm/messages`` and ``<prefix>task/L_decisions`` are both there and decisions > 0.
    Means over the same episodes give the ratio of the sums."""
    out = dict(values)
    for key, messages in values.items():
        if not key.endswith("comm/messages"):
            continue
        prefix = key.removesuffix("comm/messages")
        decisions = values.get(f"{prefix}task/L_decisions")
        if decisions:
            out[f"{prefix}comm/messages_per_decision"] = messages / decisions
    return out


def _help(key: str, over: str) -> str:
    """A gauge's help text: what its key measures (from the metric's declaration where it has
    one) and what it is taken ``over``."""
    name = key.rsplit("/", 1)[-1]
    if name == "messages_per_decision":
        return f"messages sent / decisions, both summed {over}"
    spec = BY_NAME.get(name)
    if spec is None or not key.endswith(spec.key):
        return f"{key} {over}"
    return f"{spec.key}, mean {over}: {spec.definition}"


def _label_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not worth a line on stderr each."""


class PrometheusLogger:
    """Gauges served at ``http://<host>:<port>/metrics`` from a thread of this process.

    Args:
        host: the address to listen on (keep it on loopback unless a firewall guards the port).
        port: the TCP port; 0 picks a free one (see :attr:`url`).
        labels: labels every gauge carries, such as ``{"run": <run name>}``.
        final_scrape_s: :meth:`close` waits up to this long (seconds) for a scrape of the final
            values, so that a run shorter than the scrape interval is still seen; 0 does not wait.
    """

    def __init__(
        self, host: str, port: int, labels: dict[str, str], final_scrape_s: float = 0.0
    ) -> None:
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"logger.prometheus_port={port!r} must be an integer in 0..65535")
        if final_scrape_s < 0:
            raise ValueError(
                f"logger.prometheus_final_scrape_s={final_scrape_s} must be at least 0"
            )
        self.labels = {k: _label_value(v) for k, v in labels.items()}
        self.final_scrape_s = final_scrape_s
        self.registry = CollectorRegistry(auto_describe=True)
        self._gauges: dict[str, tuple[Gauge, tuple[str, ...], str]] = {}
        self._sums: dict[tuple[str, ...], dict[str, list[float]]] = {}
        self._episodes: dict[tuple[str, ...], int] = {}
        # Updates and scrapes are versioned so close() knows whether the last update was read.
        self._changed = threading.Condition()
        self._version = 0
        self._scraped = 0
        self.server = self._listen(host, port)
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address goes in brackets
        self.url = f"http://{shown}:{self.server.server_port}{PATH}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="prometheus-metrics", daemon=True
        )
        self.thread.start()

    def _listen(self, host: str, port: int) -> ThreadingWSGIServer:
        class Server(ThreadingWSGIServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        try:
            return make_server(host, port, self._app(), Server, handler_class=_QuietHandler)
        except OSError as e:
            raise OSError(
                e.errno,
                f"logger.prometheus_port={port}: cannot serve metrics on {host}:{port} "
                f"({e.strerror}); choose a free port, or 0 for any free one",
            ) from e

    def _app(self) -> Callable[..., Iterable[bytes]]:
        metrics = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") != PATH:
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [f"the metrics are at {PATH}\n".encode()]
            # Rendered in full under the lock: a scrape sees whole updates, never half of one.
            with self._changed:
                body = metrics(environ, start_response)
                self._scraped = self._version
                self._changed.notify_all()
            return body

        return app

    def _set(self, key: str, value: float, labels: dict[str, str], doc: str) -> None:
        name = gauge_name(key)
        names = tuple(labels)
        if name not in self._gauges:
            self._gauges[name] = (
                Gauge(name, doc, labelnames=names, registry=self.registry),
                names,
                key,
            )
        gauge, known, first = self._gauges[name]
        if first != key:
            raise ValueError(f"logged keys {first!r} and {key!r} share the gauge name {name!r}")
        if known != names:
            raise ValueError(f"gauge {name} has labels {list(known)}, not {list(names)}")
        gauge.labels(**labels).set(value)

    def log_episode(self, values: dict[str, float], labels: dict[str, Any]) -> None:
        """A finished episode's ``values`` join the running means of its cell (``labels``: its
        baseline, n_agents and comm); a metric's mean is over the episodes that define it."""
        cell = {**self.labels, **{k: _label_value(v) for k, v in labels.items()}}
        where = tuple(cell.values())
        sums = self._sums.setdefault(where, {})
        self._episodes[where] = self._episodes.get(where, 0) + 1
        for key, value in values.items():
            total = sums.setdefault(key, [0.0, 0])
            total[0] += value
            total[1] += 1
        means = with_derived({k: s / n for k, (s, n) in sums.items()})
        with self._changed:
            for key, value in means.items():
                self._set(key, value, cell, _help(key, "over the run's finished episodes"))
            self._set("episodes", self._episodes[where], cell, "finished episodes in the means")
            self._version += 1

    def log_values(self, values: dict[str, float], step: int) -> None:
        """A trainer's values at ``step``: each gauge shows the latest."""
        with self._changed:
            for key, value in with_derived(values).items():
                self._set(key, value, self.labels, _help(key, "at the latest step"))
            self._set("step", step, self.labels, "the latest logged step")
            self._version += 1

    def close(self) -> bool:
        """Stops the server (after waiting, up to ``final_scrape_s``, for a scrape of the final
        values); returns whether the final values were scraped."""
        with self._changed:
            scraped = self._changed.wait_for(
                lambda: self._scraped >= self._version, timeout=self.final_scrape_s
            )
        if self.final_scrape_s and not scraped:
            log.warning(
                "%s: the final values were not scraped within logger.prometheus_final_scrape_s="
                "%s seconds",
                self.url,
                self.final_scrape_s,
            )
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
        return scraped
