"""What one pass observes (Snapshot), what it decides (Plan), and what outlives a pass (State).

The contract between the pure core and the adapters: adapters build a Snapshot (the cluster, the
pools with their instances, the clouds' interruption notices, the drains in progress), `plan()`
returns a Plan and the next State, and the actuator (`scaler.actuator`) carries the Plan out through
a PoolProvider and the Kubernetes side. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from scaler.core.filters import Storage
from scaler.core.model import Node, Pod, PodDisruptionBudget
from scaler.core.pool import Pool

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


@dataclass(slots=True)
class PoolObservation:
    """A pool as its provider sees it right now."""

    pool: Pool
    desired: int  # the cloud's target size (ASG DesiredCapacity, agent pool count)
    instances: int  # instances that exist (booting or running), registered or not
    failures: list[LaunchFailure] = field(default_factory=list)  # new since the last pass
    members: list[CloudInstance] = field(default_factory=list)  # the `instances` themselves


NoticeKind = Literal["spot-interruption", "rebalance", "terminating"]


@dataclass(frozen=True, slots=True)
class Interruption:
    """A cloud's notice that an instance will go, the same type for every cloud.

    spot-interruption: reclaimed at `deadline` (AWS: the two-minute warning; Azure: an evicted Spot VM);
    rebalance: at elevated risk of a reclaim (a recommendation); terminating: already stopping."""

    kind: NoticeKind
    instance: str  # the instance's providerID, or the id that ends it (an AWS instance id)
    at: float
    deadline: float
    handle: str = field(default="", compare=False)  # the provider's own reference, for acknowledge()


@dataclass(frozen=True, slots=True)
class DrainState:
    """A drain the actuator has in progress (the node is cordoned, its pods are being evicted)."""

    node: str
    pool: str
    started: float
    deadline: float
    forced: bool = False  # the cloud takes the node at the deadline anyway (a spot interruption)
    notice: bool = False  # started for an interruption notice: its pods need a new home


@dataclass(slots=True)
class Snapshot:
    now: float
    pending: list[Pod]  # PodScheduled=False, reason Unschedulable
    nodes: list[Node]  # with the pods bound to them
    pools: dict[str, PoolObservation]
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    fresh: bool = True  # False when pods or nodes could not be refreshed: nothing removed then
    pdbs_fresh: bool = True  # False when the PodDisruptionBudget watch fails: no drain then
    interruptions: list[Interruption] = field(default_factory=list)  # notices not handled yet
    draining: dict[str, DrainState] = field(default_factory=dict)  # node name -> drain in progress
    # What the actuator met in the last pass: drains given up because evictions were refused (node ->
    # the refused pods), and cloud refusals that cannot succeed on retry (pool -> the error).
    abandoned: dict[str, tuple[str, ...]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    # What kube-scheduler's volume and namespaceSelector filters read (scaler.core.filters): claims,
    # volumes, classes, CSINodes; namespace -> labels (None: only the name label is known).
    storage: Storage = field(default_factory=Storage)
    namespaces: dict[str, dict[str, str]] | None = None


# --- state that outlives one pass -----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class InFlight:
    pool: str
    count: int
    requested_at: float
    deadline: float
    zone: str | None = None  # the zone asked for (a multi-zone pool's booting nodes); None: unknown


@dataclass(frozen=True, slots=True)
class Backoff:
    until: float
    failures: int


@dataclass(frozen=True, slots=True)
class Held:
    """A node whose drain was given up because PodDisruptionBudgets refused it: not drained again
    before `until`, unless one of those budgets allows more disruptions than it did then."""

    until: float
    allowed: tuple[tuple[str, int], ...]  # (namespace/name of a budget, its disruptionsAllowed then)


@dataclass(slots=True)
class State:
    """Re-derivable from the cloud after a restart; the loop keeps it in memory only."""

    in_flight: dict[str, list[InFlight]] = field(default_factory=dict)
    backoff: dict[str, Backoff] = field(default_factory=dict)
    unavailable: dict[tuple[str, str], float] = field(default_factory=dict)  # (pool, zone) -> until
    unneeded_since: dict[str, float] = field(default_factory=dict)  # node name -> first seen unneeded
    gone_since: dict[str, float] = field(default_factory=dict)  # node -> first seen without its instance
    held: dict[str, Held] = field(default_factory=dict)
    refused: dict[str, tuple[float, str]] = field(default_factory=dict)  # pool -> (until, the cloud's error)
    # ProvisioningRequest -> the nodes its booking holds (scaler.core.provreq; after a restart, those it finds)
    booked: dict[str, frozenset[str]] = field(default_factory=dict)


# --- the plan ------------------------------------------------------------------------------------
Outcome = Literal["fits-existing", "fits-in-flight", "scale-up", "unschedulable", "waiting"]


@dataclass(slots=True)
class PodVerdict:
    pod: str  # namespace/name
    outcome: Outcome
    pool: str | None = None  # where it lands / will land
    node: str | None = None  # existing node it fits on
    reasons: dict[str, str] = field(default_factory=dict)  # pool -> why not there


@dataclass(frozen=True, slots=True)
class ScaleUp:
    pool: str
    zone: str
    count: int  # nodes to add on top of the current desired size
    new_desired: int
    pods: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetSize:
    """Give the cloud a target back (after a failed or timed-out launch). `strays`: instances that never
    registered as nodes, terminated by id first (the size drops by one each); lowering the size alone
    would leave them running in a group protected from scale-in."""

    pool: str
    desired: int
    reason: str
    strays: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScaleDown:
    """Cordon the node, evict its pods through the Eviction API, then remove exactly its instance."""

    pool: str
    node: str
    provider_id: str
    evict: tuple[str, ...]  # namespace/name of the pods to evict first
    reason: str
    deadline: float | None = None  # give up (or, forced, remove anyway) then; None: the drain timeout
    forced: bool = False  # a spot interruption: the cloud takes the node at the deadline anyway


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """A Kubernetes Event the plan wants on a node (e.g. an interruption notice it decided to ignore)."""

    node: str
    reason: str
    message: str
    warning: bool = False


@dataclass(slots=True)
class Plan:
    now: float
    scale_ups: list[ScaleUp] = field(default_factory=list)  # replacements for interrupted nodes included
    resets: list[SetSize] = field(default_factory=list)
    scale_downs: list[ScaleDown] = field(default_factory=list)  # drains for interruptions first
    verdicts: dict[str, PodVerdict] = field(default_factory=dict)
    unneeded: dict[str, float] = field(default_factory=dict)
    handled: list[Interruption] = field(default_factory=list)  # notices decided on: acknowledge once acted
    events: list[NodeEvent] = field(default_factory=list)
    delete_nodes: list[str] = field(default_factory=list)  # Node objects whose instance is long gone
    refused: dict[str, str] = field(default_factory=dict)  # pools newly stopped by a cloud refusal
    in_flight: dict[str, int] = field(default_factory=dict)  # pool -> nodes asked for, not registered yet
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.scale_ups or self.resets or self.scale_downs)

    def to_dict(self, *, pods: bool = True) -> dict[str, Any]:
        """The decisions as plain data (the status ConfigMap, `explain --json`); `pods`: with the pods each
        scale-up is for and every pending pod's verdict."""
        out: dict[str, Any] = {
            "scale_ups": [{"pool": u.pool, "zone": u.zone, "count": u.count, "new_desired": u.new_desired,
                           **({"pods": list(u.pods)} if pods else {})} for u in self.scale_ups],
            "resets": [{"pool": r.pool, "desired": r.desired, "reason": r.reason, "terminate": list(r.strays)}
                       for r in self.resets],
            "scale_downs": [{"pool": d.pool, "node": d.node, "evict": list(d.evict), "reason": d.reason,
                             "forced": d.forced} for d in self.scale_downs],
            "in_flight": dict(self.in_flight),
            "delete_nodes": list(self.delete_nodes),
            "notes": list(self.notes),
        }
        if pods:
            out["pods"] = {k: {"outcome": v.outcome, "pool": v.pool, "node": v.node, "reasons": v.reasons}
                           for k, v in sorted(self.verdicts.items())}
        return out
