"""The planner's side of kube-scheduler's pod-to-pod and volume filters (`scaler.core.scheduling.filters`).

Most pods only meet the static filters and resources, and the planner places them by the count, per
class. A *constrained* pod is one those other filters concern: it has hard topology spread, required
pod (anti-)affinity, host ports, claims, a named node or matchFields, or a placed pod's anti-affinity
matches it. Such pods are placed one at a time, each against a PreFilter state computed for it, and
every pod the pass places (constrained or not) is recorded in the filters' `Cluster`, so the later pods
of the pass see it: a StatefulSet of 4 with hostname anti-affinity gets 4 nodes, a spread of 6 over 3
zones gets nodes in each.

Nodes the pass opens and booting nodes become nodes of the cluster (their own name and hostname) when
the first pod goes on them; a template being tried counts as an extra, empty node. A transaction
(`begin` / `rollback`) undoes placements with the Packer's (gangs, drain simulation). When no pod of
the snapshot, pending or running, is constrained, nothing here runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod
from scaler.core.model.storage import Storage
from scaler.core.planning.packing import FRESH, Bin, Group, Packer, Placement, PodClass
from scaler.core.scheduling.filters import Cluster, DraState, PodCheck, new_node, own_constraints

_REAL = frozenset({"existing", "coming"})


class Filtered:
    """The filters' Cluster of one pass, kept in step with the Packer's placements."""

    def __init__(self, packer: Packer, nodes: Sequence[Node], pending: Sequence[Pod], storage: Storage | None = None,
                 namespaces: Mapping[str, Mapping[str, str]] | None = None, dra: DraState | None = None,
                 on_nodes: bool | None = None) -> None:
        self.packer = packer
        # Running pods count too: their anti-affinity keeps pending pods away, and the drain check
        # moves them under their own constraints (`on_nodes`: whether one does, when the caller knows).
        if on_nodes is None:
            on_nodes = any(own_constraints(p) for n in nodes for p in n.pods)
        self.active = (on_nodes or any(own_constraints(p) for p in pending)
                       or (dra is not None and any(dra.asks_extended(p) for p in pending)))
        self.cluster: Cluster | None = None
        if self.active:
            self.cluster = Cluster(nodes, storage, namespaces, dra)
            self.cluster.expect(pending)
        self._nodes: dict[int, tuple[Bin, Node]] = {}
        self._journal: list[tuple[str, Pod | None, str, Node | None, list[Pod]]] | None = None
        self._constrained: dict[int, tuple[PodClass, bool]] = {}
        self._uniform: dict[tuple[int, object], bool] = {}  # (group, CountedClaims.asks) -> CountedClaims.uniform
        self._reach: dict[tuple[int, object], bool] = {}  # (statics, CountedClaims.asks) -> counted
        # (group, request[, settled key]) -> first bin worth asking
        self._hints: dict[tuple[Any, ...], int] = {}

    # --- which pods -------------------------------------------------------------------------------
    def constrained(self, pod: Pod) -> bool:
        return self.cluster is not None and self.cluster.needs_check(pod)

    def class_key(self, pod: Pod) -> object:
        """Constrained pods never share a class with the others. Within a constrained class pods may
        differ in what the filters read (labels, claims, ...): each is checked on its own, the class
        only shares requests, statics and scores. Pods whose only constraint is plain claims from
        templates (`Cluster.counted_claims`) share a class per claim specs: they are interchangeable."""
        cluster = self.cluster  # (a pod with claims needs the check: most GPU pods of a DRA cluster)
        if cluster is None or not (pod.resource_claims or cluster.needs_check(pod)):
            return None
        specs = cluster.counted_claims(pod)
        return True if specs is None else ("claims", specs)

    def is_constrained(self, cls: PodClass) -> bool:
        """Whether the class is placed one pod at a time. A class of plain claims is placed by the count
        (its nz counts keys.RES_DRA_DEVICES) when every node it may reach has only devices its claims
        may take (`filters.dra.CountedClaims`): there a node allocates them exactly when it has that many free."""
        hit = self._constrained.get(id(cls))
        if hit is None:  # the class is kept with its answer: its id cannot be reused meanwhile
            hit = self._constrained[id(cls)] = (cls, self.constrained(cls.rep) and not self.counted(cls))
        return hit[1]

    def counted(self, cls: PodClass) -> bool:
        """A class of plain claims that every node it may reach allocates by the count."""
        if self.cluster is None or keys.RES_DRA_DEVICES not in self.packer.index:
            return False
        specs = self.cluster.counted_claims(cls.rep)
        if specs is None:
            return False
        asks = self.cluster.dra.counted.asks(specs)  # what `uniform` reads of them (workloads of 1, 2, 4, 8 GPUs: one)
        key = (cls.static_id, asks)  # the pass makes no group after the packer's (nodes opened join a template's)
        hit = self._reach.get(key)
        if hit is None:
            hit = self._reach[key] = all(self._uniform_group(g, specs, asks) for g in self.packer.groups.values()
                                         if self.packer.static_reason(cls.static_id, g) is None)
        return hit

    def _uniform_group(self, g: Group, specs: tuple[int, ...], asks: object) -> bool:
        key = (id(g), asks)  # a group's nodes stay (those opened from a template are the template's)
        hit = self._uniform.get(key)
        if hit is None:
            assert self.cluster is not None
            counted = self.cluster.dra.counted
            hit = self._uniform[key] = all(counted.uniform(node, specs) for node in (g.node, *(b.node for b in g.bins)))
        return hit

    # --- nodes --------------------------------------------------------------------------------------
    def node_of(self, b: Bin) -> Node:
        """The node a bin stands for: a real node, or a node of its own for a booting / new one."""
        if b.kind in _REAL:
            return b.node
        hit = self._nodes.get(id(b))
        if hit is None or hit[0] is not b:  # the bin is kept with its node: its id is not reused meanwhile
            hit = self._nodes[id(b)] = (b, new_node(b.group.node, b.name))
        return hit[1]

    def check(self, pod: Pod) -> PodCheck:
        assert self.cluster is not None
        return self.cluster.check(pod)

    def admits_without(self, pod: Pod, template: Node, gone: str) -> bool:
        """Whether the pod's filters admit a node of the template once node `gone` (the pod's) is removed:
        the claims allocated there are then allocated anew where the pod lands, as kube-scheduler does once
        their pods are gone (a claim shared by pods of that node moves with them)."""
        assert self.cluster is not None
        dra = self.cluster.dra
        if gone in dra.removed:
            return self.cluster.check(pod).reason(template) is None
        dra.remove_node(gone)
        try:
            return self.cluster.check(pod).reason(template) is None
        finally:
            dra.restore_node(gone)

    # --- placements ---------------------------------------------------------------------------------
    def record(self, pod: Pod, b: Bin, counted: tuple[int, ...] | None = None) -> None:
        cluster = self.cluster
        if cluster is None:
            return
        if b.name not in cluster.nodes:
            cluster.add_node(self.node_of(b), (), None if b.kind in _REAL else b.group.node)
            if self._journal is not None:
                self._journal.append(("node", None, b.name, None, []))
        cluster.place(pod, b.name, counted)
        if counted is None and pod.resource_claims:
            self._count_devices(pod, b)
        if self._journal is not None:
            self._journal.append(("pod", pod, b.name, None, []))

    def _count_devices(self, pod: Pod, b: Bin) -> None:
        """The bin's count of free DRA devices less those the pod's allocation took beyond what its class
        counted (a claim that tolerates a taint counts none, yet may take an untainted device)."""
        packer = self.packer
        dev = packer.index.get(keys.RES_DRA_DEVICES)
        assert self.cluster is not None
        hit = self.cluster.dra.by_pod.get(id(pod))
        if dev is None or hit is None or packer.claim_counts is None:
            return
        blocked = self.cluster.dra.blocked
        devices, untainted = packer.claim_counts(pod)
        extra = len(hit[2]) - devices
        untainted = len(hit[2] - blocked if blocked else hit[2]) - untainted
        if extra > 0 or untainted > 0:
            if packer._journal is not None:
                packer._journal.append((b, list(b.free)))
            b.free[dev] -= max(extra, 0)
            b.free[packer.index[keys.RES_DRA_UNTAINTED]] -= max(untainted, 0)

    def record_placement(self, pods: Iterable[Pod], placement: Iterable[tuple[Bin, int]]) -> None:
        """Record count placements: the pods in order, k per (bin, k)."""
        if self.cluster is None:
            return
        it = iter(pods)
        counted = None  # a class of plain claims is placed by the count only where it allocates so
        for b, k in placement:
            for _ in range(k):
                pod = next(it)
                if pod.resource_claims and counted is None:
                    counted = self.cluster.counted_claims(pod)
                self.record(pod, b, counted)

    def remove(self, b: Bin) -> None:
        """A node leaves (the drain simulation removes it): its pods are no longer placed there."""
        cluster = self.cluster
        if cluster is None or b.name not in cluster.nodes:
            return
        node = cluster.nodes[b.name]
        pods = cluster.remove_node(b.name)
        if self._journal is not None:
            self._journal.append(("gone", None, b.name, node, pods))

    def begin(self) -> None:
        self._journal = []

    def commit(self) -> None:
        self._journal = None

    def rollback(self) -> None:
        self._hints.clear()  # the Packer's rollback gave bins their room back
        journal, self._journal = self._journal or [], None
        cluster = self.cluster
        if cluster is None:
            return
        for what, pod, name, node, pods in reversed(journal):
            if what == "pod":
                assert pod is not None
                cluster.unplace(pod, name)
            elif what == "node":
                cluster.remove_node(name)
            else:
                assert node is not None
                cluster.add_node(node, pods)

    # --- one pod at a time ----------------------------------------------------------------------------
    def fill(self, cls: PodClass, groups: Iterable[Group], pods: Sequence[Pod], kinds: frozenset[str],
             out: Placement) -> list[Pod]:
        """First-fit each pod into the groups' bins of `kinds` that have room and pass its filters;
        returns the pods that found no bin, in order. Placements go to `out` as (bin, 1)."""
        nz = cls.nz
        groups = list(groups)
        left: list[Pod] = []
        for pod in pods:
            check = self.check(pod)
            if check.pod_reason is not None:
                left.append(pod)
                continue
            target = self.first_fit(check, nz, groups, kinds)
            if target is None:
                left.append(pod)
                continue
            self.take(target, nz)
            append_one(out, target)
            self.record(pod, target)
        return left

    def first_fit(self, check: PodCheck, nz: tuple[tuple[int, int], ...], groups: Iterable[Group],
                  kinds: frozenset[str]) -> Bin | None:
        for g in groups:
            if not g.bins:
                continue
            bound = g.bound
            if bound is not None:
                for i, a in nz:
                    if bound[i] < a:
                        break
                else:
                    bound = None
                if bound is not None:
                    continue  # no bin of the group has room for the request
            if g.node.is_template and check.template_reason(g.node) is not None:
                continue  # a template group: its nodes differ only in name and hostname
            bins = g.bins
            # Bins only lose room while a pass places pods (a rollback clears the hints): those before
            # the first one that had room for this request still have none. For a settled key
            # (PodCheck.settled_key), those before the first one not refused stay refused too.
            hint_key = (id(g), nz)
            settled = check.settled_key()
            settled_hint = (id(g), nz, settled)
            start = max(g.start, self._hints.get(hint_key, 0),
                        self._hints.get(settled_hint, 0) if settled is not None else 0)
            first_roomy = first_open = len(bins)
            for j in range(start, len(bins)):
                b = bins[j]
                free = b.free
                for i, a in nz:
                    if free[i] < a:
                        break
                else:
                    if b.removed or (b.kind not in kinds and not (b.fresh and FRESH in kinds)):
                        first_open = min(first_open, j)
                        continue
                    if j < first_roomy:
                        first_roomy = j
                        self._hints[hint_key] = j
                    if check.reason(self.node_of(b)) is None:
                        if settled is not None:
                            self._hints[settled_hint] = min(first_open, j)
                        return b
            if first_roomy == len(bins):
                self._hints[hint_key] = len(bins)
            if settled is not None:
                self._hints[settled_hint] = min(first_open, len(bins))
        return None

    def take(self, b: Bin, nz: tuple[tuple[int, int], ...]) -> None:
        """One pod's requests off a bin, as the Packer takes them (journalled, change-logged)."""
        packer = self.packer
        if packer._journal is not None:
            packer._journal.append((b, list(b.free)))
        for i, a in nz:
            b.free[i] -= a
        if b.alloc is not None:
            b.version += 1
            packer.changed.append(b)


def append_one(out: Placement, b: Bin) -> None:
    """One more pod on b: grow the last entry when it is the same bin (fewer objects for the pass)."""
    if out and out[-1][0] is b:
        out[-1] = (b, out[-1][1] + 1)
    else:
        out.append((b, 1))
