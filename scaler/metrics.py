"""Prometheus metrics, /healthz and /readyz (prometheus-client's WSGI app), and JSON logs."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

StartResponse = Callable[..., Any]


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.pass_duration = Histogram("gpuburst_pass_duration_seconds", "Duration of one observe-decide-act pass",
                                       buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=r)
        self.passes = Counter("gpuburst_passes_total", "Passes by result", ["result"], registry=r)
        self.pending_pods = Gauge("gpuburst_pending_pods", "Unschedulable pods by the planner's verdict",
                                  ["reason"], registry=r)
        self.nodes = Gauge("gpuburst_nodes", "Nodes by pool and state", ["pool", "state"], registry=r)
        self.scale_ups = Counter("gpuburst_scale_up_nodes_total", "Nodes requested by scale-ups", ["pool"],
                                 registry=r)
        self.scale_downs = Counter("gpuburst_scale_down_nodes_total", "Nodes removed by scale-downs", ["pool"],
                                   registry=r)
        self.cloud_errors = Counter("gpuburst_cloud_errors_total", "Failed cloud calls by kind", ["kind"],
                                    registry=r)
        self.kube_errors = Counter("gpuburst_kube_errors_total", "Failed Kubernetes calls", ["call"], registry=r)
        self.unavailable = Gauge("gpuburst_unavailable_offerings", "Pool/zone offerings marked unavailable",
                                 ["pool", "zone"], registry=r)
        self.interruptions = Counter("gpuburst_interruptions_total", "Spot interruptions and rebalance notices",
                                     ["pool", "kind"], registry=r)
        self.evictions = Counter("gpuburst_evictions_total", "Eviction attempts by result", ["result"], registry=r)
        self.leader = Gauge("gpuburst_leader", "1 while this replica holds the Lease", registry=r)
        self.fresh = Gauge("gpuburst_cluster_state_fresh", "1 while the pod and node cache is synced", registry=r)
        self.watch_synced = Gauge("gpuburst_watch_synced", "1 while the watch of this resource is synced",
                                  ["resource"], registry=r)
        self.pool_refused = Gauge("gpuburst_pool_refused", "1 while a pool's actions are stopped by a cloud "
                                  "refusal that retrying cannot fix", ["pool"], registry=r)
        self.last_pass = Gauge("gpuburst_last_pass_timestamp_seconds", "End of the last successful pass",
                               registry=r)

    @staticmethod
    def replace(gauge: Gauge, values: dict[tuple[str, ...], float]) -> None:
        """Set a labelled gauge to exactly these series (series that went away are removed)."""
        gauge.clear()
        for labels, value in values.items():
            gauge.labels(*labels).set(value)


class Health:
    """Alive: a pass was attempted recently. Ready: the last pass succeeded on synced data."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self.last_attempt = clock()
        self.next_attempt = self.last_attempt  # when the loop plans its next pass (after a backoff)
        self.last_success: float | None = None
        self.synced = False

    def attempted(self) -> None:
        self.last_attempt = self._clock()

    def waiting(self, seconds: float) -> None:
        self.next_attempt = self._clock() + seconds

    def succeeded(self, synced: bool) -> None:
        self.last_success = self._clock()
        self.synced = synced

    def alive(self) -> bool:
        """A pass started recently, or the loop is sleeping out a backoff it chose (a long backoff after
        cloud errors is not a hang; restarting would lose the backoff and hit the cloud again)."""
        grace = max(60.0, 6 * self.interval)
        now = self._clock()
        return now - self.last_attempt < grace or now < self.next_attempt + grace

    def ready(self) -> bool:
        return self.synced and self.last_success is not None and \
            self._clock() - self.last_success < max(60.0, 6 * self.interval)


def app(metrics: Metrics, health: Health) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    prom = make_wsgi_app(metrics.registry)

    def serve(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            ok = health.alive() if path == "/healthz" else health.ready()
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"ok\n" if ok else b"not ok\n"]
        return prom(environ, start_response)  # type: ignore[no-any-return]

    return serve


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


def serve(metrics: Metrics, health: Health, port: int, host: str = "0.0.0.0") -> WSGIServer:  # noqa: S104
    """Start the metrics and health endpoints in a daemon thread; returns the server (port 0: any)."""
    server = make_server(host, port, app(metrics, health), handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and any `extra=` fields."""

    _std = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for k, v in record.__dict__.items():
            if k not in self._std:
                out[k] = v
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(fmt: str = "json", level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("kubernetes", "urllib3", "botocore", "azure", "leaderelection"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
