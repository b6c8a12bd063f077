"""Plain data the core reasons about: pods, nodes, taints, tolerations, affinity.

Built by the adapters (kube JSON, sim) and by the pool model's templates; never mutated by the
planners (they copy what they change). Kept as slotted dataclasses: the planner touches 10,000s
of them per pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from scaler.core.resources import Resources

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TolerationOperator = Literal["Equal", "Exists"]
SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = "NoSchedule"

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty key with Exists tolerates everything
    operator: TolerationOperator = "Equal"
    value: str = ""
    effect: str = ""  # empty matches every effect


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()


# A term is a conjunction of requirements; a node selector is a disjunction of terms.
SelectorTerm = tuple[SelectorRequirement, ...]


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: SelectorTerm


@dataclass(slots=True)
class Pod:
    name: str
    namespace: str = "default"
    uid: str = ""
    requests: Resources = field(default_factory=dict)  # effective request, see predicates
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    required_affinity: tuple[SelectorTerm, ...] = ()  # requiredDuringScheduling..., OR of terms
    preferred_affinity: tuple[PreferredTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    node_name: str | None = None
    owner_kind: str | None = None  # kind of the controller ownerReference, None when bare
    priority: int = 0
    scheduler_name: str = "default-scheduler"
    phase: str = "Pending"
    created_at: float = 0.0  # seconds since the epoch; with priority, the scheduler's queue order

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True
    provider_id: str = ""
    pool: str | None = None
    created_at: float = 0.0
    pods: list[Pod] = field(default_factory=list)
    is_template: bool = False  # a node the planner imagines, not one that exists


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    name: str
    namespace: str
    selector: dict[str, str]  # matchLabels
    disruptions_allowed: int
