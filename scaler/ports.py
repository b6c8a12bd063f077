"""The interfaces a pass uses, owned here by their user and implemented by the adapters.

- `Observer`: what the pass reads from the cluster. `scaler.kube.cache.ClusterCache` on a live cluster
  (the watch-fed cache), `scaler.sim.engine.Engine` in the simulator.
- `Kube`: what the actuator (`scaler.actuator`) and the loop's Events and status change in the cluster.
  `scaler.kube.actions.KubeActions` on a live cluster, `scaler.sim.kubeapi.SimKube` in the simulator.
- `PoolProvider`: the cloud side, one per cloud (`scaler.providers`: aws, azure, sim); its typed errors are
  `scaler.providers.base`'s.
- `Acting`: what a pass acts through (`scaler.actuator.Actuator`, or the dry run's `Recorder`).
- `LiveCluster`: the Observer of a live cluster, with its watches' health (`scaler.loop.Runtime` reads it).
- `Planner`: the core's entry's signature (`scaler.core.planning.decide.decide`).

Nothing here imports an SDK: the simulator and `plan` run on these types without `kubernetes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from scaler.core.config.settings import ScalerConfig
from scaler.core.model.buffers import BufferStatus, CapacityBuffer
from scaler.core.model.conditions import Condition
from scaler.core.model.dra import DraObjects
from scaler.core.model.interruption import Interruption
from scaler.core.model.objects import Node, Pod, PodDisruptionBudget
from scaler.core.model.podgroup import PodGroup
from scaler.core.model.provreq import ProvisioningRequest
from scaler.core.model.storage import Storage
from scaler.core.planning.decisions import BufferOutcome, Plan
from scaler.core.planning.memo import Memo
from scaler.core.planning.snapshot import Acted, PoolObservation, Snapshot
from scaler.core.planning.state import State

EvictResult = Literal["evicted", "blocked", "gone"]


class KubeError(Exception):
    """A Kubernetes call that failed for a reason other than the ones the caller handles."""


class LostLease(Exception):
    """The lease ran out during a pass: another replica may be acting now, so this one stops."""


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str  # Pod, Node, Lease; or any object a pass left out (a Warning Event on it)
    name: str
    namespace: str = ""
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Skipped:
    """An object left out of a pass because it does not convert (its kind, where it is, and why)."""

    kind: str
    namespace: str
    name: str
    uid: str
    message: str


@dataclass(slots=True)
class ClusterView:
    """The cluster side of a Snapshot, as one observation."""

    pending: list[Pod]  # PodScheduled=False, reason Unschedulable
    nodes: list[Node]  # with the pods bound to them
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    fresh: bool = True  # pods and nodes are synced
    pdbs_fresh: bool = True  # the PodDisruptionBudgets are synced
    storage: Storage = field(default_factory=Storage)
    namespaces: dict[str, dict[str, str]] | None = None
    stale: list[str] = field(default_factory=list)  # the watches that are not synced
    skipped: list[Skipped] = field(default_factory=list)  # objects that did not convert
    dra: DraObjects = field(default_factory=DraObjects)  # DeviceClasses, ResourceClaims (+Templates), ResourceSlices
    buffers: list[CapacityBuffer] = field(default_factory=list)  # CapacityBuffers, their references resolved
    pod_groups: dict[str, PodGroup] = field(default_factory=dict)  # gangs' PodGroups, by PodGroup.key


class Observer(Protocol):
    """What a pass reads from the cluster."""

    def observe(self, pool_of: Callable[[str], str | None]) -> ClusterView:
        """Pending pods, nodes with their pods, PodDisruptionBudgets, storage and namespaces; a node's pool
        is `pool_of(providerID)` where the provider knows it."""
        ...

    def provisioning_requests(self) -> list[ProvisioningRequest]:
        """The ProvisioningRequests still in play; raises KubeError when they cannot be read."""
        ...


class Kube(Protocol):
    """What the actuator and the loop change in the cluster."""

    def cordon_node(self, name: str) -> bool:
        """Mark the node unschedulable with the drain taint; False if there is no such node."""
        ...

    def uncordon_node(self, name: str) -> bool:
        """Undo our cordon only; False if the node is gone or was not cordoned by us."""
        ...

    def evict(self, namespace: str, name: str) -> EvictResult:
        """policy/v1 Eviction: "blocked" when a PodDisruptionBudget refuses it (429)."""
        ...

    def delete_pod(self, namespace: str, name: str) -> EvictResult:
        """Delete a pod with its grace period, whatever its PodDisruptionBudget ("evicted", or "gone")."""
        ...

    def delete_node(self, name: str) -> None:
        """Delete a Node object (one whose instance is long gone)."""
        ...

    def event(self, ref: ObjectRef, reason: str, message: str, type_: str = "Normal") -> None: ...

    def write_conditions(self, request: ProvisioningRequest, conditions: dict[str, Condition]) -> None:
        """Set a ProvisioningRequest's status conditions."""
        ...

    def write_buffer_status(self, buffer: CapacityBuffer, status: BufferStatus) -> None:
        """Set a CapacityBuffer's status (the status subresource)."""
        ...

    def write_status(self, status: dict[str, Any]) -> None:
        """The scaler's status (a ConfigMap on a live cluster)."""
        ...


