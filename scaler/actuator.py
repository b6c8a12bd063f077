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
4. the nodes the plan gives back (cordoned by a drain no one carries on: a previous process's) are
   uncordoned while a pool still holds their instance; the notices the plan handled are acknowledged.

It keeps nothing across passes that a decision reads: the drains in progress are the State's, handed over in
each Plan (`Plan.draining`), and what it did (drains begun, changed, ended; instances removed; evictions
refused; cloud refusals; notices acknowledged) is reported into the next Snapshot (`report()`, an `Acted`),
which the decision folds into the State. Its own, for one pass only: the evictions it makes and which a budget
refused, and the cloud calls that failed (`errors`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any

from scaler.core.model.buffers import BufferStatus, CapacityBuffer
from scaler.core.model.conditions import Condition
from scaler.core.model.drain import DrainState
from scaler.core.model.objects import Node, Pod
from scaler.core.model.provreq import ProvisioningRequest
from scaler.core.model.workload import blocker, to_evict
from scaler.core.planning.decisions import BufferOutcome, Plan, ScaleDown
from scaler.core.planning.snapshot import Acted, Snapshot
from scaler.metrics import Metrics
from scaler.ports import EvictResult, Kube, KubeError, ObjectRef, PoolProvider
from scaler.providers.base import ProviderError

log = logging.getLogger("scaler.actuator")


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
        self.errors: list[str] = []  # the last pass's failed cloud calls, newest last
        self.acted = Acted()  # what it did since the last decision: the next Snapshot's report
        # The plan's drains in progress as this pass carries them on (begun, ended): a working copy, made again
        # from each Plan; what the status and the simulator read after the pass, never a decision.
        self.drains: dict[str, DrainState] = {}

    # --- what the next Snapshot says --------------------------------------------------------------
    def report(self) -> Acted:
        """What it did since the last decision (drains begun, changed and ended, instances removed, evictions
        refused, cloud refusals, the notices acted on to the end). Reported until the next `act`, which follows
        the decision that read it: a pass that failed before acting loses none of it."""
        return self.acted

    def forget(self) -> None:
        """Not the leader any more: the drains in progress are dropped from the State; the new leader gives the
        drained nodes back."""
        if self.drains:
            log.warning("lost the lease: leaving %d drain(s) to the new leader", len(self.drains))
        self.drains = {}
        self.acted = Acted(forgot=True)

    # --- one pass ------------------------------------------------------------------------------------
    def act(self, plan: Plan, snapshot: Snapshot) -> None:
        self.errors = []
        self.acted = Acted()
        self.drains = dict(plan.draining)
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
                self._abandon(self.drains[name], "its GPUs are healthy again", (), "GpuRecovered")
        for ev in plan.events:
            self.kube.event(ObjectRef("Node", ev.node), ev.reason, ev.message, "Warning" if ev.warning else "Normal")
        self._progress(snapshot)
        if snapshot.fresh:
            for name in plan.release:
                self._release(nodes[name])
            for name in plan.delete_nodes:
                self._delete_node(name)
        if plan.handled:
            self._cloud("acknowledge notices", lambda: self.provider.acknowledge(plan.handled), guarded=False)
        self.acted.acknowledged = list(plan.handled)

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
                self.acted.refused[pool] = f"{err.kind}: {err}"
            return False

    # --- drains -----------------------------------------------------------------------------------------
    def _keep(self, drain: DrainState) -> None:
        self.drains[drain.node] = self.acted.drains[drain.node] = drain

    def _end(self, drain: DrainState) -> None:
        del self.drains[drain.node]
        self.acted.ended.add(drain.node)

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
        drain = DrainState(down.node, down.pool, now, deadline, down.forced, down.deadline is not None, down.repair,
                           down.provider_id, down.reason, frozenset(down.evict), frozenset(down.delete))
        self._keep(drain)
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
                self._end(drain)
                continue
            if drain.started >= now or not (snapshot.fresh or drain.forced):
                continue  # this pass's pod list was read before the cordon: act on the next one
            left = to_evict(node.pods)
            if not drain.forced:
                # A pod bound between the plan and the cordon, or one that became unevictable since
                # (annotation added, controller gone), was never proven safe to move: give the node back.
                strays = [p.key for p in left if blocker(p) or p.key not in drain.evict]
                if strays:
                    self._abandon(drain, f"pod(s) {', '.join(sorted(strays)[:5])} arrived or became unevictable "
                                         "after the scale-down was planned", drain.blocked)
                    continue
            blocked = frozenset(p.key for p in left if self._evict(p, drain) == "blocked")
            if blocked != drain.blocked:  # the State keeps them: a drain given up later says which budgets refused
                self._keep(dataclasses.replace(drain, blocked=blocked))
            if not left:
                if not self._finish(drain, now) and now >= drain.deadline and not drain.forced:
                    # The cloud keeps refusing to remove it (e.g. the group's MinSize is above the
                    # config's min): give the empty node back rather than keep it cordoned for good.
                    self._abandon(drain, f"the instance could not be removed within {self.drain_timeout:.0f}s",
                                  blocked)
            elif now >= drain.deadline:
                if drain.forced:
                    self._finish(drain, now)  # the cloud takes the node now anyway
                elif not drain.repair:  # a broken node stays cordoned, its evictions retried, until it is empty
                    self._abandon(drain, f"pods {sorted(blocked) or [p.key for p in left]} could not be "
                                         f"evicted within {drain.deadline - drain.started:.0f}s", blocked)

    def _evict(self, pod: Pod, drain: DrainState) -> EvictResult | None:
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

    def _finish(self, drain: DrainState, now: float) -> bool:
        if not self._cloud(f"delete {drain.node}", lambda: self.provider.delete_node(drain.pool, drain.provider_id),
                           pool=drain.pool):
            return False
        self.metrics.scale_downs.labels(drain.pool).inc()
        if drain.repair:
            self.metrics.repairs.labels(drain.pool, "replaced").inc()
        self.acted.removed[drain.node] = now  # stays cordoned until the cloud controller deletes the Node
        self.kube.event(ObjectRef("Node", drain.node), "ScaleDown",
                        f"node removed from pool {drain.pool}: {drain.reason}")
        log.info("removed %s from pool %s", drain.node, drain.pool)
        self._end(drain)
        return True

    def _abandon(self, drain: DrainState, why: str, blocked: frozenset[str] | tuple[()],
                 reason: str = "ScaleDownFailed") -> None:
        """Give the node back; `blocked`: the pods whose eviction a budget refused (the planner holds the node)."""
        self._end(drain)
        if blocked:
            self.acted.abandoned[drain.node] = tuple(sorted(blocked))
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

    def _release(self, node: Node) -> None:
        """A node the plan gives back (cordoned by a drain no one carries on): uncordoned while a pool still holds
        its instance (one that is gone or going is left cordoned)."""
        if self.provider.pool_of(node.provider_id) is None:
            return
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
        self.drains: dict[str, DrainState] = {}
        self.kube = RecordingKube()

    def report(self) -> Acted:
        return Acted()

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
