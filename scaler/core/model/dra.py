"""Dynamic Resource Allocation objects (resource.k8s.io/v1) as plain, immutable data.

Only what allocation reads is kept: selectors, counts, constraints, devices with their typed
attributes, capacities and counters, the pools slices belong to, and allocations already made.
Quantities are exact `Decimal`s in base units (`scaler.core.model.quantity.parse_quantity`). Attribute and
capacity names are kept as the API spells them: qualified (`resource.kubernetes.io/pcieRoot`) or
unqualified, in which case the driver's name is their domain (as upstream's CEL environment and
matchAttribute lookup do).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final, NamedTuple

from scaler.core.model.selectors import SelectorTerm

EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
# DeviceTaint effects (resource.k8s.io/v1): only these two keep a device from a claim that does not tolerate
# them; "None" and effects added later are informational (upstream: taintPreventsAllocation).
NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"
BLOCKING_EFFECTS: Final = (NO_SCHEDULE, NO_EXECUTE)

# resource.k8s.io/v1 AllocationResultsMaxSize: no claim gets more devices than this.
ALLOCATION_RESULTS_MAX_SIZE: Final = 32
# resource.k8s.io/v1 FirstAvailableDeviceRequestMaxSize: at most this many subrequests; kube-scheduler's
# DynamicResources Score gives a node this less the index of the subrequest it allocates.
FIRST_AVAILABLE_MAX_SIZE: Final = 8


@dataclass(frozen=True, slots=True)
class Version:
    """A `version` attribute (semver 2.0.0, minimal form), distinct from a string with the same text."""

    text: str


AttributeValue = str | int | bool | Version


class DeviceID(NamedTuple):  # a tuple: hashed and compared in C (the planner builds sets of them per node)
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions, all must be true
    extended_resource_name: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE
    since: float = 0.0  # timeAdded (epoch seconds), 0 when not given

    def __str__(self) -> str:  # as upstream's DeviceTaint.String
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""  # empty: every key (operator Exists)
    operator: str = "Equal"
    value: str = ""
    effect: str = ""  # empty: every effect

    def tolerates(self, taint: DeviceTaint) -> bool:
        """k8s.io/dynamic-resource-allocation/resourceclaim ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("", "Equal") and self.value == taint.value


def blocking_taints(taints: tuple[DeviceTaint, ...], tolerations: tuple[DeviceToleration, ...]) -> list[DeviceTaint]:
    """The taints that keep a device from a request with these tolerations (upstream: taintPreventsAllocation)."""
    return [t for t in taints if t.effect in BLOCKING_EFFECTS and not any(x.tolerates(t) for x in tolerations)]


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """`exactly` of a request, or one `firstAvailable` subrequest: the same fields."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = EXACT_COUNT  # ExactCount or All: the converter refuses any other, as the API server
    count: int = 1
    tolerations: tuple[DeviceToleration, ...] = ()
    # capacity.requests (consumable capacity): (capacity name as the device spells it, amount), by name
    capacity: tuple[tuple[str, Decimal], ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """Exactly one of `exactly` and `first_available` is set (the converter checks)."""

    name: str
    exactly: ExactRequest | None = None
    first_available: tuple[ExactRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraint:
    """matchAttribute: every device of the listed requests (all when empty) has the same value.

    `match_attribute` None stands for a constraint of a kind this model does not know.
    """

    match_attribute: str | None
    requests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str  # "req" or "req/subreq"
    driver: str
    pool: str
    device: str
    # a share of a device that allows multiple allocations (shareID set), and the capacity it consumes
    share_id: str | None = None
    consumed: tuple[tuple[str, Decimal], ...] = ()

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class Allocation:
    results: tuple[DeviceResult, ...]
    # OR of terms, as node affinity; None: the devices are reachable from every node.
    node_selector: tuple[SelectorTerm, ...] | None = None


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    spec: ClaimSpec
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()  # names of the consumers (pods) using it

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec


@dataclass(frozen=True, slots=True)
class PoolRef:
    name: str
    generation: int = 0
    resource_slice_count: int = 1


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: dict[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: dict[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A capacity's requestPolicy (consumable capacity): `default` consumed when a request names no amount,
    and at most one of `valid_values` (ascending) and a valid range (`min` set; `max`, `step` optional)."""

    default: Decimal | None = None
    valid_values: tuple[Decimal, ...] = ()
    min: Decimal | None = None
    max: Decimal | None = None
    step: Decimal | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Device:
    """Compared by identity: the allocator caches selector results per device object."""

    name: str
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    capacity: dict[str, Decimal] = field(default_factory=dict)
    # allowMultipleAllocations: shared by several requests while what they consume fits each capacity
    allow_multiple: bool = False
    policies: dict[str, CapacityPolicy] = field(default_factory=dict)  # capacity name -> its requestPolicy
    consumes_counters: tuple[CounterConsumption, ...] = ()
    # Per-device node selection (the slice sets perDeviceNodeSelection): at most one of these.
    node_name: str | None = None
    node_selector: tuple[SelectorTerm, ...] | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()  # the driver's and those of the DeviceTaintRules selecting it


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    """resource.k8s.io/v1 DeviceTaintRule: one taint on every device its selector matches (each field set
    must match; `selects_none`: no deviceSelector, which matches no device)."""

    name: str
    taint: DeviceTaint
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    selects_none: bool = False

    def selects(self, driver: str, pool: str, device: str) -> bool:
        return (not self.selects_none and self.driver in (None, driver) and self.pool in (None, pool)
                and self.device in (None, device))


@dataclass(frozen=True, slots=True, eq=False)
class ResourceSlice:
    name: str
    driver: str
    pool: PoolRef
    # Node selection: at most one of these (a slice with shared counters may have none).
    node_name: str | None = None
    node_selector: tuple[SelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()


def qualified(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of an attribute or capacity name; unqualified names belong to the driver."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


@dataclass(slots=True)
class DraObjects:
    """The DRA objects of a snapshot, by name (claims and templates by namespace/name)."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    slices: list[ResourceSlice] = field(default_factory=list)

    def complete_pools(self) -> set[tuple[str, str, int]]:
        """(driver, pool, generation) of the pools their driver has finished publishing: every one of the
        `resourceSliceCount` slices of the pool's newest generation is here, as the allocator reads a pool
        (`scaler.core.dra.pools.gather_pools`)."""
        seen = Counter((s.driver, s.pool.name, s.pool.generation, s.pool.resource_slice_count) for s in self.slices)
        newest: dict[tuple[str, str], int] = {}
        for driver, name, generation, _ in seen:
            if generation > newest.get((driver, name), -1):
                newest[(driver, name)] = generation
        return {(driver, name, generation) for (driver, name, generation, want), n in seen.items()
                if n >= want and newest[(driver, name)] == generation}

    def complete(self) -> list[ResourceSlice]:
        """The slices of the pools `complete_pools` names; of an older generation, none."""
        done = self.complete_pools()
        return [s for s in self.slices if (s.driver, s.pool.name, s.pool.generation) in done]

    def published(self) -> set[str]:
        """Nodes whose drivers have finished publishing: every pool a slice of the node is in is complete. A node
        seen with part of a pool (its driver creates the slices one by one, and a watch delivers them so) is
        still publishing: its devices are yet to come, not missing."""
        done = self.complete_pools()
        out: set[str] = set()
        partial: set[str] = set()
        for s in self.slices:
            if s.node_name:
                (out if (s.driver, s.pool.name, s.pool.generation) in done else partial).add(s.node_name)
        return out - partial
