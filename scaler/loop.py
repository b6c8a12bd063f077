"""The control loop `python -m scaler run` runs (its command line: `scaler.run_command`). Each pass is
`scaler.reconcile.Reconciler.run` (observe, decide, act), the pass the simulator runs too, on the kube cache
and the cloud's provider.

The loop itself decides nothing and writes no planner State; it runs the passes: leader election,
backoff on errors, Events, the status ConfigMap, metrics. Nothing survives a restart but what the cloud and the
cluster say: in-flight nodes are desired minus registered (the planner re-derives them); a node still
carrying our disrupting taint from a previous process is uncordoned.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from scaler.actuator import Actuator, Recorder
from scaler.core.config.settings import ScalerConfig
from scaler.core.planning.buffers import READY
from scaler.core.planning.decide import decide
from scaler.core.planning.decisions import Plan
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State, fmt_time
from scaler.kube.leader import Leader
from scaler.metrics import Health, Metrics
from scaler.permissions import LEASE_NAME
from scaler.ports import Acting, Kube, LiveCluster, LostLease, ObjectRef, Planner, PoolProvider, Skipped
from scaler.providers.base import ProviderError
from scaler.providers.counted import CountedProvider
from scaler.reconcile import Pass, Reconciler

log = logging.getLogger("scaler.loop")
BUFFER_WATCHES = ("capacitybuffers", "podtemplates")  # stale: the buffers wait (scaler.kube.cache._buffers)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class Runtime:
    """The passes of a live scaler: leadership, retries after failed passes, Events, the status and the
    metrics around `scaler.reconcile.Reconciler`, which runs each pass."""

    def __init__(self, config: ScalerConfig, provider: PoolProvider, cluster: LiveCluster, kube: Kube, *,
                 leader: Leader | None = None, metrics: Metrics | None = None, health: Health | None = None,
                 dry_run: bool = False, planner: Planner = decide, clock: Callable[[], float] = time.time,
                 interval: float | None = None, namespace: str = "gpuburst-system",
                 recorder: Recorder | None = None) -> None:
        """`kube` is built with the lease check as its `before_change` (`Leader.check`); a dry run acts
        through a `Recorder` (`recorder`, e.g. shadow mode's, or a plain one) and changes nothing anywhere."""
        self.config = config
        self.provider = provider
        self.cluster = cluster
        self.metrics = metrics or Metrics()
        self.leader = None if dry_run else leader
        self.actuator: Acting
        counted = CountedProvider(provider, self.metrics)  # every failed cloud call counted here, once
        if dry_run:
            recorder = recorder or Recorder()
            self.actuator = recorder
            self.kube: Kube = recorder.kube
        else:
            guard = self.leader.check if self.leader is not None else (lambda: None)
            self.actuator = Actuator(counted, kube, config.timings.drain_timeout, self.metrics, guard=guard)
            self.kube = kube
        self.reconciler = Reconciler(config, cluster, counted, self.actuator, planner=planner, metrics=self.metrics)
        self.interval = interval or config.timings.scan_interval
        self.health = health or Health(self.interval)
        self.dry_run = dry_run
        self.clock = clock
        self.namespace = namespace  # of the Lease and the status ConfigMap
        self.stop = threading.Event()

    @property
    def state(self) -> State:
        return self.reconciler.state

    # --- one pass ---------------------------------------------------------------------------------
    def run_once(self) -> Plan | None:
        started = time.monotonic()
        self.health.attempted()
        now = self.clock()
        if self.leader is not None and not self.leader.try_lead():
            self.metrics.leader.set(0)
            self.actuator.forget()  # the new leader gives the drained nodes back
            self.health.succeeded(self.cluster.fresh)
            log.info("not the leader: observing only")
            return None
        self.metrics.leader.set(1)
        try:
            done = self.reconciler.run(now)
        except LostLease as err:
            self.metrics.leader.set(0)
            self.actuator.forget()
            log.warning("%s: stopped acting for this pass", err)
            return None
        self._log_plan(done.plan, done.snapshot)
        self._events(done.plan, done.snapshot)
        self._warnings(done.plan, done.view.stale)
        self._skipped([*done.view.skipped, *self.cluster.skipped_requests()])
        self._buffer_events(done)
        self._status(done)
        self._observe_metrics(done)
        self.metrics.pass_duration.observe(time.monotonic() - started)
        self.metrics.last_pass.set(time.time())
        self.metrics.fresh.set(1 if done.snapshot.fresh else 0)
        self.health.succeeded(done.snapshot.fresh)
        return done.plan

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
                self.kube.event(ref, "TriggeredScaleUp",
                                f"pod triggered scale-up: [{{{up.pool} {old}->{up.new_desired} (max: {mx})}}]")
            elif verdict.outcome in ("unschedulable", "waiting"):  # a wait (max, backoff, cap, gang) says why too
                reasons = "; ".join(f"{p}: {r}" for p, r in sorted(verdict.reasons.items())) or "no pool fits"
                self.kube.event(ref, "NotTriggerScaleUp", f"pod didn't trigger scale-up: {reasons}")

    def _warnings(self, plan: Plan, stale: list[str]) -> None:
        """What stops part of the work, on the scaler's Lease: a watch that fails, a pool the cloud refuses."""
        lease = ObjectRef("Lease", LEASE_NAME, self.namespace)
        for kind in stale:
            stops = "drains" if kind == "poddisruptionbudgets" else "CapacityBuffers" if kind in BUFFER_WATCHES \
                else "scale-downs and size resets below the instances"
            self.kube.event(lease, "WatchFailing", f"the {kind} watch is not synced: {stops} wait for it",
                            "Warning")
        for message in plan.quotas.values():
            self.kube.event(lease, "QuotaExhausted", f"{message}: its pods go down the pool's fallback ladder "
                            "(raise the quota to use the pool)", "Warning")
        for pool, message in plan.refused.items():
            until = self.state.refused.get(pool, (plan.now, ""))[0]
            self.kube.event(lease, "CloudRefused", f"pool {pool}: {message}; its actions stop until "
                            f"{fmt_time(until)} (fix the credentials, permissions or quota)", "Warning")

    def _skipped(self, skipped: list[Skipped]) -> None:
        """An object left out of the pass (it does not convert) gets a Warning Event of its own: the pass
        goes on without it, and its owner learns why it is not planned for."""
        counts: dict[tuple[str, ...], float] = {}
        for s in skipped:
            counts[(s.kind,)] = counts.get((s.kind,), 0) + 1
            self.kube.event(ObjectRef(s.kind, s.name, s.namespace, s.uid), "FailedToRead",
                            f"gpuburst left this object out of its passes: {s.message}", "Warning")
        self.metrics.replace(self.metrics.skipped_objects, counts)

    def _buffer_events(self, done: Pass) -> None:
        """A CapacityBuffer that cannot be served gets a Warning Event when its error is new (its status says
        it every pass); its placeholders are not planned, the pass goes on."""
        for buf in done.snapshot.buffers:
            out = done.plan.buffers.get(buf.key)
            if out is None or not out.error:
                continue
            before = buf.status.conditions.get(READY) if buf.status is not None else None
            if before is None or before.status != "False" or before.message != out.error:
                self.kube.event(ObjectRef("CapacityBuffer", buf.name, buf.namespace, buf.uid), "BufferNotReady",
                                f"gpuburst keeps no room for this buffer: {out.error}", "Warning")

    def _status(self, done: Pass) -> None:
        plan, snapshot = done.plan, done.snapshot
        self.kube.write_status({
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
            "stale_watches": done.view.stale,
        })

    def _observe_metrics(self, done: Pass) -> None:
        plan, snapshot = done.plan, done.snapshot
        m = self.metrics
        reasons: dict[tuple[str, ...], float] = {}
        for verdict in plan.verdicts.values():
            reasons[(verdict.outcome,)] = reasons.get((verdict.outcome,), 0) + 1
        m.replace(m.pending_pods, reasons)
        states: dict[tuple[str, ...], float] = {}
        draining = self.actuator.drains
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
        stale = set(done.view.stale)
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
        base = min(self.interval * 2.0 ** failures, max(self.interval, self.config.timings.error_backoff_max))
        return base * random.uniform(0.5, 1.5)  # noqa: S311 -- jitter
