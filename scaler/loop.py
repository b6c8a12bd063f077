"""`python -m scaler run`: the control loop. One pass = observe, decide, act.

observe: the kube cache (pods, nodes, PDBs), the provider's pools and instances, its interruption
         notices, and the actuator's drains in progress -> Snapshot
decide:  scaler.core.planner.plan (pure): sizes, replacements, give-backs, drains
act:     scaler.actuator.Actuator, the same one the simulator acts through

The loop itself decides nothing and writes no planner State; it keeps the State plan() returns, the
notices it read but has not seen acknowledged, and runs the passes (leader election, backoff on
errors, Events, the status ConfigMap, metrics). Nothing survives a restart but what the cloud and the
cluster say: in-flight nodes are desired minus registered (the planner re-derives them); a node still
carrying our disrupting taint from a previous process is uncordoned.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from scaler.actuator import Actuator
from scaler.configfile import load_config
from scaler.core import provreq
from scaler.core.capacity import zone_hints
from scaler.core.config import ConfigError, ScalerConfig
from scaler.core.filters import Storage
from scaler.core.model import Node, Pod
from scaler.core.planner import plan as core_plan
from scaler.core.snapshot import Interruption, Plan, Snapshot, State
from scaler.core.state import fmt_time
from scaler.kube.actions import KubeActions, KubeError, Leader, ObjectRef
from scaler.kube.cache import ClusterCache, Skipped
from scaler.kube.client import api_client
from scaler.kube.provreq import ProvisioningRequests
from scaler.metrics import Health, Metrics, serve, setup_logging
from scaler.permissions import LEASE_NAME
from scaler.providers.base import PoolProvider, ProviderError

log = logging.getLogger("scaler.loop")
Planner = Callable[[Snapshot, State, ScalerConfig], tuple[Plan, State]]


class Cluster(Protocol):
    """What the loop needs from the kube side (ClusterCache)."""

    @property
    def fresh(self) -> bool:
        """Pods and nodes are synced."""
        ...

    @property
    def pdbs_fresh(self) -> bool: ...

    def stale(self) -> list[str]:
        """The watches that are not synced."""
        ...

    def view(self, pool_of: Callable[[str], str | None]) -> tuple[list[Pod], list[Node], list[Any]]: ...

    def scheduling_view(self) -> tuple[Storage, dict[str, dict[str, str]]]: ...

    def raw_node(self, name: str) -> dict[str, Any] | None: ...

    def skipped(self) -> list[Skipped]:
        """The objects the last views left out because they do not convert."""
        ...


class LostLease(Exception):
    """The lease ran out during a pass: another replica may be acting now, so this one stops."""


class Runtime:
    def __init__(self, config: ScalerConfig, provider: PoolProvider, cluster: Cluster, actions: KubeActions | None,
                 *, leader: Leader | None = None, metrics: Metrics | None = None, health: Health | None = None,
                 dry_run: bool = False, planner: Planner = core_plan, clock: Callable[[], float] = time.time,
                 interval: float | None = None, requests: ProvisioningRequests | None = None) -> None:
        self.config = config
        # ProvisioningRequests (Kueue's admission check), planned with the pods by scaler.core.provreq.
        self.requests = requests
        self.provider = provider
        self.cluster = cluster
        self.actions = None if dry_run else actions
        self.metrics = metrics or Metrics()
        self.actuator: Actuator | None = None
        if self.actions is not None:
            self.actions.nodes = cluster.raw_node
            self.actions.before_change = self._guard  # every cordon, uncordon and eviction checks the lease
            self.actuator = Actuator(provider, self.actions, self.metrics, guard=self._guard)
        self.leader = None if dry_run else leader
        self.interval = interval or config.timings.scan_interval
        self.health = health or Health(self.interval)
        self.dry_run = dry_run
        self.planner = planner
        self.clock = clock
        self.state = State()
        # Interruption notices read but not acknowledged yet: a pass that stops before acting on them
        # (the lease ran out) decides on them again in the next pass.
        self.notices: list[Interruption] = []
        self.last_plan: Plan | None = None
        self.stop = threading.Event()

    # --- one pass ---------------------------------------------------------------------------------
    def run_once(self) -> Plan | None:
        started = time.monotonic()
        self.health.attempted()
        now = self.clock()
        if self.leader is not None and not self.leader.try_lead():
            self.metrics.leader.set(0)
            self._stand_down()
            self.health.succeeded(self.cluster.fresh)
            log.info("not the leader: observing only")
            return None
        self.metrics.leader.set(1)
        try:
            plan, snapshot = self._pass(now)
        except LostLease as err:
            self.metrics.leader.set(0)
            self._stand_down()
            log.warning("%s: stopped acting for this pass", err)
            return None
        self._observe_metrics(plan, snapshot)
        self.metrics.pass_duration.observe(time.monotonic() - started)
        self.metrics.last_pass.set(time.time())
        self.metrics.fresh.set(1 if snapshot.fresh else 0)
        self.health.succeeded(snapshot.fresh)
        return plan

    def _pass(self, now: float) -> tuple[Plan, Snapshot]:
        fresh = self.cluster.fresh
        observations = self.provider.observe(now)
        pending, nodes, pdbs = self.cluster.view(self.provider.pool_of)
        storage, namespaces = self.cluster.scheduling_view()  # what the volume / namespace filters read
        if self.actuator is not None:
            self._read_notices()
        abandoned, refused = self.actuator.report() if self.actuator is not None else ({}, {})
        snapshot = Snapshot(now=now, pending=pending, nodes=nodes, pools=observations, pdbs=pdbs, fresh=fresh,
                            pdbs_fresh=self.cluster.pdbs_fresh, interruptions=list(self.notices),
                            draining=self.actuator.draining() if self.actuator is not None else {},
                            abandoned=abandoned, refused=refused, storage=storage, namespaces=namespaces)
        requests = self._read_requests() if fresh else []
        plan, self.state, answers = provreq.serve(snapshot, self.state, self.config, requests, self.planner)
        self.last_plan = plan
        self._log_plan(plan, snapshot)
        if self.actuator is not None:
            self.actuator.act(plan, snapshot)
            self.notices = [n for n in self.notices if n not in plan.handled]
            self._events(plan, snapshot)
            self._warnings(plan)
            self._skipped([*self.cluster.skipped(), *(self.requests.skipped if self.requests is not None else [])])
            self._status(plan, snapshot)
            self._answer(requests, answers)
        return plan, snapshot

    def _read_requests(self) -> list[provreq.ProvisioningRequest]:
        """The cluster's ProvisioningRequests still in play (on stale pod data none: bookings would be
        computed against pods that may have moved)."""
        if self.requests is None:
            return []
        try:
            return [r for r in self.requests.read() if not r.done]
        except KubeError as err:
            self.metrics.kube_errors.labels("provisioningrequests").inc()
            log.warning("reading ProvisioningRequests failed: %s", err)
            return []

    def _answer(self, requests: list[provreq.ProvisioningRequest],
                answers: dict[str, dict[str, provreq.Condition]]) -> None:
        if self.requests is None:
            return
        for req in requests:
            self._guard()
            try:
                self.requests.write(req, answers[req.key])
            except KubeError as err:
                self.metrics.kube_errors.labels("provisioningrequest-status").inc()
                log.warning("%s", err)

    def _read_notices(self) -> None:
        try:
            fresh = self.provider.interruptions()
        except ProviderError as err:
            self.metrics.cloud_errors.labels(err.kind).inc()
            log.warning("reading interruption notices failed: %s", err)
            return
        self.notices.extend(n for n in fresh if n not in self.notices)

    def _guard(self) -> None:
        """Before every change to the cloud (the actuator) or the cluster (KubeActions.before_change):
        this replica still holds the lease."""
        if self.leader is not None and not self.leader.holds():
            raise LostLease("the leader lease expired during the pass")

    def _stand_down(self) -> None:
        """Not the leader (any more): forget the drains; the new leader gives their nodes back."""
        if self.actuator is not None:
            self.actuator.forget()

    def _log_plan(self, plan: Plan, snapshot: Snapshot) -> None:
        ups = [f"{s.pool}/{s.zone or 'any zone'} +{s.count} -> {s.new_desired}" for s in plan.scale_ups]
        downs = [f"{d.pool}/{d.node} ({d.reason})" for d in plan.scale_downs]
        resets = [f"{r.pool} -> {r.desired} ({r.reason})" for r in plan.resets]
        log.info("plan%s: %d pending, %d nodes; scale-ups %s; resets %s; scale-downs %s%s",
                 " (dry run)" if self.dry_run else "", len(snapshot.pending), len(snapshot.nodes), ups or "none",
                 resets or "none", downs or "none", f"; notes: {plan.notes}" if plan.notes else "",
                 extra={"dry_run": self.dry_run, "scale_ups": ups, "scale_downs": downs, "resets": resets,
                        "pending": len(snapshot.pending), "fresh": snapshot.fresh})
        stuck = [v for v in plan.verdicts.values() if v.outcome in ("unschedulable", "waiting")]
        for verdict in stuck[:20]:
            log.info("pod %s %s: %s", verdict.pod, "fits no pool" if verdict.outcome == "unschedulable" else "waits",
                     "; ".join(f"{p}: {r}" for p, r in sorted(verdict.reasons.items())) or "no pool",
                     extra={"pod": verdict.pod, "reasons": verdict.reasons})
        if len(stuck) > 20:
            log.info("%d more pods fit no pool or wait", len(stuck) - 20)

    # --- events, status, metrics ----------------------------------------------------------------
    def _events(self, plan: Plan, snapshot: Snapshot) -> None:
        assert self.actions is not None
        pods = {p.key: p for p in snapshot.pending}
        ups = {u.pool: u for u in plan.scale_ups}
        for key, verdict in plan.verdicts.items():
            pod = pods.get(key)
            if pod is None:
                continue
            ref = ObjectRef("Pod", pod.name, pod.namespace, pod.uid)
            if verdict.outcome == "scale-up" and verdict.pool in ups:
                up = ups[verdict.pool]
                obs = snapshot.pools.get(up.pool)
                old = obs.desired if obs else up.new_desired - up.count
                mx = obs.pool.max_size if obs else "?"
                self.actions.event(ref, "TriggeredScaleUp",
                                   f"pod triggered scale-up: [{{{up.pool} {old}->{up.new_desired} (max: {mx})}}]")
            elif verdict.outcome in ("unschedulable", "waiting"):  # a wait (max, backoff, cap, gang) says why too
                reasons = "; ".join(f"{p}: {r}" for p, r in sorted(verdict.reasons.items())) or "no pool fits"
                self.actions.event(ref, "NotTriggerScaleUp", f"pod didn't trigger scale-up: {reasons}")

    def _warnings(self, plan: Plan) -> None:
        """What stops part of the work, on the scaler's Lease: a watch that fails, a pool the cloud refuses."""
        assert self.actions is not None
        lease = ObjectRef("Lease", LEASE_NAME, self.actions.namespace)
        for kind in self.cluster.stale():
            stops = "drains" if kind == "poddisruptionbudgets" else "scale-downs and size resets below the instances"
            self.actions.event(lease, "WatchFailing", f"the {kind} watch is not synced: {stops} wait for it",
                               "Warning")
        for pool, message in plan.refused.items():
            until = self.state.refused.get(pool, (plan.now, ""))[0]
            self.actions.event(lease, "CloudRefused", f"pool {pool}: {message}; its actions stop until "
                               f"{fmt_time(until)} (fix the credentials, permissions or quota)", "Warning")

    def _skipped(self, skipped: list[Skipped]) -> None:
        """An object left out of the pass (it does not convert) gets a Warning Event of its own: the pass
        goes on without it, and its owner learns why it is not planned for."""
        assert self.actions is not None
        counts: dict[tuple[str, ...], float] = {}
        for s in skipped:
            counts[(s.kind,)] = counts.get((s.kind,), 0) + 1
            self.actions.event(ObjectRef(s.kind, s.name, s.namespace, s.uid), "FailedToRead",
                               f"gpuburst left this object out of its passes: {s.message}", "Warning")
        self.metrics.replace(self.metrics.skipped_objects, counts)

    def _status(self, plan: Plan, snapshot: Snapshot) -> None:
        assert self.actions is not None
        assert self.actuator is not None
        self.actions.write_status({
            **plan.to_dict(pods=False),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(plan.now)),
            "fresh": snapshot.fresh,
            "pending": len(snapshot.pending),
            "pools": {n: {"desired": o.desired, "instances": o.instances} for n, o in snapshot.pools.items()},
            "draining": sorted(self.actuator.drains),
            "unavailable": {f"{p}/{z}": fmt_time(until) for (p, z), until in self.state.unavailable.items()},
            "backoff": {p: fmt_time(b.until) for p, b in self.state.backoff.items()},
            "refused": {p: {"until": fmt_time(until), "error": message}
                        for p, (until, message) in self.state.refused.items()},
            "stale_watches": self.cluster.stale(),
        })

    def _observe_metrics(self, plan: Plan, snapshot: Snapshot) -> None:
        m = self.metrics
        reasons: dict[tuple[str, ...], float] = {}
        for verdict in plan.verdicts.values():
            reasons[(verdict.outcome,)] = reasons.get((verdict.outcome,), 0) + 1
        m.replace(m.pending_pods, reasons)
        states: dict[tuple[str, ...], float] = {}
        draining = self.actuator.drains if self.actuator is not None else {}
        for node in snapshot.nodes:
            pool = node.pool or "none"
            state = "draining" if node.name in draining else "cordoned" if node.unschedulable else \
                "ready" if node.ready else "not-ready"
            states[(pool, state)] = states.get((pool, state), 0) + 1
        for name, count in plan.in_flight.items():
            states[(name, "requested")] = count
        m.replace(m.nodes, states)
        m.replace(m.unavailable, {(p, z): 1 for (p, z), until in self.state.unavailable.items()
                                  if until > snapshot.now})
        stale = set(self.cluster.stale())
        m.replace(m.watch_synced, {(k,): 0 if k in stale else 1 for k in ("pods", "nodes", "poddisruptionbudgets")})
        m.replace(m.pool_refused, {(p,): 1 for p in self.state.refused})
        m.observe_pools(snapshot, plan, self.state, self.config)

    # --- the loop ------------------------------------------------------------------------------------
    def run(self, once: bool = False) -> int:
        failures = 0
        while not self.stop.is_set():
            try:
                self.run_once()
                failures = 0
                delay = self.interval
            except ProviderError as err:
                self.metrics.cloud_errors.labels(err.kind).inc()
                self.metrics.passes.labels("error").inc()
                failures += 1
                # An error asking again cannot fix (expired credentials, a refused permission) waits the
                # long backoff: retrying every few seconds only floods the cloud's audit log.
                delay = self._backoff(failures) if err.retryable else self.config.timings.backoff_max
                log.warning("pass failed (%s%s): %s; next pass in %.1fs", err.kind,
                            "" if err.retryable else ", not retryable", err, delay)
            except Exception:
                self.metrics.passes.labels("error").inc()
                failures += 1
                delay = self._backoff(failures)
                log.exception("pass failed; next pass in %.1fs", delay)
            else:
                self.metrics.passes.labels("ok").inc()
            if once:
                return 0 if failures == 0 else 1
            self.health.waiting(delay)  # a backoff longer than the liveness window is not a hang
            self.stop.wait(delay)
        return 0

    def _backoff(self, failures: int) -> float:
        base = min(self.interval * 2.0 ** failures, max(self.interval, 300.0))
        return base * random.uniform(0.5, 1.5)  # noqa: S311 -- jitter


