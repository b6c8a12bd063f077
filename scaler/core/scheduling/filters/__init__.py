"""kube-scheduler's filters beyond the four static ones, for one pass of placements.

`scaler.core.scheduling.predicates` has the filters that look at a pod and a node alone (NodeUnschedulable,
NodeAffinity on labels, TaintToleration, NodeResourcesFit). The others look at the pods around: a
`Cluster` holds the nodes and the pods placed on them, bound ones and those the planner put on
existing, booting and new nodes in this pass, so that the later pods of the pass see the earlier:

    cluster = Cluster(snapshot.nodes, storage, namespaces)
    if cluster.needs_check(pod):            # cheap: most pods have nothing these filters look at
        check = cluster.check(pod)          # kube-scheduler's PreFilter, once per pod
        check.pod_reason                    # set: the pod fits no node at all, new ones included
        check.reason(node)                  # the Filter: None, or the scheduler's reason
    cluster.add_node(new_node(template, "new-pool-a-0"))   # a node the plan opens
    cluster.place(pod, node_name)           # then the next pod's check counts it

A `check` is valid until the next `place` / `unplace` / `add_node` / `remove_node`. A node passed to
`reason` that is not in the cluster (a template being tried) counts as an extra, empty node, as
cluster-autoscaler adds a template node to the scheduler's snapshot to test it.

Filters, in kube-scheduler's order: NodeName, NodeAffinity's matchFields, NodePorts,
VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, DynamicResources, PodTopologySpread,
InterPodAffinity.
See docs/planner.md for every filter of the scheduler and what the planner does with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaler.core.model import keys
from scaler.core.model.dra import DraObjects
from scaler.core.model.objects import Node, Pod
from scaler.core.model.storage import Storage
from scaler.core.scheduling.filters import reasons
from scaler.core.scheduling.filters.dra import DraCheck, DraState
from scaler.core.scheduling.filters.index import Placed
from scaler.core.scheduling.filters.interpod import AffinityCheck, blocked_by_existing
from scaler.core.scheduling.filters.ports import field_affinity_reason, node_name_reason, ports_reason
from scaler.core.scheduling.filters.topology import SpreadCheck
from scaler.core.scheduling.filters.volumes import VolumeCheck
from scaler.core.scheduling.predicates import has_field_affinity

__all__ = ["Cluster", "DraState", "PodCheck", "new_node", "own_constraints", "reasons"]


def own_constraints(pod: Pod) -> bool:
    """The pod itself asks for something these filters decide (per node, or with the pods around)."""
    return bool(pod.spread or pod.pod_affinity or pod.pod_anti_affinity or pod.host_ports or pod.claims
                or pod.resource_claims or (pod.node_name and pod.phase == "Pending") or has_field_affinity(pod))


def new_node(template: Node, name: str) -> Node:
    """A node the plan opens from a pool's template: its own name and hostname (a domain of its own
    for hostname spread and anti-affinity), the template's DaemonSet pods."""
    labels = dict(template.labels)
    labels[keys.LABEL_HOSTNAME] = name
    # The template's pods list is shared, not copied: the filters keep their own record of placements.
    return Node(name, labels, template.taints, template.allocatable, template.unschedulable, template.ready,
                "", template.pool, template.created_at, template.pods, True, template.slices)


class PodCheck:
    """One pod's PreFilter state against a cluster."""

    __slots__ = ("affinity", "dra", "per_node", "pod", "pod_reason", "spread", "used_ports", "volumes")

    def __init__(self, cluster: Cluster, pod: Pod) -> None:
        placed = cluster.placed
        self.pod = pod
        self.volumes = VolumeCheck(placed, cluster.storage, pod) if pod.claims else None
        self.pod_reason = self.volumes.pod_reason if self.volumes is not None else None
        self.dra = DraCheck(cluster.dra, pod) if pod.resource_claims or cluster.dra.asks_extended(pod) else None
        if self.pod_reason is None and self.dra is not None:
            self.pod_reason = self.dra.pod_reason
        self.spread = SpreadCheck(placed, pod) if pod.spread else None
        self.affinity = (AffinityCheck(placed, pod)
                         if pod.pod_affinity or pod.pod_anti_affinity or placed.anti else None)
        self.used_ports = placed.ports
        self.per_node = (pod.node_name and pod.phase == "Pending") or has_field_affinity(pod)

    def settled_key(self) -> tuple[int, ...] | None:
        """For a pod whose only filter is DRA on claims to allocate: a key such that a node refusing it
        refuses every later pod of the same key in the pass (while pods are placed, nodes only lose
        devices and room, and an allocation that fails on more free devices fails on fewer); None when
        other filters (or claims allocated already) decide too."""
        d = self.dra
        if (d is None or d.pinned or not d.claims or self.volumes is not None or self.spread is not None
                or self.affinity is not None or self.per_node or self.pod.host_ports):
            return None
        return d.spec

    def template_reason(self, template: Node) -> str | None:
        """A refusal that holds for every node opened from the template (label-only filters), or None
        (then each node must be asked)."""
        if self.pod_reason is not None:
            return self.pod_reason
        return self.volumes.label_reason(template) if self.volumes is not None else None

    def reason(self, node: Node) -> str | None:
        """Why kube-scheduler's filters here refuse the node (the first that does), or None."""
        if self.pod_reason is not None:
            return self.pod_reason
        pod = self.pod
        if self.per_node:
            why = node_name_reason(pod, node) or field_affinity_reason(pod, node)
            if why is not None:
                return why
        if pod.host_ports:
            why = ports_reason(pod, self.used_ports.get(node.name, ()))
            if why is not None:
                return why
        if self.volumes is not None:
            why = self.volumes.reason(node)
            if why is not None:
                return why
        if self.dra is not None:
            why = self.dra.reason(node)
            if why is not None:
                return why
        if self.spread is not None:
            why = self.spread.reason(node)
            if why is not None:
                return why
        return self.affinity.reason(node) if self.affinity is not None else None


