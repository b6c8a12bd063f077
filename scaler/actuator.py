"""The one actuator: carries out a Plan through a PoolProvider and the Kubernetes side.

`scaler run` (`scaler.loop.Runtime`) and the simulator (`scaler.sim.engine.Engine`) both act through
it, so the simulator's figures come from the code production runs. It decides nothing: every size,
replacement, give-back and drain is the core's (`scaler.core.planning.decide.decide`).

Order within a pass:
1. size resets, terminating first exactly the instances that never registered;
2. scale-ups, as one target size per pool; replacements for interrupted nodes are scale-ups, so they
   are asked for ahead of the interruptions' drains;
3. drains: cordon, then evict through the Eviction API from the next pass on (a pod list read after
   the cordon), or at once for a spot interruption (the cloud takes the node at the deadline anyway).
   A PodDisruptionBudget's refusal (HTTP 429) leaves the pod and retries next pass; the pods the plan
   says to delete (a gang on an ending Capacity Block) are deleted with their grace period instead. Once nothing but
   DaemonSet and mirror pods is left, exactly the drained instance is removed (the size drops by one).
   A planned drain that finds a pod the plan did not prove evictable, or that outlives its deadline,
   is abandoned: the node is uncordoned. A forced one removes the node at its deadline. A repair's drain
   outlives its deadline (a broken node is not given its pods back); it stops when the plan names the node
   recovered (its GPUs came back): uncordoned the same way;
4. nodes that carry the drain taint but belong to no drain of this process (a previous one died) are
   given back; the notices the plan handled are acknowledged.

Drains in progress are reported back into the next Snapshot (`draining()`), so the planner sees them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scaler.core.model import keys
from scaler.core.model.buffers import BufferStatus, CapacityBuffer
from scaler.core.model.conditions import Condition
from scaler.core.model.drain import DrainState
from scaler.core.model.interruption import Interruption
from scaler.core.model.objects import Node, Pod
from scaler.core.model.provreq import ProvisioningRequest
from scaler.core.model.workload import blocker, to_evict
from scaler.core.planning.decisions import BufferOutcome, Plan, ScaleDown
from scaler.core.planning.snapshot import Snapshot
from scaler.metrics import Metrics
from scaler.ports import EvictResult, Kube, KubeError, ObjectRef, PoolProvider
from scaler.providers.base import ProviderError

log = logging.getLogger("scaler.actuator")


@dataclass(slots=True)
class Drain:
    pool: str
    node: str
    provider_id: str
    started: float
    deadline: float
    reason: str
    forced: bool = False
    notice: bool = False
    repair: bool = False
    planned: frozenset[str] = frozenset()  # the pods the plan proved evictable
    delete: frozenset[str] = frozenset()  # the pods deleted rather than evicted (a gang on an ending block)
    blocked: set[str] = field(default_factory=set)


class Actuator:
    live = True

    def __init__(self, provider: PoolProvider, kube: Kube, drain_timeout: float, metrics: Metrics | None = None, *,
                 guard: Callable[[], None] = lambda: None) -> None:
        """`guard` runs before every change to the cloud and raises to stop it (the loop's lease check);
        `drain_timeout`: `timings.drain_timeout`, after which a planned drain is abandoned."""
        self.provider = provider
        self.kube = kube
        self.metrics = metrics or Metrics()
        self.guard = guard
        self.drain_timeout = drain_timeout
        self.drains: dict[str, Drain] = {}
        self.removed: set[str] = set()  # nodes whose instance was removed, until they leave the cluster
        self.errors: list[str] = []  # the last pass's failed cloud calls, newest last
        # What the next Snapshot tells the planner: drains given up because evictions were refused
        # (node -> the refused pods), and pools whose cloud refused what retrying cannot fix.
        self.abandoned: dict[str, tuple[str, ...]] = {}
        self.refused: dict[str, str] = {}
        self.acknowledged: list[Interruption] = []  # the notices of the last pass that acted to the end

    # --- what the next Snapshot says --------------------------------------------------------------
    def draining(self) -> dict[str, DrainState]:
        return {n: DrainState(n, d.pool, d.started, d.deadline, d.forced, d.notice, d.repair)
                for n, d in self.drains.items()}

    def report(self) -> tuple[dict[str, tuple[str, ...]], dict[str, str], list[Interruption]]:
        """What the planner should know from the last pass (abandoned drains, refusals, the notices acted on
        to the end); told once."""
        out = (self.abandoned, self.refused, self.acknowledged)
        self.abandoned, self.refused, self.acknowledged = {}, {}, []
        return out

    def forget(self) -> None:
        """Not the leader any more: the new leader gives the drained nodes back."""
        if self.drains:
            log.warning("lost the lease: leaving %d drain(s) to the new leader", len(self.drains))
        self.drains.clear()
        self.removed.clear()

    # --- one pass ------------------------------------------------------------------------------------
    def act(self, plan: Plan, snapshot: Snapshot) -> None:
        self.errors = []
        for reset in plan.resets:
            for stray in reset.strays:
                if self._cloud(f"terminate {stray}", functools.partial(self.provider.delete_node, reset.pool, stray),
                               pool=reset.pool):
                    log.warning("terminated %s of pool %s: it never registered as a node", stray, reset.pool)
            self._cloud(f"reset {reset.pool}", functools.partial(self.provider.set_desired, reset.pool, reset.desired),
                        pool=reset.pool, sizing=True)
        targets: dict[str, int] = {}
        added: dict[str, int] = {}
        for up in plan.scale_ups:
            targets[up.pool] = max(targets.get(up.pool, 0), up.new_desired)
            added[up.pool] = added.get(up.pool, 0) + up.count
        for pool, desired in targets.items():
            if self._cloud(f"scale-up {pool}", functools.partial(self.provider.set_desired, pool, desired), pool=pool,
                           sizing=True):
                self.metrics.scale_ups.labels(pool).inc(added[pool])
        nodes = {n.name: n for n in snapshot.nodes}
        for down in plan.scale_downs:
            self._start(down, nodes.get(down.node), snapshot.now)
        for name in plan.recovered:
            if name in self.drains and self.drains[name].repair:
                self.drains[name].blocked.clear()
                self._abandon(self.drains[name], "its GPUs are healthy again", "GpuRecovered")
        for ev in plan.events:
            self.kube.event(ObjectRef("Node", ev.node), ev.reason, ev.message, "Warning" if ev.warning else "Normal")
        self._progress(snapshot)
        if snapshot.fresh:
            self._release_orphans(snapshot.nodes)
            for name in plan.delete_nodes:
                self._delete_node(name)
        if plan.handled:
            self._cloud("acknowledge notices", lambda: self.provider.acknowledge(plan.handled), guarded=False)
        self.acknowledged = list(plan.handled)

    def answer(self, requests: list[ProvisioningRequest], answers: dict[str, dict[str, Condition]]) -> None:
        """Write each ProvisioningRequest's conditions (those that changed)."""
        for req in requests:
            conditions = answers.get(req.key)
            if conditions is None or conditions == req.conditions:
                continue
            try:
                self.kube.write_conditions(req, conditions)
            except KubeError as err:
                self.metrics.kube_errors.labels("provisioningrequest-status").inc()
                log.warning("%s", err)

    def write_buffers(self, buffers: list[CapacityBuffer], outcomes: dict[str, BufferOutcome]) -> None:
        """Write each CapacityBuffer's status (those that changed)."""
        for buf in buffers:
            out = outcomes.get(buf.key)
            if out is None or out.status == buf.status:
                continue
            try:
                self.kube.write_buffer_status(buf, out.status)
            except KubeError as err:
                self.metrics.kube_errors.labels("capacitybuffer-status").inc()
                log.warning("%s", err)

    # --- the cloud ------------------------------------------------------------------------------------
    def _cloud(self, what: str, fn: Callable[[], None], *, guarded: bool = True, pool: str | None = None,
               sizing: bool = False) -> bool:
        """One call to the cloud. A refusal that asking again cannot fix (credentials, permissions, quota;
        for a size, a group that is gone) is reported for the pool: the planner stops its actions."""
        if guarded:
            self.guard()
        try:
            fn()
            return True
        except ProviderError as err:  # counted by the provider (scaler.providers.counted)
            self.errors.append(f"{what}: {err}")
            log.warning("%s failed: %s", what, err, extra={"error_kind": err.kind, "retryable": err.retryable})
            if pool is not None and not err.retryable and err.kind in ("auth", "quota", *(("not-found",) if sizing
                                                                                         else ())):
                self.refused[pool] = f"{err.kind}: {err}"
            return False

    # --- drains -----------------------------------------------------------------------------------------
    def _start(self, down: ScaleDown, node: Node | None, now: float) -> None:
        current = self.drains.get(down.node)
        if node is None or (current is not None and (current.forced or not down.forced)):
            return
        if self.provider.pool_of(down.provider_id) != down.pool:
            log.warning("not removing %s: provider id %r is not an instance of pool %s", down.node, down.provider_id,
                        down.pool)
            return
        try:
            cordoned = self.kube.cordon_node(down.node)
        except KubeError as err:
            self.metrics.kube_errors.labels("cordon").inc()
            log.warning("cordon %s failed: %s", down.node, err)
            cordoned = False
        if not cordoned and not down.forced:
            return
        deadline = down.deadline if down.deadline is not None else now + self.drain_timeout
        drain = Drain(down.pool, down.node, down.provider_id, now, deadline, down.reason, down.forced,
                      down.deadline is not None, down.repair, frozenset(down.evict), frozenset(down.delete))
        self.drains[down.node] = drain
        log.info("draining %s of pool %s: %s", down.node, down.pool, down.reason)
        if drain.notice:
            kind = down.kind or ("spot-interruption" if down.forced else "rebalance")
            self.metrics.interruptions.labels(down.pool, kind).inc()
        if down.repair:
            self.metrics.repairs.labels(down.pool, "started").inc()
            for pod in to_evict(node.pods):
                self.kube.event(ObjectRef("Pod", pod.name, pod.namespace), "GpuRepair",
                                f"node {down.node} is being repaired ({down.reason}): the pod will be evicted",
                                "Warning")
        if down.forced:  # the two minutes are short: evict at once
            for pod in to_evict(node.pods):
                self._evict(pod, drain)
        elif not drain.notice:
            self.kube.event(ObjectRef("Node", down.node), "ScaleDown", f"draining node for removal: {down.reason}")

    def _progress(self, snapshot: Snapshot) -> None:
        """Carry on the drains; on stale cluster data only the forced ones (their nodes go anyway)."""
        now = snapshot.now
        by_name = {n.name: n for n in snapshot.nodes}
        for name, drain in list(self.drains.items()):
            node = by_name.get(name)
            if node is None:  # gone from the cluster (removed by us earlier, or by the cloud)
                del self.drains[name]
                continue
            if drain.started >= now or not (snapshot.fresh or drain.forced):
                continue  # this pass's pod list was read before the cordon: act on the next one
            left = to_evict(node.pods)
            if not drain.forced:
                # A pod bound between the plan and the cordon, or one that became unevictable since
                # (annotation added, controller gone), was never proven safe to move: give the node back.
                strays = [p.key for p in left if blocker(p) or p.key not in drain.planned]
                if strays:
                    self._abandon(drain, f"pod(s) {', '.join(sorted(strays)[:5])} arrived or became unevictable "
                                         "after the scale-down was planned")
                    continue
            drain.blocked = {p.key for p in left if self._evict(p, drain) == "blocked"}
            if not left:
                if not self._finish(drain) and now >= drain.deadline and not drain.forced:
                    # The cloud keeps refusing to remove it (e.g. the group's MinSize is above the
                    # config's min): give the empty node back rather than keep it cordoned for good.
                    self._abandon(drain, f"the instance could not be removed within {self.drain_timeout:.0f}s")
            elif now >= drain.deadline:
                if drain.forced:
                    self._finish(drain)  # the cloud takes the node now anyway
                elif not drain.repair:  # a broken node stays cordoned, its evictions retried, until it is empty
                    self._abandon(drain, f"pods {sorted(drain.blocked) or [p.key for p in left]} could not be "
                                         f"evicted within {drain.deadline - drain.started:.0f}s")

    def _evict(self, pod: Pod, drain: Drain) -> EvictResult | None:
        deleting = pod.key in drain.delete
        try:
            result = (self.kube.delete_pod if deleting else self.kube.evict)(pod.namespace, pod.name)
        except KubeError as err:
            self.metrics.kube_errors.labels("delete-pod" if deleting else "evict").inc()
            log.warning("%s", err)
            return None
        self.metrics.evictions.labels("deleted" if deleting and result == "evicted" else result).inc()
        if deleting:
            log.info("deleted %s from %s (%s: its budget is not waited for)", pod.key, drain.node, drain.reason)
        elif result == "blocked":
            log.info("eviction of %s blocked by a PodDisruptionBudget; retrying next pass", pod.key)
        return result

    def _finish(self, drain: Drain) -> bool:
        if not self._cloud(f"delete {drain.node}", lambda: self.provider.delete_node(drain.pool, drain.provider_id),
                           pool=drain.pool):
            return False
        self.metrics.scale_downs.labels(drain.pool).inc()
        if drain.repair:
            self.metrics.repairs.labels(drain.pool, "replaced").inc()
        self.removed.add(drain.node)  # stays cordoned until the cloud controller deletes the Node
        self.kube.event(ObjectRef("Node", drain.node), "ScaleDown",
                        f"node removed from pool {drain.pool}: {drain.reason}")
        log.info("removed %s from pool %s", drain.node, drain.pool)
        del self.drains[drain.node]
        return True

    def _abandon(self, drain: Drain, why: str, reason: str = "ScaleDownFailed") -> None:
        del self.drains[drain.node]
        if drain.blocked:
            self.abandoned[drain.node] = tuple(sorted(drain.blocked))
        try:
            self.kube.uncordon_node(drain.node)
        except KubeError as err:
            self.metrics.kube_errors.labels("uncordon").inc()
            log.warning("uncordon %s failed: %s", drain.node, err)
        if reason == "GpuRecovered":
            self.metrics.repairs.labels(drain.pool, "recovered").inc()
        self.kube.event(ObjectRef("Node", drain.node), reason, f"scale-down abandoned: {why}", "Warning")
        log.warning("scale-down of %s abandoned: %s", drain.node, why)

    def _delete_node(self, name: str) -> None:
        """A Node whose instance has been gone for long: the cloud controller manager normally deletes
        it; where none runs, it would be picked for removal every pass and hold its pods' place."""
        try:
            self.kube.delete_node(name)
        except KubeError as err:
            self.metrics.kube_errors.labels("delete").inc()
            log.warning("%s", err)
            return
        self.kube.event(ObjectRef("Node", name), "NodeDeleted", "its instance no longer exists", "Warning")
        log.warning("deleted Node %s: its instance no longer exists", name)

    def _release_orphans(self, nodes: list[Node]) -> None:
        """A node with our taint that no drain of this process owns: a previous process's; give it back."""
        self.removed &= {n.name for n in nodes}
        for node in nodes:
            if node.name in self.drains or node.name in self.removed or \
                    not any(t.key == keys.TAINT_DISRUPTING for t in node.taints):
                continue
            if self.provider.pool_of(node.provider_id) is None:
                continue  # its instance is gone or going: leave it cordoned
            try:
                if self.kube.uncordon_node(node.name):
                    log.info("uncordoned %s: cordoned by an earlier scaler process that did not finish", node.name)
            except KubeError as err:
                self.metrics.kube_errors.labels("uncordon").inc()
                log.warning("%s", err)


class Recorder:
    """The dry run's actuator: records each plan, changes nothing, and never drains (so every pass plans
    from the cluster as it is, as a real pass would after a restart). `kube` records the Events and the
    status the loop would write."""

    live = False

    def __init__(self) -> None:
        self.plans: list[Plan] = []
        self.drains: dict[str, Drain] = {}
        self.kube = RecordingKube()

    def draining(self) -> dict[str, DrainState]:
        return {}

    def report(self) -> tuple[dict[str, tuple[str, ...]], dict[str, str], list[Interruption]]:
        return {}, {}, []

    def forget(self) -> None:
        return None

    def act(self, plan: Plan, snapshot: Snapshot) -> None:
        self.plans = [*self.plans[-9:], plan]  # the last few, for whoever asks

    def answer(self, requests: list[ProvisioningRequest], answers: dict[str, dict[str, Condition]]) -> None:
        self.kube.calls.extend(("write_conditions", r.key) for r in requests if answers.get(r.key) != r.conditions)

    def write_buffers(self, buffers: list[CapacityBuffer], outcomes: dict[str, BufferOutcome]) -> None:
        self.kube.calls.extend(("write_buffer_status", b.key) for b in buffers
                               if b.key in outcomes and outcomes[b.key].status != b.status)


class RecordingKube:
    """`ports.Kube` for a dry run: remembers the last calls, changes nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.status: dict[str, Any] = {}

    def _record(self, what: str, target: str) -> None:
        self.calls = [*self.calls[-99:], (what, target)]

    def cordon_node(self, name: str) -> bool:
        self._record("cordon", name)
        return False

    def uncordon_node(self, name: str) -> bool:
        self._record("uncordon", name)
        return False

    def evict(self, namespace: str, name: str) -> EvictResult:
        self._record("evict", f"{namespace}/{name}")
        return "blocked"

    def delete_pod(self, namespace: str, name: str) -> EvictResult:
        self._record("delete_pod", f"{namespace}/{name}")
        return "blocked"

    def delete_node(self, name: str) -> None:
        self._record("delete_node", name)

    def event(self, ref: ObjectRef, reason: str, message: str, type_: str = "Normal") -> None:
        self._record("event", f"{ref.kind} {ref.namespace}/{ref.name} {reason}")

    def write_conditions(self, request: ProvisioningRequest, conditions: dict[str, Condition]) -> None:
        self._record("write_conditions", request.key)

    def write_buffer_status(self, buffer: CapacityBuffer, status: BufferStatus) -> None:
        self._record("write_buffer_status", buffer.key)

    def write_status(self, status: dict[str, Any]) -> None:
        self.status = status
