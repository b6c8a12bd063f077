"""What one pass observes: the Snapshot an adapter builds (the cluster, the pools with their instances,
the clouds' interruption notices, what the actuator did since the last decision: `Acted`). `planner.plan` reads
it with the `State` (`state`) and returns the `Plan` (`decisions`) the actuator (`scaler.actuator`) carries
out. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from scaler.core.config.pool import Pool
from scaler.core.model.buffers import CapacityBuffer
from scaler.core.model.dra import DraObjects
from scaler.core.model.drain import DrainState
from scaler.core.model.interruption import Interruption
from scaler.core.model.objects import Node, Pod, PodDisruptionBudget
from scaler.core.model.podgroup import PodGroup
from scaler.core.model.provreq import ProvisioningRequest
from scaler.core.model.storage import Storage

FailureKind = Literal["capacity", "price", "quota", "config", "timeout", "other"]


@dataclass(frozen=True, slots=True)
class LaunchFailure:
    """A cloud's refusal to launch, parsed by the provider from its own error shape."""

    zone: str | None  # None: the whole pool
    kind: FailureKind
    reason: str  # the cloud's code, e.g. InsufficientInstanceCapacity, ZonalAllocationFailed
    message: str
    at: float


@dataclass(frozen=True, slots=True)
class CloudInstance:
    """One instance of a pool as the cloud lists it, registered as a node or not."""

    provider_id: str  # as the node's spec.providerID will name it
    zone: str | None = None
    launched_at: float = 0.0  # epoch seconds; 0 when the cloud does not say


@dataclass(frozen=True, slots=True)
class Quota:
    """The cloud quota a pool's new nodes count against, as its provider last read it (every few minutes)."""

    name: str  # as the cloud names it: "Running On-Demand G and VT instances", "standardNCASv3_T4Family"
    headroom: int  # vCPUs the quota still allows beyond the instances that exist (limit - usage)


@dataclass(slots=True)
class PoolObservation:
    """A pool as its provider sees it right now."""

    pool: Pool
    desired: int  # the cloud's target size (ASG DesiredCapacity, agent pool count)
    instances: int  # instances that exist (booting or running), registered or not
    failures: list[LaunchFailure] = field(default_factory=list)  # new since the last pass
    members: list[CloudInstance] = field(default_factory=list)  # the `instances` themselves
    quota: Quota | None = None  # None: not read (or none applies): no cap
    warm: int = 0  # warm-pool instances ready to start (Warmed:Stopped / Warmed:Running): Ready in timings.warm_start


@dataclass(slots=True)
class Acted:
    """What the actuator did since the last decision, as it reports it; the decision folds it into the State
    (`drains.fold`), as it does the cloud's notices. The actuator keeps nothing else across passes."""

    # Drains begun, or whose record changed (the pods a budget refused), by node.
    drains: dict[str, DrainState] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)  # drains over: instance removed, given up, or node gone
    removed: dict[str, float] = field(default_factory=dict)  # node -> when its instance was removed (it leaves later)
    # Drains given up because evictions were refused (node -> the refused pods), and cloud refusals that
    # cannot succeed on retry (pool -> the error).
    abandoned: dict[str, tuple[str, ...]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    acknowledged: list[Interruption] = field(default_factory=list)  # notices the last pass acted on to the end
    forgot: bool = False  # it lost the lease: the drains in progress are dropped (the new leader gives them back)


@dataclass(slots=True)
class Snapshot:
    now: float
    pending: list[Pod]  # PodScheduled=False, reason Unschedulable
    nodes: list[Node]  # with the pods bound to them; read only (the watch cache hands unchanged ones out again)
    pools: dict[str, PoolObservation]
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    fresh: bool = True  # False when pods or nodes could not be refreshed: nothing removed then
    pdbs_fresh: bool = True  # False when the PodDisruptionBudget watch fails: no drain then
    interruptions: list[Interruption] = field(default_factory=list)  # the notices the clouds handed out this pass
    acted: Acted = field(default_factory=Acted)  # what the actuator did since the last decision
    # What kube-scheduler's volume and namespaceSelector filters read (scaler.core.scheduling.filters): claims,
    # volumes, classes, CSINodes; namespace -> labels (None: only the name label is known).
    storage: Storage = field(default_factory=Storage)
    namespaces: dict[str, dict[str, str]] | None = None
    # What kube-scheduler's DynamicResources filter reads: DeviceClasses, ResourceClaims (+Templates), ResourceSlices.
    dra: DraObjects = field(default_factory=DraObjects)
    # CapacityBuffers (scaler.core.planning.buffers): room `plan` keeps ready as placeholder pods.
    buffers: list[CapacityBuffer] = field(default_factory=list)
    # ProvisioningRequests still in play (scaler.core.planning.provreq): their pods are planned with the others.
    requests: list[ProvisioningRequest] = field(default_factory=list)
    # The gangs' own objects (scaler.core.model.podgroup), by PodGroup.key: Workload API, coscheduling, Volcano.
    pod_groups: dict[str, PodGroup] = field(default_factory=dict)
