"""CapacityBuffers (autoscaling.x-k8s.io/v1beta1) as the adapter reads them, with what their references
resolved to; how the planner serves them is scaler.core.planning.buffers. Plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaler.core.model import keys
from scaler.core.model.conditions import Condition
from scaler.core.model.objects import Pod
from scaler.core.model.resources import Resources

SCALABLE_KINDS = ("Deployment", "ReplicaSet", "StatefulSet")  # apps/v1, what the adapter reads


@dataclass(frozen=True, slots=True)
class ScalableRef:
    kind: str
    name: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class BufferStatus:
    replicas: int | None
    template_ref: str | None
    template_generation: int | None
    strategy: str
    conditions: Mapping[str, Condition]


@dataclass(slots=True)
class CapacityBuffer:
    """A buffer as the adapter read it, with what its references resolved to."""

    namespace: str
    name: str
    uid: str = ""
    template_ref: str | None = None  # spec.podTemplateRef.name
    scalable: ScalableRef | None = None  # spec.scalableRef
    replicas: int | None = None
    percentage: int | None = None
    limits: Resources | None = None
    strategy: str = keys.BUFFER_STRATEGY_ACTIVE
    template: Pod | None = None  # the PodTemplate's (or the scalable object's) pod; None: not found
    template_generation: int | None = None
    scalable_replicas: int | None = None  # the scalable object's spec.replicas
    problem: str = ""  # what the reader could not resolve (a missing PodTemplate, a kind it does not read)
    status: BufferStatus | None = None  # as read, so only a change is written

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def served(self) -> bool:
        return self.strategy == keys.BUFFER_STRATEGY_ACTIVE
