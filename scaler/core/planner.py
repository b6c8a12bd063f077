"""One pass of decisions: Snapshot + State + config -> Plan + next State. Pure.

Implemented in scaleup.py / scaledown.py; this module is the entry point the loop and the
simulator call, so its signature is the contract between them.
"""

from __future__ import annotations

from scaler.core.config import ScalerConfig
from scaler.core.snapshot import Plan, Snapshot, State


def plan(snapshot: Snapshot, state: State, config: ScalerConfig) -> tuple[Plan, State]:
    """Decide scale-ups, size resets and scale-downs for one pass."""
    raise NotImplementedError("the planners land with the scaler core issue")
