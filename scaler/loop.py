"""`python -m scaler run`: the control loop. One pass = observe, decide, act.

observe: the kube cache (pods, nodes, PDBs) and the provider's pools -> Snapshot
decide:  scaler.core.planner.plan (pure)
act:     provider.set_desired for scale-ups and size resets; for a scale-down: cordon, evict through
         the Eviction API (a PDB's 429 leaves the node alone and retries next pass), then
         provider.delete_node once nothing but DaemonSet pods is left; give up (uncordon) after a
         deadline. Spot interruptions: cordon, drain, ask for the replacement at once.

Nothing survives a restart but what the cloud and the cluster say: in-flight nodes are desired minus
registered (the planner re-derives them); a node still carrying our disrupting taint from a previous
process is uncordoned. On stale cluster data (the cache could not sync) nothing is scaled down.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import os
import random
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from scaler.configfile import load_config
from scaler.core import keys
from scaler.core.config import ConfigError, ScalerConfig
from scaler.core.model import Node, Pod
from scaler.core.planner import plan as core_plan
from scaler.core.scaledown import blocker
from scaler.core.snapshot import Plan, PoolObservation, ScaleDown, SetSize, Snapshot, State
from scaler.kube.actions import KubeActions, KubeError, Leader, ObjectRef
from scaler.kube.cache import ClusterCache
from scaler.kube.client import api_client
from scaler.metrics import Health, Metrics, serve, setup_logging
from scaler.providers.base import PoolProvider, ProviderError

log = logging.getLogger("scaler.loop")
Planner = Callable[[Snapshot, State, ScalerConfig], tuple[Plan, State]]
DRAIN_TIMEOUT = 600.0  # a scale-down whose pods cannot all be evicted in this time is abandoned
INTERRUPTED_UNAVAILABLE = 600.0  # a reclaimed spot offering is not asked for again for this long


class InterruptionLike(Protocol):
    kind: str
    instance_id: str
    deadline: float


class Cluster(Protocol):
    """What the loop needs from the kube side (ClusterCache)."""

    @property
    def fresh(self) -> bool: ...

    def view(self, pool_of: Callable[[str], str | None]) -> tuple[list[Pod], list[Node], list[Any]]: ...

    def raw_node(self, name: str) -> dict[str, Any] | None: ...


@dataclass(slots=True)
class Drain:
    pool: str
    node: str
    provider_id: str
    started: float
    deadline: float
    reason: str
    interrupted: bool = False
    forced: bool = False  # the cloud takes the node at the deadline anyway (a spot interruption)
    blocked: set[str] = field(default_factory=set)
    planned: frozenset[str] | None = None  # the pods the plan found evictable (None: an interruption's drain)


class LostLease(Exception):
    """The lease ran out during a pass: another replica may be acting now, so this one stops."""


def _evictable(pod: Pod) -> bool:
    return pod.owner_kind != "DaemonSet" and keys.ANNOTATION_MIRROR_POD not in pod.annotations


def _has_our_taint(raw: dict[str, Any]) -> bool:
    return any(t.get("key") == keys.TAINT_DISRUPTING for t in (raw.get("spec") or {}).get("taints") or ())


class Runtime:
    def __init__(self, config: ScalerConfig, provider: PoolProvider, cluster: Cluster, actions: KubeActions | None,
                 *, leader: Leader | None = None, metrics: Metrics | None = None, health: Health | None = None,
                 dry_run: bool = False, planner: Planner = core_plan, clock: Callable[[], float] = time.time,
                 interval: float | None = None) -> None:
        self.config = config
        self.provider = provider
        self.cluster = cluster
        self.actions = None if dry_run else actions
        if self.actions is not None:
            self.actions.before_change = self._guard  # every cordon, uncordon and eviction checks the lease
        self.leader = None if dry_run else leader
        self.metrics = metrics or Metrics()
        self.interval = interval or config.timings.scan_interval
        self.health = health or Health(self.interval)
        self.dry_run = dry_run
        self.planner = planner
        self.clock = clock
        self.state = State()
        self.drains: dict[str, Drain] = {}
        self.removed: set[str] = set()  # nodes whose instance we terminated, until they leave the cluster
        # Interruption notices read (and so deleted from the queue) but not handled yet: a pass that
        # fails half-way through them handles the rest in the next pass.
        self.notices: list[InterruptionLike] = []
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
        snapshot = Snapshot(now=now, pending=pending, nodes=nodes, pools=observations, pdbs=pdbs, fresh=fresh)
        if not self.dry_run:
            self._interruptions(now, nodes, observations)
        plan, self.state = self.planner(snapshot, self.state, self.config)
        if not fresh:
            self._hold_back(plan, snapshot)
        self.last_plan = plan
        self._log_plan(plan, snapshot)
        if not self.dry_run:
            self._act(plan, snapshot)
            if fresh:
                self._progress_drains(now, nodes)
                self._release_orphans(nodes)
            self._events(plan, snapshot)
            self._status(plan, snapshot)
        return plan, snapshot

    @staticmethod
    def _hold_back(plan: Plan, snapshot: Snapshot) -> None:
        """On stale cluster data nothing that removes capacity is acted on: no scale-down, and no size
        reset below the instances that exist (those would be terminated as "never registered" on the
        word of a Node list that may just be old)."""
        if plan.scale_downs:
            plan.notes.append(f"cluster state is stale: {len(plan.scale_downs)} scale-down(s) held back")
            plan.scale_downs = []
        held = [r for r in plan.resets if r.pool in snapshot.pools and r.desired < snapshot.pools[r.pool].instances]
        if held:
            plan.notes.append("cluster state is stale: size reset(s) below the existing instances held back: "
                              + ", ".join(f"{r.pool} -> {r.desired}" for r in held))
            plan.resets = [r for r in plan.resets if r not in held]

    def _guard(self) -> None:
        """Before every change to the cloud (`_cloud`) or the cluster (KubeActions.before_change): this
        replica still holds the lease."""
        if self.leader is not None and not self.leader.holds():
            raise LostLease("the leader lease expired during the pass")

    def _stand_down(self) -> None:
        """Not the leader (any more): forget the drains; the new leader gives their nodes back."""
        if self.drains or self.removed:
            log.warning("lost the lease: leaving %d drain(s) to the new leader", len(self.drains))
        self.drains.clear()
        self.removed.clear()

    def _log_plan(self, plan: Plan, snapshot: Snapshot) -> None:
        ups = [f"{s.pool}/{s.zone} +{s.count} -> {s.new_desired}" for s in plan.scale_ups]
        downs = [f"{d.pool}/{d.node} ({d.reason})" for d in plan.scale_downs]
        resets = [f"{r.pool} -> {r.desired} ({r.reason})" for r in plan.resets]
        log.info("plan%s: %d pending, %d nodes; scale-ups %s; resets %s; scale-downs %s%s",
                 " (dry run)" if self.dry_run else "", len(snapshot.pending), len(snapshot.nodes), ups or "none",
                 resets or "none", downs or "none", f"; notes: {plan.notes}" if plan.notes else "",
                 extra={"dry_run": self.dry_run, "scale_ups": ups, "scale_downs": downs, "resets": resets,
                        "pending": len(snapshot.pending), "fresh": snapshot.fresh})
        stuck = [v for v in plan.verdicts.values() if v.outcome == "unschedulable"]
        for verdict in stuck[:20]:
            log.info("pod %s fits no pool: %s", verdict.pod,
                     "; ".join(f"{p}: {r}" for p, r in sorted(verdict.reasons.items())) or "no pool",
                     extra={"pod": verdict.pod, "reasons": verdict.reasons})
        if len(stuck) > 20:
            log.info("%d more pods fit no pool", len(stuck) - 20)

    # --- acting ----------------------------------------------------------------------------------
    def _cloud(self, what: str, fn: Callable[[], None]) -> bool:
        self._guard()
        try:
            fn()
            return True
        except ProviderError as err:
            self.metrics.cloud_errors.labels(err.kind).inc()
            log.warning("%s failed: %s", what, err, extra={"error_kind": err.kind})
            return False

    def _act(self, plan: Plan, snapshot: Snapshot) -> None:
        for reset in plan.resets:
            self._reset(reset, snapshot)
        targets: dict[str, int] = {}
        added: dict[str, int] = {}
        for up in plan.scale_ups:
            targets[up.pool] = max(targets.get(up.pool, 0), up.new_desired)
            added[up.pool] = added.get(up.pool, 0) + up.count
        for pool, desired in targets.items():
            if self._cloud(f"scale-up {pool}", functools.partial(self.provider.set_desired, pool, desired)):
                self.metrics.scale_ups.labels(pool).inc(added[pool])
        for down in plan.scale_downs:
            self._start_drain(down, snapshot.now)

    def _reset(self, reset: SetSize, snapshot: Snapshot) -> None:
        """Give a size back. Instances no Node names (they never registered) are terminated by id first:
        lowering the size alone would leave them running in a group protected from scale-in."""
        obs = snapshot.pools.get(reset.pool)
        finder = getattr(self.provider, "unregistered", None)
        if obs is not None and finder is not None and obs.instances > reset.desired:
            registered = {n.provider_id for n in snapshot.nodes if n.provider_id}
            for pid in list(finder(reset.pool, registered))[:obs.instances - reset.desired]:
                if self._cloud(f"terminate unregistered {pid}",
                               functools.partial(self.provider.delete_node, reset.pool, pid)):
                    log.warning("terminated %s of pool %s: it never registered as a node", pid, reset.pool)
        self._cloud(f"reset {reset.pool}", functools.partial(self.provider.set_desired, reset.pool, reset.desired))

    def _start_drain(self, down: ScaleDown, now: float) -> None:
        if down.node in self.drains or self.actions is None:
            return
        raw = self.cluster.raw_node(down.node)
        if raw is None:
            return
        provider_id = (raw.get("spec") or {}).get("providerID", "")
        if provider_id != down.provider_id or self.provider.pool_of(provider_id) != down.pool:
            log.warning("not removing %s: provider id %r is not an instance of pool %s", down.node, provider_id,
                        down.pool)
            return
        try:
            self.actions.cordon(raw)
        except KubeError as err:
            self.metrics.kube_errors.labels("cordon").inc()
            log.warning("cordon %s failed: %s", down.node, err)
            return
        self.drains[down.node] = Drain(down.pool, down.node, provider_id, now, now + DRAIN_TIMEOUT, down.reason,
                                       planned=frozenset(down.evict))
        self.actions.event(ObjectRef("Node", down.node, uid=(raw.get("metadata") or {}).get("uid", "")),
                           "ScaleDown", f"draining node for removal: {down.reason}")
        log.info("draining %s of pool %s: %s", down.node, down.pool, down.reason)

    def _progress_drains(self, now: float, nodes: list[Node]) -> None:
        by_name = {n.name: n for n in nodes}
        for name, drain in list(self.drains.items()):
            node = by_name.get(name)
            if node is None:  # gone from the cluster (terminated by us earlier, or by the cloud)
                del self.drains[name]
                continue
            if drain.started >= now:
                continue  # this pass's pod list was read before the cordon: act on the next one
            left = [p for p in node.pods if _evictable(p)]
            if not drain.forced:
                # A pod bound between the plan and the cordon, or one that became unevictable since
                # (annotation added, controller gone), was never proven safe to move: give the node back.
                strays = [p.key for p in left
                          if blocker(p) or (drain.planned is not None and p.key not in drain.planned)]
                if strays:
                    self._abandon(drain, f"pod(s) {', '.join(sorted(strays)[:5])} arrived or became unevictable "
                                         "after the scale-down was planned")
                    continue
            blocked = set()
            for pod in left:
                result = self._evict(pod)
                if result == "blocked":
                    blocked.add(pod.key)
            if not left:
                if not self._finish(drain) and now >= drain.deadline and not drain.forced:
                    # The cloud keeps refusing to remove it (e.g. the group's MinSize is above the
                    # config's min): give the empty node back rather than keep it cordoned for good.
                    self._abandon(drain, f"the instance could not be removed within {DRAIN_TIMEOUT:.0f}s")
                continue
            drain.blocked = blocked
            if now >= drain.deadline:
                if drain.forced:
                    self._finish(drain)  # the cloud takes the node now anyway
                else:
                    self._abandon(drain, f"pods {sorted(blocked) or [p.key for p in left]} could not be evicted "
                                         f"within {DRAIN_TIMEOUT:.0f}s")

    def _evict(self, pod: Pod) -> str:
        assert self.actions is not None
        try:
            result = self.actions.evict(pod.namespace, pod.name)
        except KubeError as err:
            self.metrics.kube_errors.labels("evict").inc()
            log.warning("%s", err)
            return "error"
        self.metrics.evictions.labels(result).inc()
        if result == "blocked":
            log.info("eviction of %s blocked by a PodDisruptionBudget; retrying next pass", pod.key)
        return result

    def _finish(self, drain: Drain) -> bool:
        assert self.actions is not None
        if not self._cloud(f"delete {drain.node}", lambda: self.provider.delete_node(drain.pool, drain.provider_id)):
            return False
        self.metrics.scale_downs.labels(drain.pool).inc()
        self.removed.add(drain.node)  # stays cordoned until the cloud controller deletes the Node
        self.actions.event(ObjectRef("Node", drain.node), "ScaleDown",
                           f"node removed from pool {drain.pool}: {drain.reason}")
        log.info("removed %s from pool %s", drain.node, drain.pool)
        del self.drains[drain.node]
        return True

    def _abandon(self, drain: Drain, why: str) -> None:
        assert self.actions is not None
        del self.drains[drain.node]
        raw = self.cluster.raw_node(drain.node)
        try:
            if raw is not None:
                self.actions.uncordon(raw)
        except KubeError as err:
            self.metrics.kube_errors.labels("uncordon").inc()
            log.warning("uncordon %s failed: %s", drain.node, err)
        self.actions.event(ObjectRef("Node", drain.node), "ScaleDownFailed", f"scale-down abandoned: {why}",
                           "Warning")
        log.warning("scale-down of %s abandoned: %s", drain.node, why)

    def _release_orphans(self, nodes: list[Node]) -> None:
        """A node with our taint that no drain of this process owns: a previous process's; give it back."""
        assert self.actions is not None
        self.removed &= {n.name for n in nodes}
        for node in nodes:
            if node.name in self.drains or node.name in self.removed or \
                    not any(t.key == keys.TAINT_DISRUPTING for t in node.taints):
                continue
            if self.provider.pool_of(node.provider_id) is None:
                continue  # its instance is gone or going: leave it cordoned
            raw = self.cluster.raw_node(node.name)
            if raw is not None and _has_our_taint(raw):
                try:
                    self.actions.uncordon(raw)
                    log.info("uncordoned %s: cordoned by an earlier scaler process that did not finish", node.name)
                except KubeError as err:
                    self.metrics.kube_errors.labels("uncordon").inc()
                    log.warning("%s", err)

    # --- spot interruptions ------------------------------------------------------------------------
    def _interruptions(self, now: float, nodes: list[Node], observations: dict[str, PoolObservation]) -> None:
        fetch = getattr(self.provider, "interruptions", None)
        if fetch is None or self.actions is None:
            return
        try:
            self.notices.extend(fetch())
        except ProviderError as err:
            self.metrics.cloud_errors.labels(err.kind).inc()
            log.warning("reading interruptions failed: %s", err)
        notices, self.notices = self.notices, []
        by_instance: dict[str, Node] = {}
        for n in nodes:
            if n.provider_id:  # AWS notices name the instance id, Azure ones the whole providerID
                by_instance[n.provider_id.rsplit("/", 1)[-1]] = n
                by_instance[n.provider_id.lower()] = n
        desired = {name: obs.desired for name, obs in observations.items()}
        for i, notice in enumerate(notices):
            self.notices = notices[i:]  # kept for the next pass if handling this one fails
            node = by_instance.get(notice.instance_id.lower()) or by_instance.get(notice.instance_id)
            if node is None or node.pool is None or node.name in self.removed or \
                    (node.name in self.drains and self.drains[node.name].interrupted):
                continue  # unknown, or already handled (a VM being deleted is reported again on Azure)
            pool = node.pool
            self.metrics.interruptions.labels(pool, notice.kind).inc()
            log.warning("%s for %s (node %s, pool %s)", notice.kind, notice.instance_id, node.name, pool)
            if notice.kind == "state-change":
                continue  # already stopping: the group replaces it, the pods reschedule
            forced = notice.kind == "spot-interruption"
            if not forced:
                # A recommendation, not a reclaim: the node may live on. Only a node whose pods may all be
                # evicted is drained; otherwise it is left as it is and the reclaim, if it comes, handled then.
                why = next((b for b in map(blocker, node.pods) if b), None)
                if why is not None:
                    log.warning("%s for node %s: not draining it: %s", notice.kind, node.name, why)
                    self.actions.event(ObjectRef("Node", node.name), "SpotRebalanceIgnored",
                                       f"{notice.kind}: not draining: {why}", "Warning")
                    continue
            raw = self.cluster.raw_node(node.name)
            if raw is not None:
                try:
                    self.actions.cordon(raw)
                except KubeError as err:
                    self.metrics.kube_errors.labels("cordon").inc()
                    log.warning("cordon %s failed: %s", node.name, err)
            self.drains[node.name] = Drain(pool, node.name, node.provider_id, now, notice.deadline,
                                           f"{notice.kind} of {notice.instance_id}", interrupted=True,
                                           forced=forced)
            self.actions.event(ObjectRef("Node", node.name), "SpotInterrupted",
                               f"{notice.kind}: draining and asking for a replacement before "
                               f"{time.strftime('%H:%M:%S', time.gmtime(notice.deadline))}Z", "Warning")
            target = pool
            if notice.kind == "spot-interruption":
                zone = node.labels.get(keys.LABEL_ZONE)
                spec = observations.get(pool)
                for z in [zone] if zone else (spec.pool.zones if spec else []):
                    self.state.unavailable[(pool, z)] = max(self.state.unavailable.get((pool, z), 0.0),
                                                            now + INTERRUPTED_UNAVAILABLE)
                if spec is not None and spec.pool.fallback and spec.pool.fallback in observations:
                    target = spec.pool.fallback
            obs = observations.get(target)
            if obs is None:
                continue
            want = desired.get(target, obs.desired) + 1
            if want > obs.pool.max_size and target != pool:
                target, obs = pool, observations[pool]
                want = desired.get(pool, obs.desired) + 1
            if want <= obs.pool.max_size and self._cloud(
                    f"replacement in {target}", functools.partial(self.provider.set_desired, target, want)):
                desired[target] = want
                # The planner must see the replacement as in flight, or its absolute size would undo it.
                observations[target] = dataclasses.replace(obs, desired=want)
                self.metrics.scale_ups.labels(target).inc()
                log.info("replacement for %s requested in pool %s (desired %d)", node.name, target, want)
        self.notices = []
        acknowledge = getattr(self.provider, "acknowledge", None)
        if acknowledge is not None and notices:
            acknowledge(notices)  # handled: delete them from the queue
        # Evict right away: the two minutes are short.
        by_name = {n.name: n for n in nodes}
        for drain in [d for d in self.drains.values() if d.interrupted]:
            node = by_name.get(drain.node)
            for pod in [p for p in node.pods if _evictable(p)] if node else []:
                self._evict(pod)

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
            elif verdict.outcome == "unschedulable":
                reasons = "; ".join(f"{p}: {r}" for p, r in sorted(verdict.reasons.items())) or "no pool fits"
                self.actions.event(ref, "NotTriggerScaleUp", f"pod didn't trigger scale-up: {reasons}")

    def _status(self, plan: Plan, snapshot: Snapshot) -> None:
        assert self.actions is not None
        self.actions.write_status({
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(plan.now)),
            "fresh": snapshot.fresh,
            "pending": len(snapshot.pending),
            "pools": {n: {"desired": o.desired, "instances": o.instances} for n, o in snapshot.pools.items()},
            "scale_ups": [{"pool": u.pool, "zone": u.zone, "count": u.count, "new_desired": u.new_desired}
                          for u in plan.scale_ups],
            "resets": [{"pool": r.pool, "desired": r.desired, "reason": r.reason} for r in plan.resets],
            "scale_downs": [{"pool": d.pool, "node": d.node, "reason": d.reason} for d in plan.scale_downs],
            "draining": sorted(self.drains),
            "unavailable": {f"{p}/{z}": until for (p, z), until in self.state.unavailable.items()},
            "notes": plan.notes,
        })

    def _observe_metrics(self, plan: Plan, snapshot: Snapshot) -> None:
        m = self.metrics
        reasons: dict[tuple[str, ...], float] = {}
        for verdict in plan.verdicts.values():
            reasons[(verdict.outcome,)] = reasons.get((verdict.outcome,), 0) + 1
        m.replace(m.pending_pods, reasons)
        states: dict[tuple[str, ...], float] = {}
        registered: dict[str, int] = {}
        for node in snapshot.nodes:
            pool = node.pool or "none"
            state = "draining" if node.name in self.drains else "cordoned" if node.unschedulable else \
                "ready" if node.ready else "not-ready"
            states[(pool, state)] = states.get((pool, state), 0) + 1
            registered[pool] = registered.get(pool, 0) + 1
        for name, obs in snapshot.pools.items():
            states[(name, "requested")] = max(0, obs.desired - registered.get(name, 0))
        m.replace(m.nodes, states)
        m.replace(m.unavailable, {(p, z): 1 for (p, z), until in self.state.unavailable.items()
                                  if until > snapshot.now})
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
                delay = self._backoff(failures)
                log.warning("pass failed (%s): %s; next pass in %.1fs", err.kind, err, delay)
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


def main(args: argparse.Namespace) -> int:
    setup_logging(args.log_format)
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
    if not cache.wait_synced(args.sync_timeout):
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
                      dry_run=args.dry_run, interval=interval)
    signal.signal(signal.SIGTERM, lambda *_: runtime.stop.set())  # finish the pass, then exit
    log.info("gpuburst scaler running: cluster %s, %d configured pools, every %.0fs%s", config.cluster,
             len(config.pools), interval, " (dry run)" if args.dry_run else "")
    try:
        return runtime.run(once=args.once)
    except KeyboardInterrupt:
        return 0
    finally:
        cache.stop()
