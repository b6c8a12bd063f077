"""The simulator's kube-scheduler: filter with the core's predicates, score like a real profile.

Filter: NodeUnschedulable, NodeAffinity (nodeSelector, required terms), TaintToleration and
NodeResourcesFit, through `scaler.core.scheduling.predicates` (the planner's own filters), then, for the pods
they concern, NodeName, matchFields, NodePorts, the volume filters, PodTopologySpread and
InterPodAffinity through `scaler.core.scheduling.filters` (a `Cluster` kept in step with every bind).

Score with `scaler.core.scheduling.scoring`, the planner's own implementation of the profiles (weights,
integer arithmetic and the documented tie-break to the first node name are there). Every feasible
node is scored (percentageOfNodesToScore's sampling in clusters over 100 nodes is not modelled).

Pods are bound in queue order (priority, then arrival, as PrioritySort), each on its own: the
default scheduler has no gang scheduling, so a gang's members bind as they fit and the job starts
when the last one runs.

Incremental: nodes are indexed by (pool, zone) with the static filter result cached per pod shape,
and only nodes with room are looked at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod
from scaler.core.model.resources import Resources, fits
from scaler.core.model.storage import Storage
from scaler.core.model.workload import gpu_devices, is_daemonset
from scaler.core.scheduling.filters import Cluster, DraState
from scaler.core.scheduling.predicates import free_resources, has_field_affinity, static_reason
from scaler.core.scheduling.scoring import ScoringProfile, select_node


def _mentions_hostname(pod: Pod) -> bool:
    """The static filters must look at every node (its hostname label or its name), not one per group."""
    return keys.LABEL_HOSTNAME in pod.node_selector or has_field_affinity(pod) or any(
        r.key == keys.LABEL_HOSTNAME for term in pod.required_affinity for r in term)


@dataclass(slots=True)
class _Group:
    nodes: dict[str, Node] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)  # schedulable nodes with room for at least one more pod


class Binder:
    """A cluster's nodes, their bound pods and free resources; binds pods as a scheduler profile would."""

    def __init__(self, profiles: dict[str, ScoringProfile], storage: Storage | None = None,
                 namespaces: dict[str, dict[str, str]] | None = None, dra: DraState | None = None) -> None:
        """`profiles`: scheduler name -> profile; a pod naming another scheduler stays pending.
        `storage`, `namespaces`: what the volume filters and namespaceSelector read (none by default);
        `dra`: the DRA objects whose devices claims are allocated from (none: no claim is)."""
        self.profiles = profiles
        self.cluster = Cluster((), storage, namespaces, dra)
        self.last_reason: str | None = None  # why the last pod `bind` refused fits no node (filters only)
        self.nodes: dict[str, Node] = {}
        self.free: dict[str, Resources] = {}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._static: dict[tuple[object, tuple[str, str]], bool] = {}

    # --- nodes ----------------------------------------------------------------------------------
    @staticmethod
    def _group_key(node: Node) -> tuple[str, str]:
        return (node.pool or f"node:{node.name}", node.labels.get(keys.LABEL_ZONE, ""))

    def add_node(self, node: Node) -> None:
        self.nodes[node.name] = node
        self.free[node.name] = free_resources(node)
        group = self._groups.setdefault(self._group_key(node), _Group())
        group.nodes[node.name] = node
        self.cluster.add_node(node)
        self._refresh(node)

    def remove_node(self, name: str) -> list[Pod]:
        """Forget a node; returns the workload pods that were bound to it (DaemonSet pods dropped)."""
        self.cluster.remove_node(name)
        node = self.nodes.pop(name)
        self.free.pop(name, None)
        group = self._groups[self._group_key(node)]
        group.nodes.pop(name, None)
        group.open.discard(name)
        out = [p for p in node.pods if not is_daemonset(p)]
        for pod in out:
            pod.node_name = None
        return out

    def publish(self, name: str, resource: str, amount: int, *, healthy: bool = True) -> None:
        """A node's allocatable resource appears (a device plugin registered it: its capacity too), or with
        a negative `amount` and not `healthy`, goes (the device plugin marked a device unhealthy)."""
        node = self.nodes[name]
        node.allocatable[resource] = node.allocatable.get(resource, 0) + amount
        if healthy:
            node.capacity[resource] = node.capacity.get(resource, 0) + amount
        free = self.free[name]
        free[resource] = free.get(resource, 0) + amount
        self._refresh(node)

    def cordon(self, name: str, cordoned: bool = True) -> None:
        node = self.nodes[name]
        node.unschedulable = cordoned
        self._refresh(node)

    def _refresh(self, node: Node) -> None:
        group = self._groups[self._group_key(node)]
        free = self.free[node.name]
        has_room = not node.unschedulable and free.get(keys.RES_PODS, 0) > 0 and free.get(keys.RES_CPU, 0) > 0
        if gpu_devices(node.allocatable) > 0 and gpu_devices(free) <= 0:
            # A GPU node with no free GPU device only takes CPU pods that tolerate its taints: rare; keep it
            # open only when it has cpu left and no GPU taint keeps CPU pods away. (A MIG node whose whole GPUs
            # are all taken still has its slices: it stays open while any device is free.)
            has_room = has_room and not any(t.key == keys.TAINT_GPU for t in node.taints)
        if has_room:
            group.open.add(node.name)
        else:
            group.open.discard(node.name)

    # --- pods -----------------------------------------------------------------------------------
    def _shape(self, pod: Pod) -> object:
        return (pod.tolerations, tuple(sorted(pod.node_selector.items())), pod.required_affinity)

    def candidates(self, pod: Pod) -> list[tuple[Node, Resources]]:
        """Feasible nodes with their free resources. The static filters are checked once per
        (pod shape, pool, zone): nodes of a group differ only in their hostname label; the filters
        that look at the pods around (`scaler.core.scheduling.filters`) per node, for the pods they concern."""
        self.last_reason = None
        check = self.cluster.check(pod) if self.cluster.needs_check(pod) else None
        if check is not None and check.pod_reason is not None:
            self.last_reason = check.pod_reason
            return []
        shape = self._shape(pod)
        per_node = _mentions_hostname(pod)
        out: list[tuple[Node, Resources]] = []
        for key, group in self._groups.items():
            if not group.open:
                continue
            if not per_node:
                cached = self._static.get((shape, key))
                if cached is None:
                    sample = next(iter(group.nodes.values()))
                    # Cordoning is per node (the open set); the probe checks selectors and taints only.
                    probe = Node(sample.name, labels=sample.labels, taints=sample.taints)
                    cached = static_reason(pod, probe) is None
                    self._static[(shape, key)] = cached
                if not cached:
                    continue
            for name in sorted(group.open):
                node = self.nodes[name]
                free = self.free[name]
                if fits(pod.requests, free) and (not per_node or static_reason(pod, node) is None):
                    if check is not None:
                        why = check.reason(node)
                        if why is not None:
                            self.last_reason = why
                            continue
                    out.append((node, free))
        return out

    def bind(self, pod: Pod) -> Node | None:
        """Bind the pod where its scheduler profile would; None when no node fits (it stays pending)."""
        profile = self.profiles.get(pod.scheduler_name)
        if profile is None:
            return None
        node = select_node(pod, self.candidates(pod), profile)
        if node is not None:
            self.place(pod, node.name)
        return node

    def place(self, pod: Pod, node_name: str) -> None:
        node = self.nodes[node_name]
        node.pods.append(pod)
        pod.node_name = node_name
        pod.phase = "Running"
        self.cluster.place(pod, node_name)
        free = self.free[node_name]
        for name, value in pod.requests.items():
            free[name] = free.get(name, 0) - value
        self._refresh(node)

    def unbind(self, pod: Pod) -> None:
        """Remove a pod from its node (completed or evicted)."""
        if pod.node_name is None or pod.node_name not in self.nodes:
            pod.node_name = None
            return
        node = self.nodes[pod.node_name]
        node.pods = [p for p in node.pods if p is not pod]
        self.cluster.unplace(pod, node.name)
        free = self.free[node.name]
        for name, value in pod.requests.items():
            free[name] = free.get(name, 0) + value
        pod.node_name = None
        pod.phase = "Pending"
        self._refresh(node)