# --- the command -----------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--config", required=True, help="the scaler's config (pools, limits, timings)")
    parser.add_argument("--dry-run", action="store_true", help="log each plan; change nothing in cloud or cluster")
    parser.add_argument("--kubeconfig", default=env("KUBECONFIG") or None,
                        help="kubeconfig file (default: in-cluster service account)")
    parser.add_argument("--once", action="store_true", help="run one pass and exit (0: ok, 1: the pass failed)")
    parser.add_argument("--interval", type=float, default=None, help="seconds between passes (default: config)")
    parser.add_argument("--namespace", default=env("POD_NAMESPACE", "gpuburst-system"),
                        help="namespace of the Lease and the status ConfigMap")
    parser.add_argument("--identity", default=env("POD_NAME") or socket.gethostname(), help="leader election id")
    parser.add_argument("--metrics-port", type=int, default=8085, help="metrics/health port (0: off)")
    parser.add_argument("--log-format", choices=("json", "text"), default="json")
    parser.add_argument("--sync-timeout", type=float, default=30.0, help="seconds to wait for the first cache sync")
    parser.add_argument("--interruption-queue-url", default=env("GPUBURST_INTERRUPTION_QUEUE_URL") or None,
                        help="AWS: SQS queue fed by EventBridge with spot interruption notices")
    parser.add_argument("--azure-subscription-id", default=env("AZURE_SUBSCRIPTION_ID") or None)
    parser.add_argument("--azure-resource-group", default=env("GPUBURST_AZURE_RESOURCE_GROUP") or None,
                        help="Azure: resource group of the AKS cluster (agent pools) or of the scale sets")
    parser.add_argument("--aks-cluster", default=env("GPUBURST_AKS_CLUSTER") or None,
                        help="Azure: the managed cluster's name (default: the config's cluster)")


