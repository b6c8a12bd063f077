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

from scaler.core.config.settings import ScalerConfig
from scaler.core.planning.decisions import Plan
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State

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
        # Per pool, for the alerts and the dashboard (pulumi/gpuburst_platform/monitoring.py reads these names).
        self.pool_info = Gauge("gpuburst_pool_info", "1 per pool, its capacity type, role and fallback as labels",
                               ["pool", "capacity_type", "role", "fallback"], registry=r)
        self.pool_gpus = Gauge("gpuburst_pool_gpus_per_node", "GPUs of one node of the pool", ["pool"], registry=r)
        self.pool_max = Gauge("gpuburst_pool_max_nodes", "The pool's max size (the smaller of config and cloud)",
                              ["pool"], registry=r)
        self.pool_desired = Gauge("gpuburst_pool_desired_nodes", "The cloud's target size of the pool", ["pool"],
                                  registry=r)
        # `run --shadow` (scaler.shadow): gpuburst against the cluster's own autoscaler, since the record began.
        self.shadow_node_hours = Gauge("gpuburst_shadow_node_hours", "Node-hours of the managed pools as the "
                                       "cluster ran them (side=cluster) and as gpuburst would have", ["side"],
                                       registry=r)
        self.shadow_cost = Gauge("gpuburst_shadow_cost_dollars", "Their cost at the pools' prices, both sides",
                                 ["side"], registry=r)
        self.shadow_sooner = Gauge("gpuburst_shadow_pods_started_sooner", "Pods gpuburst would have started "
                                   "sooner than the cluster did", registry=r)
        self.shadow_removed = Gauge("gpuburst_shadow_nodes_removed_sooner", "Nodes gpuburst would have removed "
                                    "before the cluster did", registry=r)
        self.pool_price = Gauge("gpuburst_pool_price_per_node_hour", "What one node of the pool costs an hour",
                                ["pool"], registry=r)
        self.pool_backoff = Gauge("gpuburst_pool_backoff", "1 while scale-ups of the pool back off after failures",
                                  ["pool"], registry=r)
        self.fallback_active = Gauge("gpuburst_fallback_active", "1 while a spot pool's every zone is unavailable "
                                     "and its pods go to the fallback pool", ["pool", "fallback"], registry=r)
        self.launch_failures = Counter("gpuburst_launch_failures_total", "Launches the cloud refused, by pool and "
                                       "kind (capacity, quota, price, config, other)", ["pool", "kind"], registry=r)
        self.quota_headroom = Gauge("gpuburst_quota_headroom_vcpus", "vCPUs a cloud quota still allows, as last "
                                    "read", ["quota"], registry=r)
        self.quota_exhausted = Gauge("gpuburst_quota_exhausted", "1 while a cloud quota keeps a pool from growing "
                                     "(its pods go down the ladder)", ["quota"], registry=r)
        self.unneeded_time = Gauge("gpuburst_pool_unneeded_time_seconds", "How long an unneeded node of the pool is "
                                   "kept this pass (timings.unneeded_time, or chosen from the pool's idle periods)",
                                   ["pool"], registry=r)
        self.warm = Gauge("gpuburst_pool_warm_instances", "Warm-pool instances of the pool ready to start (a node "
                          "in timings.warm_start rather than a boot)", ["pool"], registry=r)
        self.cost = Gauge("gpuburst_cost_per_hour", "What the pools' target sizes and their warm pools cost an hour",
                          registry=r)
        self.limit = Gauge("gpuburst_limit", "The config's caps that are set (max_nodes, max_gpus, "
                           "max_cost_per_hour)", ["limit"], registry=r)
        self.skipped_objects = Gauge("gpuburst_skipped_objects", "Objects the last pass left out because they do "
                                     "not convert (a Warning Event is on each)", ["kind"], registry=r)
        self.unhealthy = Gauge("gpuburst_gpu_unhealthy_nodes", "Nodes showing a GPU health signal (lost GPU "
                               "devices, a health condition, NotReady), by pool", ["pool"], registry=r)
        self.repairs = Counter("gpuburst_gpu_repairs_total", "GPU node repairs by pool and result (started, "
                               "replaced: its instance given back, recovered: stopped, the GPUs came back)",
                               ["pool", "result"], registry=r)
        self.repair_paused = Gauge("gpuburst_gpu_repair_paused", "1 while a pool's repairs wait because its repair "
                                   "budget is spent", ["pool"], registry=r)
        self.oldest_pending = Gauge("gpuburst_oldest_pending_pod_seconds", "Age of the oldest unschedulable pod, "
                                    "by the planner's verdict", ["reason"], registry=r)

    def observe_pools(self, snapshot: Snapshot, plan: Plan, state: State, config: ScalerConfig) -> None:
        """The per-pool series of one pass: sizes, prices, backoff, fallback, launch failures, cost, waits."""
        pools = {name: obs.pool for name, obs in snapshot.pools.items()}
        self.replace(self.pool_info, {(p.name, p.capacity_type, p.role, p.fallback or ""): 1 for p in pools.values()})
        self.replace(self.pool_gpus, {(n,): p.gpus_per_node or 0 for n, p in pools.items()})
        self.replace(self.pool_max, {(n,): p.max_size for n, p in pools.items()})
        self.replace(self.pool_desired, {(n,): obs.desired for n, obs in snapshot.pools.items()})
        self.replace(self.pool_price, {(n,): config.price(p) for n, p in pools.items()})
        self.replace(self.pool_backoff, {(n,): 1 if n in state.backoff and state.backoff[n].until > snapshot.now
                                         else 0 for n in pools})
        out: dict[tuple[str, ...], float] = {}
        for n, p in pools.items():
            if p.capacity_type == "spot" and p.fallback and \
                    all(state.unavailable.get((n, z), 0.0) > snapshot.now for z in p.zones):
                out[(n, p.fallback)] = 1
        self.replace(self.fallback_active, out)
        for name, obs in snapshot.pools.items():
            for failure in obs.failures:
                self.launch_failures.labels(name, failure.kind).inc()
        self.replace(self.quota_headroom, {(o.quota.name,): o.quota.headroom for o in snapshot.pools.values()
                                           if o.quota is not None})
        self.replace(self.quota_exhausted, {(q,): 1 for q in plan.quotas})
        self.replace(self.unhealthy, {(n,): plan.unhealthy.get(n, 0) for n in pools})
        self.replace(self.repair_paused, {(n,): 1 if n in plan.repair_paused else 0 for n in pools})
        self.replace(self.unneeded_time, {(n,): t for n, t in state.unneeded_time.items() if n in pools})
        self.replace(self.warm, {(n,): obs.warm for n, obs in snapshot.pools.items() if obs.warm or n in plan.warm})
        self.cost.set(sum(obs.desired * config.price(obs.pool) for obs in snapshot.pools.values())
                      + sum(w.usd_per_hour for w in plan.warm.values()))
        limits = config.limits
        self.replace(self.limit, {(k,): float(v) for k, v in (("max_nodes", limits.max_nodes),
                                                              ("max_gpus", limits.max_gpus),
                                                              ("max_cost_per_hour", limits.max_cost_per_hour))
                                  if v is not None})
        created = {f"{p.namespace}/{p.name}": p.created_at for p in snapshot.pending if p.created_at}
        oldest: dict[tuple[str, ...], float] = {}
        for verdict in plan.verdicts.values():
            if verdict.pod in created:
                age = max(0.0, snapshot.now - created[verdict.pod])
                oldest[(verdict.outcome,)] = max(oldest.get((verdict.outcome,), 0.0), age)
        self.replace(self.oldest_pending, oldest)

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
