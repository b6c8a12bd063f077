"""A drain in progress, as the State keeps it (`scaler.core.planning.state.State.drains`). Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DrainState:
    """A drain the actuator has begun (the node is cordoned, its pods are being evicted): everything it needs to
    carry it on in a later pass, or in a new process that has the State."""

    node: str
    pool: str
    started: float
    deadline: float  # given up then (forced: the node removed anyway)
    forced: bool = False  # the cloud takes the node at the deadline anyway (a spot interruption)
    notice: bool = False  # started for an interruption notice: its pods need a new home
    repair: bool = False  # started to repair a broken GPU node: its pods need a new home
    provider_id: str = ""  # exactly the instance removed once the node is empty
    reason: str = ""
    evict: frozenset[str] = frozenset()  # the pods the plan proved evictable (namespace/name)
    delete: frozenset[str] = frozenset()  # the pods deleted rather than evicted (a gang on an ending block)
    blocked: frozenset[str] = frozenset()  # the pods whose eviction a budget refused at the last try
