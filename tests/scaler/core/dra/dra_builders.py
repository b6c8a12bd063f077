"""Short builders for DRA tests, named after upstream's test helpers (allocator_testing.go) so ported
cases read like the originals: class_, request, claim, device, slice_, node."""

from __future__ import annotations

from decimal import Decimal

from scaler.core.dra.allocator import Allocator, NodeRef, Outcome
from scaler.core.dra.nvidia import MigInstance
from scaler.core.model.dra import (
    ALL,
    EXACT_COUNT,
    ClaimSpec,
    Constraint,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClass,
    DeviceID,
    DeviceRequest,
    ExactRequest,
    PoolRef,
    ResourceClaim,
    ResourceSlice,
    Version,
)
from scaler.core.model.objects import SelectorRequirement, SelectorTerm
from scaler.core.model.quantity import parse_quantity

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"
NODE1, NODE2 = "node-1", "node-2"
REGION1, REGION2 = "region-1", "region-2"


def node(name: str, region: str) -> NodeRef:
    return NodeRef(name, {"region": region, "planet": "earth"})


def class_(name: str, driver: str, *extra: str) -> DeviceClass:
    return DeviceClass(name, (f'device.driver == "{driver}"', *extra))


def mem_at_least(size: str, driver: str = DRIVER_A) -> str:
    return f'device.capacity["{driver}"].memory.compareTo(quantity("{size}")) >= 0'


def exact(name: str, cls: str, count: int = 1, *selectors: str, mode: str = EXACT_COUNT) -> ExactRequest:
    return ExactRequest(name, cls, tuple(selectors), mode, count)


def request(name: str, cls: str, count: int = 1, *selectors: str) -> DeviceRequest:
    return DeviceRequest(name, exactly=exact(name, cls, count, *selectors))


def all_request(name: str, cls: str, *selectors: str) -> DeviceRequest:
    return DeviceRequest(name, exactly=exact(name, cls, 0, *selectors, mode=ALL))


def first_available(name: str, *subs: ExactRequest) -> DeviceRequest:
    return DeviceRequest(name, first_available=subs)


def claim(name: str, *requests: DeviceRequest, constraints: tuple[Constraint, ...] = ()) -> ResourceClaim:
    return ResourceClaim("default", name, ClaimSpec(tuple(requests), constraints))


def match(attribute: str, *requests: str) -> Constraint:
    return Constraint(attribute, tuple(requests))


def q(text: str) -> Decimal:
    return parse_quantity(text)


def device(name: str, capacity: dict[str, str] | None = None, attributes: dict[str, object] | None = None,
           consumes: dict[str, dict[str, str]] | None = None, *, from_counters: bool = False,
           node_name: str | None = None, node_selector: tuple[SelectorTerm, ...] | None = None,
           all_nodes: bool = False) -> Device:
    uses = tuple(CounterConsumption(cs, {k: q(v) for k, v in counters.items()})
                 for cs, counters in (consumes or {}).items())
    caps = {k: q(v) for k, v in (capacity or {}).items()}
    if from_counters:
        caps = {k: v for use in uses for k, v in use.counters.items()}
    return Device(name, attributes=dict(attributes or {}), capacity=caps, consumes_counters=uses,  # type: ignore[arg-type]
                  node_name=node_name, node_selector=node_selector, all_nodes=all_nodes)


def labels(key: str, *values: str) -> tuple[SelectorTerm, ...]:
    return ((SelectorRequirement(key, "In", values),),)


def local(node_name: str) -> tuple[SelectorTerm, ...]:
    return ((SelectorRequirement("metadata.name", "In", (node_name,), field=True),),)


ALL_NODES = "all-nodes"
PER_DEVICE = "per-device"


def slice_(name: str, where: str | tuple[SelectorTerm, ...], pool: str, driver: str, *devices: Device,
           count: int = 1, generation: int = 1, counters: dict[str, dict[str, str]] | None = None) -> ResourceSlice:
    sets = tuple(CounterSet(n, {k: q(v) for k, v in c.items()}) for n, c in (counters or {}).items())
    kw: dict[str, object] = {}
    if isinstance(where, tuple):
        kw["node_selector"] = where
    elif where == ALL_NODES:
        kw["all_nodes"] = True
    elif where == PER_DEVICE:
        kw["per_device_node_selection"] = True
    else:
        kw["node_name"] = where
    return ResourceSlice(name, driver, PoolRef(pool, generation, count), devices=devices,  # type: ignore[arg-type]
                         shared_counters=sets, **kw)


def one_device(name: str, where: str | tuple[SelectorTerm, ...], pool: str, driver: str, **kw: int) -> ResourceSlice:
    return slice_(name, where, pool, driver, device("device-1"), **kw)  # type: ignore[arg-type]


def many_devices(name: str, where: str, pool: str, driver: str, n: int) -> ResourceSlice:
    return slice_(name, where, pool, driver, *(device(f"device-{i}") for i in range(n)))


def run(classes: list[DeviceClass], slices: list[ResourceSlice], claims: list[ResourceClaim],
        at: NodeRef | None = None, allocated: tuple[tuple[str, str, str], ...] = ()) -> Outcome:
    alloc = Allocator(classes, slices, [DeviceID(*a) for a in allocated])
    return alloc.allocate(at or node(NODE1, REGION1), claims)


def results(outcome: Outcome) -> list[set[tuple[str, str, str, str]]] | None:
    """Per claim, the set of (request, driver, pool, device): upstream's ConsistOf."""
    if outcome.allocations is None:
        return None
    return [{(r.request, r.driver, r.pool, r.device) for r in a.results} for a in outcome.allocations]


def a100_40gb_profile(name: str, start: int) -> MigInstance:
    """MIG profiles of an A100 40GB (profile ids and engines as nvidia-smi mig -lgip prints)."""
    table = {"1g.5gb": (19, 1, 14, 0), "2g.10gb": (14, 2, 28, 1), "3g.20gb": (9, 4, 42, 2),
             "4g.20gb": (5, 4, 56, 2), "7g.40gb": (0, 8, 98, 5)}
    pid, size, sms, decoders = table[name]
    return MigInstance(name, pid, start, size, memory=size * 5 * 2**30 if size < 8 else 40 * 2**30,
                       multiprocessors=sms, decoders=decoders, jpeg_engines=int(size == 8), ofa_engines=int(size == 8))


__all__ = ["Version"]
