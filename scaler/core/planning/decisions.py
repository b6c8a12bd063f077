"""What one pass decides: the Plan (scale-ups, size resets, drains, Events, per-pod verdicts) that the
actuator (`scaler.actuator`) carries out. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from scaler.core.model.buffers import BufferStatus
from scaler.core.model.conditions import Condition
from scaler.core.model.drain import DrainState
from scaler.core.model.interruption import Interruption

Outcome = Literal["fits-existing", "fits-in-flight", "scale-up", "unschedulable", "waiting"]


@dataclass(slots=True)
class PodVerdict:
    pod: str  # namespace/name
    outcome: Outcome
    pool: str | None = None  # where it lands / will land
    node: str | None = None  # existing node it fits on
    reasons: dict[str, str] = field(default_factory=dict)  # pool -> why not there


@dataclass(slots=True)
class BufferOutcome:
    """A buffer after a pass: its status to write, and where each placeholder sits."""

    status: BufferStatus
    error: str = ""
    placed: dict[str, PodVerdict] = field(default_factory=dict)  # placeholder name -> its verdict

    def where(self) -> dict[str, str]:
        """Placeholder -> where it sits, in words (explain)."""
        out = {}
        for name, v in sorted(self.placed.items()):
            if v.outcome == "fits-existing":
                out[name] = f"node {v.node}"
            elif v.outcome == "fits-in-flight":
                out[name] = f"a {v.pool} node coming up"
            elif v.outcome == "scale-up":
                out[name] = f"a new {v.pool} node (scale-up)"
            else:
                why = "; ".join(f"{p}: {r}" for p, r in sorted(v.reasons.items())) or "no pool fits"
                out[name] = f"no room ({v.outcome}): {why}"
        return out


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
    kind: str = ""  # the interruption metric's kind when not the notice's (capacity-block-end)
    # Pods deleted (grace period honoured) rather than evicted: a gang's on an ending Capacity Block, whose
    # budget allows no eviction while EC2 takes the whole gang at the block's end anyway.
    delete: tuple[str, ...] = ()
    repair: bool = False  # a broken GPU node's (scaler.core.planning.repair): stopped if it recovers


@dataclass(frozen=True, slots=True)
class Repair:
    """A node found unhealthy past its grace: why, since when, and whether its drain starts now."""

    node: str
    pool: str
    signal: str  # e.g. "lost 1 of 8 GPU devices", "condition GpuXidError=True", "NotReady"
    since: float
    started: bool  # False: in repair already, or waiting for the budget


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """A Kubernetes Event the plan wants on a node (e.g. an interruption notice it decided to ignore)."""

    node: str
    reason: str
    message: str
    warning: bool = False


@dataclass(frozen=True, slots=True)
class WarmStanding:
    """A pool's warm pool as the pass saw it: instances ready to start, how soon one is Ready, what it costs idle."""

    size: int
    ready: int
    state: str  # stopped | running
    ready_in: float  # seconds from the scale-up to a Ready node
    usd_per_hour: float  # standing cost: root volumes while stopped, full price while running


@dataclass(slots=True)
class Plan:
    now: float
    scale_ups: list[ScaleUp] = field(default_factory=list)  # replacements for interrupted nodes included
    resets: list[SetSize] = field(default_factory=list)
    scale_downs: list[ScaleDown] = field(default_factory=list)  # drains to begin, for interruptions first
    draining: dict[str, DrainState] = field(default_factory=dict)  # the drains in progress to carry on (the State's)
    release: list[str] = field(default_factory=list)  # nodes cordoned by a drain no one carries on: give them back
    verdicts: dict[str, PodVerdict] = field(default_factory=dict)
    unneeded: dict[str, float] = field(default_factory=dict)
    handled: list[Interruption] = field(default_factory=list)  # notices decided on: acknowledge once acted
    events: list[NodeEvent] = field(default_factory=list)
    delete_nodes: list[str] = field(default_factory=list)  # Node objects whose instance is long gone
    refused: dict[str, str] = field(default_factory=dict)  # pools newly stopped by a cloud refusal
    in_flight: dict[str, int] = field(default_factory=dict)  # pool -> nodes asked for, not registered yet
    notes: list[str] = field(default_factory=list)
    quotas: dict[str, str] = field(default_factory=dict)  # a cloud quota that stopped a pool -> why
    repairs: list[Repair] = field(default_factory=list)  # unhealthy nodes past their grace
    unhealthy: dict[str, int] = field(default_factory=dict)  # pool -> nodes with a health signal now
    repair_paused: dict[str, str] = field(default_factory=dict)  # pool -> why its repairs wait (the budget)
    recovered: list[str] = field(default_factory=list)  # repair drains to stop: the node is healthy again
    buffers: dict[str, BufferOutcome] = field(default_factory=dict)  # CapacityBuffer -> status, placeholders
    requests: dict[str, dict[str, Condition]] = field(default_factory=dict)  # ProvisioningRequest -> its conditions
    warm: dict[str, WarmStanding] = field(default_factory=dict)  # pool -> its warm pool (scaler.core.config.warm)

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
        if self.repairs or self.repair_paused:
            out["repairs"] = [{"node": r.node, "pool": r.pool, "signal": r.signal, "since": r.since,
                               "started": r.started} for r in self.repairs]
            out["repair_paused"] = dict(self.repair_paused)
        if self.buffers:  # where each placeholder sits with `pods` only: the status ConfigMap stays small
            out["buffers"] = {k: {"replicas": b.status.replicas, "error": b.error,
                                  **({"placeholders": b.where()} if pods else {})}
                              for k, b in sorted(self.buffers.items())}
        if self.warm:
            out["warm"] = {p: {"size": w.size, "ready": w.ready, "state": w.state, "ready_in_s": w.ready_in,
                               "standing_usd_per_hour": round(w.usd_per_hour, 4)} for p, w in sorted(self.warm.items())}
        if pods:
            out["pods"] = {k: {"outcome": v.outcome, "pool": v.pool, "node": v.node, "reasons": v.reasons}
                           for k, v in sorted(self.verdicts.items())}
        return out
