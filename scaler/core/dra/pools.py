"""Which resource pools a node can use: upstream's GatherPools (structured/internal/*/pools_*.go).

A slice applies to a node by `nodeName`, `nodeSelector`, `allNodes` or, with
`perDeviceNodeSelection`, when any of its devices does. Slices are grouped into pools by (driver,
pool name); only the newest generation of a pool counts. A pool is incomplete while fewer slices of
that generation exist than its `resourceSliceCount` (nothing is allocated from it, and "All" requests
fail), and invalid when device names repeat or a device consumes a counter set the pool does not
declare. Slices with `sharedCounters` always belong to the pool, whatever node they name, because the
counters are shared by the whole pool; a device's counters are charged wherever it was allocated.

Upstream walks pools in Go map order; here pools are sorted by (driver, pool) so results are
deterministic (upstream's own tests only expect results that do not depend on that order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from scaler.core.model.dra import Device, ResourceSlice, qualified
from scaler.core.model.objects import SelectorTerm
from scaler.core.model.selectors import term_matches

PoolKey = tuple[str, str]  # (driver, pool name)


@dataclass(frozen=True, slots=True)
class NodeRef:
    """What slice node selection reads of a node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class DevicePool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: str = ""  # why the pool is invalid, empty when valid
    slices: list[ResourceSlice] = field(default_factory=list)  # slices whose devices the node may use
    all_slices: list[ResourceSlice] = field(default_factory=list)  # every slice of the generation
    counter_sets: dict[str, dict[str, Decimal]] = field(default_factory=dict)

    @property
    def key(self) -> PoolKey:
        return (self.driver, self.name)

    def __str__(self) -> str:
        return f"{self.driver}/{self.name}"


def node_matches(node: NodeRef, node_name: str | None, all_nodes: bool,
                 selector: tuple[SelectorTerm, ...] | None) -> bool:
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return any(term_matches(t, node.labels, node.name) for t in selector)
    return False


def device_on_node(device: Device, node: NodeRef) -> bool:
    return node_matches(node, device.node_name, device.all_nodes, device.node_selector)


def slice_targets(slice_: ResourceSlice, node: NodeRef) -> bool:
    """Whether the node may use some device of the slice."""
    if slice_.node_name or slice_.all_nodes or slice_.node_selector is not None:
        return node_matches(node, slice_.node_name, slice_.all_nodes, slice_.node_selector)
    if slice_.per_device_node_selection:
        return any(device_on_node(d, node) for d in slice_.devices)
    return False  # no node selection this model knows (a future field): ignored, as upstream


def gather_pools(candidates: Iterable[ResourceSlice], by_pool: Mapping[PoolKey, Sequence[ResourceSlice]],
                 node: NodeRef) -> list[DevicePool]:
    """The pools the node can use. `candidates` holds at least every slice that may apply to the node
    (the caller's index), `by_pool` every slice of each pool."""
    chosen: dict[PoolKey, list[ResourceSlice]] = {}
    targeting: set[int] = set()
    for s in candidates:
        on_node = slice_targets(s, node)
        if not on_node and not s.shared_counters:
            continue
        if on_node:
            targeting.add(id(s))
        key = (s.driver, s.pool.name)
        have = chosen.get(key)
        if have is None or s.pool.generation > have[0].pool.generation:
            chosen[key] = [s]
        elif s.pool.generation == have[0].pool.generation:
            have.append(s)
    pools = []
    for key in sorted(chosen):
        found = chosen[key]
        generation, count = found[0].pool.generation, found[0].pool.resource_slice_count
        everything = found
        if len(found) != count:  # look further: slices for other nodes may complete it
            every = by_pool.get(key, found)
            if any(s.pool.generation > generation for s in every):
                continue  # the driver is replacing this generation: ignore the old one
            everything = [s for s in every if s.pool.generation == generation]
        pool = DevicePool(driver=key[0], name=key[1], all_slices=list(everything),
                    slices=[s for s in found if id(s) in targeting])
        if len(everything) != count:
            pool.incomplete = True
        else:
            pool.invalid = _validate(pool)
        pools.append(pool)
    return pools


def _validate(pool: DevicePool) -> str:
    names: set[str] = set()
    for s in pool.slices:
        for d in s.devices:
            if d.name in names:
                return f"duplicate device name {d.name}"
            names.add(d.name)
    for s in pool.all_slices:
        for cs in s.shared_counters:
            if cs.name in pool.counter_sets:
                return f"duplicate counter set name {cs.name}"
            pool.counter_sets[cs.name] = dict(cs.counters)
    for s in pool.all_slices:
        for d in s.devices:
            for use in d.consumes_counters:
                counters = pool.counter_sets.get(use.counter_set)
                if counters is None:
                    return f"counter set {use.counter_set} not found"
                for name in use.counters:
                    if name not in counters:
                        return f"counter {name} not found in counter set {use.counter_set}"
    return ""


def lookup_attribute(device: Device, driver: str, name: str) -> object | None:
    """A matchAttribute name (fully qualified) on a device: as written, or unqualified under the
    driver's own domain."""
    if name in device.attributes:
        return device.attributes[name]
    domain, ident = qualified(name, driver)
    if domain != driver or not ident:
        return None
    return device.attributes.get(ident)


def same_attribute(a: object, b: object) -> bool:
    """Equal values of the same type (a bool is not an int; a version is not a string)."""
    return type(a) is type(b) and a == b