def make_provider(config: ScalerConfig, args: argparse.Namespace) -> PoolProvider:
    if config.cloud == "aws":
        from scaler.providers.aws import AwsProvider  # noqa: PLC0415 -- load one cloud's SDK only

        return AwsProvider(config, queue_url=args.interruption_queue_url)
    from scaler.providers.azure import AzureProvider  # noqa: PLC0415 -- load one cloud's SDK only

    if not args.azure_subscription_id or not args.azure_resource_group:
        raise ConfigError(f"{args.config}: an azure config needs --azure-subscription-id and "
                          "--azure-resource-group (or AZURE_SUBSCRIPTION_ID, GPUBURST_AZURE_RESOURCE_GROUP)")
    provider: PoolProvider = AzureProvider(config, subscription_id=args.azure_subscription_id,
                         resource_group=args.azure_resource_group, cluster_name=args.aks_cluster)
    return provider


def check_flags(args: argparse.Namespace) -> str | None:
    """What is wrong with the numeric flags, on one line naming the flag, before anything is contacted."""
    if not 0 <= args.metrics_port <= 65535:
        return f"--metrics-port {args.metrics_port}: expected a port from 1 to 65535, or 0 for none"
    if args.interval is not None and not 0 < args.interval <= 3600:
        return f"--interval {args.interval:g}: expected seconds above 0 and at most 3600"
    if not 0 <= args.sync_timeout <= 3600:
        return f"--sync-timeout {args.sync_timeout:g}: expected seconds from 0 to 3600"
    return None