class Cluster:
    """Nodes and placed pods of a pass, for the filters that depend on them."""

    def __init__(self, nodes: Iterable[Node] = (), storage: Storage | None = None,
                 namespaces: Mapping[str, Mapping[str, str]] | None = None, dra: DraState | None = None) -> None:
        """`namespaces`: name -> labels of the cluster's namespaces (for namespaceSelector); when None,
        a namespace is known by the `kubernetes.io/metadata.name` label alone. `dra`: the pass's DRA
        devices (none: no claim can be allocated)."""
        self.storage = storage if storage is not None else Storage()
        self.dra = dra if dra is not None else DraState(DraObjects())
        self.placed = Placed(namespaces, self.storage.attachments)
        for node in nodes:
            self.placed.add_node(node)

    @property
    def nodes(self) -> Mapping[str, Node]:
        return self.placed.nodes

    def add_node(self, node: Node, pods: Iterable[Pod] | None = None, like: Node | None = None) -> None:
        """A node with its pods (`node.pods` unless given); `like`: the template it was opened from."""
        self.placed.add_node(node, pods, like)
        self.dra.restore_node(node.name)

    def remove_node(self, name: str) -> list[Pod]:
        self.dra.remove_node(name)
        return self.placed.remove_node(name)

    def place(self, pod: Pod, node_name: str, counted: tuple[int, ...] | None = None) -> None:
        """`counted`: the pod's plain claims' spec ids, placed by the count (`dra.CountedClaims.place`)."""
        self.placed.place(pod, node_name)
        if counted is not None:
            self.dra.counted.place(pod, self.placed.nodes[node_name], counted)
        elif pod.resource_claims or self.dra.asks_extended(pod):
            last = self.dra.last
            check = last if last is not None and last.pod is pod else DraCheck(self.dra, pod)
            node = self.placed.nodes[node_name]
            claims, spec = check.claims_on(node)
            generated = check.generated | {c.key for c in claims[len(check.claims):]}
            self.dra.place(pod, node, claims, generated, spec)

    def unplace(self, pod: Pod, node_name: str) -> None:
        self.placed.unplace(pod, node_name)
        if pod.resource_claims or self.dra.asks_extended(pod):
            self.dra.unplace(pod)

    def expect(self, pods: Iterable[Pod]) -> None:
        """Declare the pods the pass may place: `needs_check` then also flags the pods their
        anti-affinity would keep away, before those pods are placed."""
        self.placed.expect(pods)

    def needs_check(self, pod: Pod) -> bool:
        """Whether these filters can refuse the pod anywhere now; False: predicates alone decide."""
        return own_constraints(pod) or self.dra.asks_extended(pod) or blocked_by_existing(self.placed, pod)

    def counted_claims(self, pod: Pod) -> tuple[int, ...] | None:
        """When the pod's plain claims (DraState.counted) are all these filters can refuse it for: their
        spec ids; else None."""
        if (pod.spread or pod.pod_affinity or pod.pod_anti_affinity or pod.host_ports or pod.claims
                or (pod.node_name and pod.phase == "Pending") or has_field_affinity(pod)
                or blocked_by_existing(self.placed, pod)):
            return None
        return self.dra.counted.specs(pod)

    def check(self, pod: Pod) -> PodCheck:
        return PodCheck(self, pod)

    def reason(self, pod: Pod, node: Node) -> str | None:
        """One-off: check(pod).reason(node)."""
        return PodCheck(self, pod).reason(node)
