"""What outlives one pass: in-flight requests, backoff, unavailable offerings, the drains in progress and the
nodes removed and waiting to leave, held drains, bookings, the interruption notices not decided on yet. Written by
the decision only (`decide` returns the next State; the input is not changed; what the actuator did reaches it
through the next Snapshot's `Acted`); re-derivable from the cloud and the cluster after a restart (`advance`
folds each Snapshot in; a node left cordoned by a drain this State does not hold is given back).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from scaler.core.model.drain import DrainState
from scaler.core.model.interruption import Interruption


def fmt_time(t: float) -> str:
    """Epoch seconds as UTC ISO time; small values (simulated seconds) as "<n>s"."""
    if t >= 1e9:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{t:.0f}s"


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


@dataclass(frozen=True, slots=True)
class IdleHistory:
    """A pool's recent idle periods (scaler.core.planning.idle_time): how long after a node became unneeded its
    capacity was needed again (inf: not within the maximum unneeded time), and the unneeded-since of removed
    nodes no scale-up of the pool has asked back yet."""

    gaps: tuple[float, ...] = ()
    removed: tuple[float, ...] = ()
    seen: float = 0.0  # pods created before this were already looked at for the removals (taken_elsewhere)


@dataclass(slots=True)
class State:
    """Re-derivable from the cloud after a restart; the loop keeps it in memory only."""

    in_flight: dict[str, list[InFlight]] = field(default_factory=dict)
    backoff: dict[str, Backoff] = field(default_factory=dict)
    unavailable: dict[tuple[str, str], float] = field(default_factory=dict)  # (pool, zone) -> until
    unneeded_since: dict[str, float] = field(default_factory=dict)  # node name -> first seen unneeded
    unneeded_until: dict[str, float] = field(default_factory=dict)  # node name -> when it may be removed
    unneeded_time: dict[str, float] = field(default_factory=dict)  # pool -> this pass's unneeded time
    # pool -> its recent idle periods. Lost on a restart (the loop keeps the State in memory): the unneeded
    # time then starts again from the pool's re-buy cost.
    idle: dict[str, IdleHistory] = field(default_factory=dict)
    gone_since: dict[str, float] = field(default_factory=dict)  # node -> first seen without its instance
    held: dict[str, Held] = field(default_factory=dict)
    refused: dict[str, tuple[float, str]] = field(default_factory=dict)  # pool -> (until, the cloud's error)
    # ProvisioningRequest -> the nodes its booking holds (scaler.core.planning.provreq; after a restart, those it finds)
    booked: dict[str, frozenset[str]] = field(default_factory=dict)
    # node -> first pass that saw a health signal on it (scaler.core.planning.repair); pools whose repairs wait
    unhealthy_since: dict[str, float] = field(default_factory=dict)
    repair_paused: frozenset[str] = frozenset()
    # The clouds' interruption notices read and not acted on to the end yet: a pass decides on all it holds, and
    # forgets those the next Snapshot says were acknowledged; a pass that stopped before decides on them again.
    notices: list[Interruption] = field(default_factory=list)
    # node -> the drain in progress on it (scaler.core.planning.drains: begun, carried on and ended by the actuator,
    # as its report in the next Snapshot says). Empty after a restart: the cordoned nodes are drained again if
    # still removable, or given back.
    drains: dict[str, DrainState] = field(default_factory=dict)
    removed: dict[str, float] = field(default_factory=dict)  # node -> when its instance was removed, until it leaves
