"""The simulator's Kubernetes API, as the actuator sees it (`scaler.ports.Kube`).

Cordon and uncordon set the node unschedulable in the scheduler (`Binder`) and put or take the drain
taint, as `KubeActions` does on a cluster. Evictions are answered the way the API server answers
policy/v1 Eviction: HTTP 429 ("blocked") while a PodDisruptionBudget that selects the pod allows no
disruption, else the pod is deleted and its controller creates it again, pending. The budgets are
the simulated workloads' own: a gang job is protected as gang schedulers (kube-batch, Volcano) do
it, `minAvailable` = all its pods, so none of its pods may be evicted while it runs, and a node
running one can be drained only by the cloud taking it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.buffers import BufferStatus, CapacityBuffer
from scaler.core.model.conditions import Condition
from scaler.core.model.objects import Node, Pod, PodDisruptionBudget, Taint
from scaler.core.model.provreq import ProvisioningRequest
from scaler.core.model.workload import is_gpu_device
from scaler.ports import EvictResult, ObjectRef
from scaler.providers.sim import Instance
from scaler.sim.binder import Binder

_DRAIN_TAINT = Taint(keys.TAINT_DISRUPTING, "true", "NoSchedule")


def kubelet_node(inst: Instance, config: ScalerConfig, now: float,
                 gpus_later: bool) -> tuple[Node, list[tuple[str, int]]]:
    """The Node an instance registers as: its pool's template with its own name and DaemonSet pods. With
    `gpus_later` its GPU devices are left out and returned, for the device plugin to publish later."""
    pool = config.pool(inst.pool)
    template = pool.template_node(inst.zone, config.region)
    name = f"{inst.pool}-{inst.provider_id.rsplit('/', 1)[-1]}"
    labels = {**template.labels, keys.LABEL_HOSTNAME: name}
    node = Node(name=name, labels=labels, taints=template.taints, allocatable=dict(template.allocatable),
                provider_id=inst.provider_id, pool=inst.pool, created_at=now,
                pods=[Pod(name=f"daemonsets-{name}", namespace="kube-system", requests=dict(p.requests),
                          owner_kind="DaemonSet", phase="Running", node_name=name) for p in template.pods])
    later: list[tuple[str, int]] = []
    if gpus_later:
        for resource, count in sorted(node.allocatable.items()):
            if count and is_gpu_device(resource):
                node.allocatable[resource] = 0
                later.append((resource, count))
    node.capacity = {k: v for k, v in node.allocatable.items() if v and is_gpu_device(k)}  # the device plugin's
    return node, later


@dataclass(slots=True)
class SimKube:
    binder: Binder
    pdbs: Callable[[], list[PodDisruptionBudget]]  # the budgets with their current disruptionsAllowed
    pod: Callable[[str], Pod | None]  # a bound pod by namespace/name
    deleted: Callable[[Pod], None]  # an evicted pod: its controller recreates it
    node_deleted: Callable[[str], None]  # a Node object deleted: its pods are lost with it
    # a ProvisioningRequest's new conditions (the API server stores them; Kueue acts on them)
    conditions: Callable[[ProvisioningRequest, dict[str, Condition]], None]
    refused: int = 0  # evictions answered 429
    events: dict[str, int] = field(default_factory=dict)  # reason -> count
    status: dict[str, Any] = field(default_factory=dict)

    def cordon_node(self, name: str) -> bool:
        node = self.binder.nodes.get(name)
        if node is None:
            return False
        if _DRAIN_TAINT not in node.taints:
            node.taints = (*node.taints, _DRAIN_TAINT)
        self.binder.cordon(name)
        return True

    def uncordon_node(self, name: str) -> bool:
        node = self.binder.nodes.get(name)
        if node is None or _DRAIN_TAINT not in node.taints:
            return False
        node.taints = tuple(t for t in node.taints if t != _DRAIN_TAINT)
        self.binder.cordon(name, False)
        return True

    def evict(self, namespace: str, name: str) -> EvictResult:
        pod = self.pod(f"{namespace}/{name}")
        if pod is None or pod.node_name is None:
            return "gone"
        ready = not pod.unhealthy_devices  # a container on a broken device crash-loops: never Ready
        for pdb in self.pdbs():
            if pdb.namespace == namespace and all(pod.labels.get(k) == v for k, v in pdb.selector.items()) \
                    and pdb.disruptions_allowed < 1 and (ready or not pdb.always_allow_unhealthy):
                self.refused += 1
                return "blocked"
        self.deleted(pod)
        return "evicted"

    def delete_pod(self, namespace: str, name: str) -> EvictResult:
        pod = self.pod(f"{namespace}/{name}")
        if pod is None or pod.node_name is None:
            return "gone"
        self.deleted(pod)
        return "evicted"

    def delete_node(self, name: str) -> None:
        if name in self.binder.nodes:
            self.node_deleted(name)

    def event(self, ref: ObjectRef, reason: str, message: str, type_: str = "Normal") -> None:
        self.events[reason] = self.events.get(reason, 0) + 1

    def write_conditions(self, request: ProvisioningRequest, conditions: dict[str, Condition]) -> None:
        self.conditions(request, conditions)

    def write_buffer_status(self, buffer: CapacityBuffer, status: BufferStatus) -> None:
        buffer.status = status  # the simulator's buffers live in memory: the next pass reads this

    def write_status(self, status: dict[str, Any]) -> None:
        self.status = status