class LiveCluster(Observer, Protocol):
    """The pass's Observer, with the watches' health (`scaler.kube.cache.ClusterCache`)."""

    @property
    def fresh(self) -> bool:
        """Pods and nodes are synced."""
        ...

    def skipped_requests(self) -> list[Skipped]:
        """The ProvisioningRequests the last read left out because they do not convert."""
        ...


class Acting(Protocol):
    """What a pass acts through: the `Actuator`, or the dry run's `Recorder`."""

    live: bool  # changes the cloud and the cluster (a dry run reads no interruption notices either)

    @property
    def drains(self) -> Mapping[str, object]:
        """The drains in progress after its last pass, by node (the State's, as that pass left them)."""
        ...

    def report(self) -> Acted:
        """What it did since the last decision, for the next Snapshot."""
        ...

    def forget(self) -> None: ...

    def act(self, plan: Plan, snapshot: Snapshot) -> None: ...

    def answer(self, requests: list[ProvisioningRequest], answers: dict[str, dict[str, Condition]]) -> None: ...

    def write_buffers(self, buffers: list[CapacityBuffer], outcomes: dict[str, BufferOutcome]) -> None: ...


class PoolProvider(Protocol):
    """A cloud's node groups. Implementations: `aws`, `azure`, `sim`; `tests/integration/
    test_provider_conformance.py` runs the same cases against all three."""

    name: str

    def observe(self, now: float) -> dict[str, PoolObservation]:
        """The pools this provider manages (the configured ones plus, if enabled, discovered ones): desired
        size, instances (with zone and launch time) and launch failures since the last call."""
        ...

    def set_desired(self, pool: str, desired: int) -> None:
        """Set the target size. Raises InvalidRequest beyond the pool's max or below its min."""
        ...

    def delete_node(self, pool: str, provider_id: str) -> None:
        """Terminate exactly this instance and decrement the target size by one; NotFound if it is not
        an instance of the pool."""
        ...

    def pool_of(self, provider_id: str) -> str | None:
        """Which managed pool an instance (Kubernetes providerID) belongs to, if any."""
        ...

    def interruptions(self) -> list[Interruption]:
        """Notices that instances will go, not acknowledged yet (possibly seen before)."""
        ...

    def acknowledge(self, notices: Iterable[Interruption]) -> None:
        """The notices were handled: do not hand them out again."""
        ...


# scaler.core.planning.decide.decide
Planner = Callable[[Snapshot, State, ScalerConfig, Memo | None], tuple[Plan, State]]