def main(args: argparse.Namespace) -> int:
    setup_logging(args.log_format)
    why = check_flags(args)
    if why is not None:
        print(f"error: run: {why}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
        provider = make_provider(config, args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        api = api_client(args.kubeconfig)
    except Exception as err:
        print(f"error: no Kubernetes API: {err}", file=sys.stderr)
        return 2
    cache = ClusterCache(api)
    cache.start()
    if not cache.wait_synced(args.sync_timeout, pdbs=False):  # a failing PDB watch holds back drains only
        log.warning("cluster cache not synced after %.0fs: passes run, but nothing is scaled down until it is",
                    args.sync_timeout)
    metrics = Metrics()
    interval = args.interval or config.timings.scan_interval
    health = Health(interval)
    if args.metrics_port:
        serve(metrics, health, args.metrics_port)
    actions = KubeActions(api, args.namespace)
    leader = Leader(api, args.namespace, args.identity, lease_seconds=max(15, int(3 * interval)))
    runtime = Runtime(config, provider, cache, actions, leader=leader, metrics=metrics, health=health,
                      dry_run=args.dry_run, interval=interval, requests=ProvisioningRequests(api))
    signal.signal(signal.SIGTERM, lambda *_: runtime.stop.set())  # finish the pass, then exit
    log.info("gpuburst scaler running: cluster %s, %d configured pools, every %.0fs%s", config.cluster,
             len(config.pools), interval, " (dry run)" if args.dry_run else "")
    for hint in zone_hints(config.pools):
        log.warning("%s: %s", args.config, hint)
    try:
        return runtime.run(once=args.once)
    except KeyboardInterrupt:
        return 0
    finally:
        if not args.dry_run and not args.once:
            leader.release()  # the other replica takes over now, not a lease duration later
        cache.stop()
