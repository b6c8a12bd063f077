"""Plain data the core reasons about: pods, nodes, taints, tolerations, affinity.

Built by the adapters (kube JSON, sim) and by the pool model's templates; never mutated by the
planners (they copy what they change). Kept as slotted dataclasses: the planner touches 10,000s
of them per pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from scaler.core.model.dra import ResourceSlice
from scaler.core.model.resources import Resources
from scaler.core.model.selectors import SelectorRequirement as SelectorRequirement  # noqa: PLC0414 - re-exported:
from scaler.core.model.selectors import SelectorTerm as SelectorTerm  # noqa: PLC0414 - callers take them from here

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TolerationOperator = Literal["Equal", "Exists"]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = "NoSchedule"

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty key with Exists tolerates everything
    operator: TolerationOperator = "Equal"
    value: str = ""
    effect: str = ""  # empty matches every effect


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: SelectorTerm


@dataclass(slots=True)
class Pod:
    name: str
    namespace: str = "default"
    uid: str = ""
    requests: Resources = field(default_factory=dict)  # effective request, see predicates
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    required_affinity: tuple[SelectorTerm, ...] = ()  # requiredDuringScheduling..., OR of terms
    preferred_affinity: tuple[PreferredTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    node_name: str | None = None
    owner_kind: str | None = None  # kind of the controller ownerReference, None when bare
    priority: int = 0
    scheduler_name: str = "default-scheduler"
    phase: str = "Pending"
    created_at: float = 0.0  # seconds since the epoch; with priority, the scheduler's queue order
    started_at: float | None = None  # status.startTime: when the kubelet started it on its node
    # --- what kube-scheduler's other filters read (scaler.core.scheduling.filters) ---
    spread: tuple[SpreadConstraint, ...] = ()  # topologySpreadConstraints with DoNotSchedule
    pod_affinity: tuple[PodAffinityTerm, ...] = ()  # podAffinity required...DuringExecution
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()  # podAntiAffinity required...DuringExecution
    host_ports: tuple[HostPort, ...] = ()  # containers' (and sidecars') ports with a hostPort
    claims: tuple[ClaimRef, ...] = ()  # PersistentVolumeClaims of its volumes (generic ephemeral too)
    terminating: bool = False  # metadata.deletionTimestamp set: topology spread does not count it
    resource_claims: tuple[PodResourceClaim, ...] = ()  # spec.resourceClaims (DRA)
    scheduling_group: str | None = None  # spec.schedulingGroup.podGroupName: its Workload API PodGroup
    # Its allocated devices the kubelet reports Unhealthy (containerStatuses[].allocatedResourcesStatus, KEP-4680):
    # a container on a broken GPU cannot run, and one that restarts in place keeps that GPU.
    unhealthy_devices: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class NodeCondition:
    """One of status.conditions: Ready, or a health condition node-problem-detector or a GPU health check sets."""

    type: str
    status: str  # "True", "False" or "Unknown"
    since: float = 0.0  # lastTransitionTime, epoch seconds; 0 when not given
    reason: str = ""


@dataclass(slots=True)
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True
    provider_id: str = ""
    pool: str | None = None
    created_at: float = 0.0
    pods: list[Pod] = field(default_factory=list)
    is_template: bool = False  # a node the planner imagines, not one that exists
    # A template of a DRA pool: the ResourceSlices its driver would publish (real nodes' slices are
    # the snapshot's, scaler.core.planning.snapshot.Snapshot.dra).
    slices: tuple[ResourceSlice, ...] = ()
    # GPU health signals (scaler.core.planning.repair): status.capacity (empty: not given) and status.conditions.
    capacity: Resources = field(default_factory=dict)
    conditions: tuple[NodeCondition, ...] = ()
    # 0: unknown. Else the observer's word that every node of this name and version is equal to this one, its
    # pods included (the watch cache gives a new one on any change to the node, its pods or its pool): what
    # the planner's memo may key per-node answers on. A copy whose fields or pods change gets version 0.
    version: int = 0


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    name: str
    namespace: str
    selector: dict[str, str]  # matchLabels
    disruptions_allowed: int
    # spec.unhealthyPodEvictionPolicy AlwaysAllow: a pod that is not Ready may be evicted whatever the budget says
    # (the default, IfHealthyBudget, lets it go only while the budget is met).
    always_allow_unhealthy: bool = False


# --- pod-to-pod and volume scheduling (kube-scheduler's filters beyond the static four) ----------
@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: matchLabels as `In [value]` requirements, then matchExpressions.

    No requirement matches every label set; a null selector (None where one is optional) matches
    nothing, as in the API.
    """

    requirements: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A hard topology spread constraint; `matchLabelKeys` are already merged into `selector`."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: Literal["Honor", "Ignore"] = "Honor"
    node_taints_policy: Literal["Honor", "Ignore"] = "Ignore"


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term; `matchLabelKeys` / `mismatchLabelKeys` merged into
    `selector`; `namespaces` is the pod's own namespace when the API gave neither namespaces nor a
    namespaceSelector."""

    selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"  # noqa: S104 -- the API's default hostIP: every address


@dataclass(frozen=True, slots=True)
class ClaimRef:
    name: str  # the PVC's name in the pod's namespace
    ephemeral: bool = False  # a generic ephemeral volume: the PVC is made by its controller


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One of spec.resourceClaims: a ResourceClaim by name, or one made from a template for the pod
    (`generated`: its name, from status.resourceClaimStatuses, once made). Every container's
    resources.claims names one of these; kube-scheduler allocates them all, so the planner does."""

    name: str
    claim_name: str = ""
    template_name: str = ""
    generated: str = ""


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    name: str
    namespace: str
    volume_name: str = ""  # spec.volumeName: bound (or pre-bound) to this PV
    storage_class: str = ""
    access_modes: tuple[str, ...] = ()
    request: int = 0  # bytes of storage asked for
    phase: str = "Pending"
    bind_completed: bool = False  # pv.kubernetes.io/bind-completed: the binding is final
    selected_node: str = ""  # volume.kubernetes.io/selected-node: provisioning for that node
    terminating: bool = False
    owner_uid: str = ""  # the controller owner's uid (a generic ephemeral volume's pod)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        return bool(self.volume_name) and (self.bind_completed or self.phase == "Bound")


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    node_affinity: tuple[SelectorTerm, ...] = ()  # spec.nodeAffinity.required, OR of terms
    storage_class: str = ""
    capacity: int = 0  # bytes
    access_modes: tuple[str, ...] = ()
    claim: str = ""  # namespace/name of spec.claimRef, "" when free
    phase: str = "Available"
    driver: str = ""  # CSI driver (in-tree EBS / Azure Disk given as their CSI drivers), "" for others
    handle: str = ""  # the volume's id at its driver: volumes with the same handle attach once


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"
    allowed_topologies: tuple[SelectorTerm, ...] = ()  # OR of terms; empty: anywhere


@dataclass(frozen=True, slots=True)
class CSINode:
    """A node's CSI drivers with the volumes each can attach (spec.drivers[].allocatable.count)."""

    name: str
    limits: dict[str, int] = field(default_factory=dict)
