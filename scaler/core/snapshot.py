"""What one pass observes (Snapshot), what it decides (Plan), and what outlives a pass (State).

The contract between the pure core and the adapters: adapters build a Snapshot, the planners
return a Plan and the next State, the loop acts the Plan through a PoolProvider and the kube
adapter. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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


@dataclass(slots=True)
class PoolObservation:
    """A pool as its provider sees it right now."""

    pool: Pool
    desired: int  # the cloud's target size (ASG DesiredCapacity, agent pool count)
    instances: int  # instances that exist (booting or running), registered or not
    failures: list[LaunchFailure] = field(default_factory=list)  # new since the last pass


@dataclass(slots=True)
class Snapshot:
    now: float
    pending: list[Pod]  # PodScheduled=False, reason Unschedulable
    nodes: list[Node]  # with the pods bound to them
    pools: dict[str, PoolObservation]
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    fresh: bool = True  # False when the kube cache could not be refreshed: no scale-down then
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


@dataclass(slots=True)
class State:
    """Re-derivable from the cloud after a restart; the loop keeps it in memory only."""

    in_flight: dict[str, list[InFlight]] = field(default_factory=dict)
    backoff: dict[str, Backoff] = field(default_factory=dict)
    unavailable: dict[tuple[str, str], float] = field(default_factory=dict)  # (pool, zone) -> until
    unneeded_since: dict[str, float] = field(default_factory=dict)  # node name -> first seen unneeded


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
    """Give the cloud a target back (after a failed or timed-out launch)."""

    pool: str
    desired: int
    reason: str


@dataclass(frozen=True, slots=True)
class ScaleDown:
    pool: str
    node: str
    provider_id: str
    evict: tuple[str, ...]  # namespace/name of the pods to evict first
    reason: str


@dataclass(slots=True)
class Plan:
    now: float
    scale_ups: list[ScaleUp] = field(default_factory=list)
    resets: list[SetSize] = field(default_factory=list)
    scale_downs: list[ScaleDown] = field(default_factory=list)
    verdicts: dict[str, PodVerdict] = field(default_factory=dict)
    unneeded: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.scale_ups or self.resets or self.scale_downs)
