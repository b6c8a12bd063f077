"""Status conditions of the API objects the scaler answers (a ProvisioningRequest, a CapacityBuffer), as
read and as written back. Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Condition:
    """A status condition of an API object the scaler answers (a ProvisioningRequest, a CapacityBuffer)."""

    type: str
    status: str  # "True" | "False"
    reason: str
    message: str
    at: float  # lastTransitionTime, seconds since the epoch


def set_condition(conds: dict[str, Condition], kind: str, status: str, reason: str, message: str,
                  now: float) -> None:
    """Set a condition; its transition time moves only when its status does."""
    old = conds.get(kind)
    at = old.at if old is not None and old.status == status else now
    conds[kind] = Condition(kind, status, reason, message, at)
