"""ProvisioningRequests (autoscaling.x-k8s.io/v1) as the adapter reads them: the pod sets a request asks room
for and its conditions; how the planner answers them is scaler.core.planning.provreq. Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.core.model.conditions import Condition
from scaler.core.model.objects import Pod

ACCEPTED, PROVISIONED, FAILED = "Accepted", "Provisioned", "Failed"
BOOKING_EXPIRED, CAPACITY_REVOKED = "BookingExpired", "CapacityRevoked"


@dataclass(frozen=True, slots=True)
class PodSet:
    template: Pod  # the PodTemplate's pod, as the planner reads pods
    count: int


@dataclass(slots=True)
class ProvisioningRequest:
    namespace: str
    name: str
    class_name: str
    pod_sets: list[PodSet]
    parameters: dict[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    conditions: dict[str, Condition] = field(default_factory=dict)
    problem: str = ""  # set by the reader when the request cannot be read (a missing PodTemplate)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def total(self) -> int:
        return sum(s.count for s in self.pod_sets)

    def true(self, kind: str) -> bool:
        cond = self.conditions.get(kind)
        return cond is not None and cond.status == "True"

    @property
    def done(self) -> bool:
        """Nothing more will happen to it: failed, or its booking is over."""
        return self.true(FAILED) or self.true(BOOKING_EXPIRED) or self.true(CAPACITY_REVOKED)
