"""A drain in progress as the actuator reports it to the next pass. Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DrainState:
    """A drain the actuator has in progress (the node is cordoned, its pods are being evicted)."""

    node: str
    pool: str
    started: float
    deadline: float
    forced: bool = False  # the cloud takes the node at the deadline anyway (a spot interruption)
    notice: bool = False  # started for an interruption notice: its pods need a new home
    repair: bool = False  # started to repair a broken GPU node: its pods need a new home
