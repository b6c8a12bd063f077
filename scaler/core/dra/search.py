"""One allocation attempt: the claims of a pod on one node (upstream's `allocator` and `allocateOne`).

Consumable capacity as the incubating variant kube-scheduler 1.37 runs (DRAConsumableCapacity on): a device
that allows multiple allocations is never marked in use; each request that takes it gets a share (a result
with a share id and what it consumes: `capacity.py`) while the shares fit its capacities, and its counters
are charged once, by its first share. Every other device stays exclusive, and a capacity request still
filters it (the device must have the capacity, the amount within it).

Differs from upstream in one place on purpose: when a device's counters fit but a constraint rejects
it, upstream leaves the counters charged for the rest of the attempt (allocateDevice returns before
its rollback exists), which can hide a solution; here they are released. And the devices of one request
are tried as combinations, not permutations (same first solution, failures found sooner).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from scaler.core.dra.capacity import CapacityError, consumption
from scaler.core.dra.pools import DevicePool, NodeRef, PoolKey, device_on_node, lookup_attribute, same_attribute
from scaler.core.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX_SIZE,
    EXACT_COUNT,
    Allocation,
    Constraint,
    Device,
    DeviceClass,
    DeviceID,
    DeviceResult,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
    blocking_taints,
)
from scaler.core.model.objects import SelectorRequirement, SelectorTerm


class AllocationError(Exception):
    """Allocation cannot be attempted (upstream returns an error): a missing class, a selector that
    does not compile or fails at run time, an invalid pool, a claim asking too many devices."""


class _MaxSizeExceeded(Exception):
    """A claim would get more than ALLOCATION_RESULTS_MAX_SIZE devices down this branch."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """`allocations` (one per claim, in the order given) when every claim fits, else `reason`.
    `error` marks reasons that are errors of the objects (a Warning Event), not a lack of devices."""

    allocations: tuple[Allocation, ...] | None
    reason: str = ""
    error: bool = False

    @property
    def ok(self) -> bool:
        return self.allocations is not None


class Source(Protocol):
    classes: dict[str, DeviceClass]
    allocated: frozenset[DeviceID]
    consumed: Mapping[DeviceID, Mapping[str, Decimal]]  # shared devices: what their allocated shares consume

    def pools(self, node: NodeRef) -> list[DevicePool]: ...
    def selector_matches(self, expression: str, driver: str, device: Device, owner: str, index: int) -> bool: ...
    def available_counters(self, pool: DevicePool) -> dict[str, dict[str, Decimal]]: ...


@dataclass(slots=True)
class _Candidate:
    id: DeviceID
    device: Device
    slice: ResourceSlice
    pool: DevicePool


@dataclass(slots=True)
class _ReqData:
    request: ExactRequest
    parent: str | None  # the parent request's name when this is a firstAvailable subrequest
    device_class: DeviceClass
    claim: int = 0  # its claim's index
    num_devices: int = 0
    all_devices: list[_Candidate] | None = None

    @property
    def result_name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


_Key = tuple[int, int, int]  # (claim, request, subrequest)
_Share = tuple[str, tuple[tuple[str, Decimal], ...]]  # a share's id and what it consumes


class _MatchAttribute:
    """All devices of the constraint's requests share one value of the attribute."""

    def __init__(self, c: Constraint) -> None:
        self.name = c.match_attribute or ""
        self.requests = frozenset(c.requests)
        self.value: object = None
        self.count = 0

    def applies(self, base: str, sub: str) -> bool:
        if not self.requests:
            return True
        return base in self.requests or (bool(sub) and f"{base}/{sub}" in self.requests)

    def add(self, base: str, sub: str, cand: _Candidate) -> bool:
        if not self.applies(base, sub):
            return True
        value = lookup_attribute(cand.device, cand.id.driver, self.name)
        if value is None:
            return False
        if self.count == 0:
            self.value, self.count = value, 1
            return True
        if not same_attribute(value, self.value):
            return False
        self.count += 1
        return True

    def remove(self, base: str, sub: str) -> None:
        if self.applies(base, sub):
            self.count -= 1


class Search:
    def __init__(self, source: Source, node: NodeRef, claims: list[ResourceClaim]) -> None:
        self.src = source
        self.node = node
        self.claims = claims
        self.pools = source.pools(node)
        self.req: dict[_Key, _ReqData] = {}
        self.constraints: list[list[_MatchAttribute]] = []
        self.allocating: dict[DeviceID, set[int]] = {}
        self.consumed: dict[PoolKey, dict[str, dict[str, Decimal]]] = {}
        # per claim: (request, device, its share of a shared device: (share id, consumed), else None)
        self.results: list[list[tuple[_ReqData, _Candidate, _Share | None]]] = [[] for _ in claims]
        self.selectable: dict[tuple[_Key, int], bool] = {}
        self.cands: dict[_Key, list[_Candidate]] = {}
        self.sharing: dict[DeviceID, list[dict[str, Decimal]]] = {}  # shares this attempt gives, per device
        self.shares = 0  # share ids given

    def run(self) -> Outcome:
        self._prepare()
        try:
            done = self._one(0, 0, 0, 0, False)
        except _MaxSizeExceeded:
            raise AllocationError("allocation max size exceeded") from None
        if not done:
            for pool in self.pools:
                if pool.invalid:
                    raise AllocationError(f"invalid resource pools were encountered: {pool}: {pool.invalid}")
            return Outcome(None, self._explain())
        allocations = []
        for picked in self.results:
            allocations.append(Allocation(
                results=tuple(DeviceResult(d.result_name, c.id.driver, c.id.pool, c.id.device, *(share or (None, ())))
                              for d, c, share in picked),
                node_selector=node_selector_for([(c.device, c.slice) for _, c, _ in picked]),
            ))
        return Outcome(tuple(allocations))

    # --- validation (upstream: the loop at the top of Allocate, validateDeviceRequest) -------------

    def _prepare(self) -> None:
        for ci, claim in enumerate(self.claims):
            min_devices = 0
            for ri, request in enumerate(claim.spec.requests):
                if request.first_available:
                    least = min(self._validate(ci, sub, request.name, (ci, ri, si)).num_devices
                                for si, sub in enumerate(request.first_available))
                    min_devices += least
                elif request.exactly is not None:
                    min_devices += self._validate(ci, request.exactly, None, (ci, ri, 0)).num_devices
                else:
                    raise AllocationError(f"claim {claim.key}, request {request.name}: neither exactly nor "
                                          "firstAvailable (unsupported request type?)")
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(f"claim {claim.key}: number of requested devices {min_devices} exceeds the "
                                      f"claim limit of {ALLOCATION_RESULTS_MAX_SIZE}")
            constraints = []
            for i, c in enumerate(claim.spec.constraints):
                if c.match_attribute is None:
                    raise AllocationError(f"claim {claim.key}, constraint #{i}: empty constraint "
                                          "(unsupported constraint type?)")
                constraints.append(_MatchAttribute(c))
            self.constraints.append(constraints)

    def _validate(self, ci: int, request: ExactRequest, parent: str | None, key: _Key) -> _ReqData:
        claim = self.claims[ci]
        where = f"claim {claim.key}, request {request.name}"
        for i, selector in enumerate(request.selectors):
            if not selector:
                raise AllocationError(f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)")
        if not request.device_class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        device_class = self.src.classes.get(request.device_class_name)
        if device_class is None:
            raise AllocationError(f"{where}: could not retrieve device class {request.device_class_name}: "
                                  "no such DeviceClass")
        data = self.req[key] = _ReqData(request, parent, device_class, ci)
        if request.allocation_mode == EXACT_COUNT:
            data.num_devices = request.count
        elif request.allocation_mode == ALL:
            data.all_devices = []
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(f"{where}: asks for all devices, but resource pool {pool} is currently "
                                          "being updated")
                if pool.invalid:
                    raise AllocationError(f"{where}: asks for all devices, but resource pool {pool} is currently "
                                          "invalid")
                for s in pool.slices:
                    for d in s.devices:
                        if self.is_selectable(key, data, s, d) and self._capacity(data, d, ()) is not None:
                            data.all_devices.append(_Candidate(DeviceID(s.driver, s.pool.name, d.name), d, s, pool))
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {request.allocation_mode}")
        return data

    def is_selectable(self, key: _Key, data: _ReqData, slice_: ResourceSlice, device: Device) -> bool:
        ck = (key, id(device))
        hit = self.selectable.get(ck)
        if hit is not None:
            return hit
        hit = self._check_selectors(key, data, slice_, device)
        self.selectable[ck] = hit
        return hit

    def _check_selectors(self, key: _Key, data: _ReqData, slice_: ResourceSlice, device: Device) -> bool:
        cls = data.device_class
        for i, expr in enumerate(cls.selectors):
            if not self.src.selector_matches(expr, slice_.driver, device, f"class {cls.name}", i):
                return False
        owner = f"claim {self.claims[key[0]].key}"
        for i, expr in enumerate(data.request.selectors):
            if not self.src.selector_matches(expr, slice_.driver, device, owner, i):
                return False
        return not slice_.per_device_node_selection or device_on_node(device, self.node)

    # --- the search (upstream: allocateOne, allocateDevice) ---------------------------------------

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: int = 0) -> bool:
        """Device `di` of request (ci, ri, si), tried from candidate `start` on: the devices of one request
        are a set, so later ones are picked after earlier ones (upstream tries every order; the first
        solution is the same, a failure is found in combinations, not permutations)."""
        if ci >= len(self.claims):
            return True
        if ri >= len(self.claims[ci].spec.requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False)
            except _MaxSizeExceeded:
                return False  # other choices in earlier claims may leave room
        data = self.req[(ci, ri, si)]
        if not in_sub and data.parent is not None:
            return self._first_available(ci, ri, di)
        if data.request.allocation_mode == ALL and not data.all_devices:
            return False  # "All" needs at least one device
        if di >= data.num_devices:
            return self._one(ci, ri + 1, 0, 0, False)
        if len(self.results[ci]) + data.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE:
            raise _MaxSizeExceeded
        if data.all_devices is not None:
            undo = self._take(ci, data, data.all_devices[di], must=True)
            return undo is not None and self._descend(undo, ci, ri, si, di, in_sub)
        cands = self._candidates((ci, ri, si), data)
        if di == 0 and len(cands) < data.num_devices:
            return False  # too few devices match, whatever the others take
        for j in range(start, len(cands)):
            cand = cands[j]
            if self._in_use(cand.id):
                continue
            undo = self._take(ci, data, cand, must=False)
            if undo is not None and self._descend(undo, ci, ri, si, di, in_sub, j + 1):
                return True
        return False

    def _candidates(self, key: _Key, data: _ReqData) -> list[_Candidate]:
        """The devices the request may take on this node, in pool order, not allocated before."""
        hit = self.cands.get(key)
        if hit is None:
            hit = self.cands[key] = [
                _Candidate(did, d, s, pool)
                for pool in self.pools if not (pool.incomplete or pool.invalid)
                for s in pool.slices for d in s.devices
                if (did := DeviceID(pool.driver, pool.name, d.name)) not in self.src.allocated
                and self.is_selectable(key, data, s, d) and not self.tainted(data, d)]
        return hit

    @staticmethod
    def tainted(data: _ReqData, device: Device) -> bool:
        """A taint the request does not tolerate keeps the device from it (upstream: allocateDevice)."""
        return bool(device.taints) and bool(blocking_taints(device.taints, data.request.tolerations))

    def _descend(self, undo: Callable[[], None], ci: int, ri: int, si: int, di: int, in_sub: bool,
                 start: int = 0) -> bool:
        try:
            done = self._one(ci, ri, si, di + 1, in_sub, start)
        except BaseException:
            undo()
            raise
        if not done:
            undo()
        return done

    def _first_available(self, ci: int, ri: int, di: int) -> bool:
        all_exceeded = True
        si = 0
        while (ci, ri, si) in self.req:
            try:
                done = self._one(ci, ri, si, di, True)
            except _MaxSizeExceeded:
                si += 1
                continue  # a later subrequest may ask fewer devices
            all_exceeded = False
            if done:
                return True
            si += 1
        if all_exceeded:
            raise _MaxSizeExceeded
        return False

    def _in_use(self, did: DeviceID) -> bool:
        return did in self.src.allocated or bool(self.allocating.get(did))

    def _capacity(self, data: _ReqData, device: Device, shares: object) -> dict[str, Decimal] | None:
        """What the request consumes of the device beside `shares` (upstream CmpRequestOverCapacity), or None."""
        if not data.request.capacity and not device.allow_multiple and not device.policies:
            return {}  # an exclusive device taken whole by a request naming no capacity: it always fits
        try:
            return consumption(data.request.capacity, device, shares)  # type: ignore[arg-type]
        except CapacityError as err:
            claim = self.claims[data.claim]
            raise AllocationError(f"claim {claim.key}, request {data.request.name}: checking capacity for device "
                                  f"{device.name}: {err}") from None

    def _shares(self, did: DeviceID) -> list[Mapping[str, Decimal]]:
        """What the device's shares consume: allocated before, and given in this attempt."""
        before = self.src.consumed.get(did)
        now = self.sharing.get(did, [])
        return [before, *now] if before is not None else list(now)

    def _take(self, ci: int, data: _ReqData, cand: _Candidate, must: bool) -> Callable[[], None] | None:
        """Tentatively allocate; the undo function, or None when the device cannot be taken."""
        if self._in_use(cand.id):
            return None
        multiple = cand.device.allow_multiple
        use = self._capacity(data, cand.device, self._shares(cand.id) if multiple else ())
        if use is None or self.tainted(data, cand.device):
            return None
        # a shared device's counters are charged by its first share only (upstream skipCounterCheck)
        charged = bool(cand.device.consumes_counters) and not (
            multiple and (cand.id in self.src.consumed or bool(self.sharing.get(cand.id))))
        if charged and not self._charge(cand):
            return None
        base, sub = (data.parent, data.request.name) if data.parent else (data.request.name, "")
        constraints = self.constraints[ci]
        for i, c in enumerate(constraints):
            if c.add(base, sub, cand):
                continue
            if must:
                raise AllocationError(f"claim {self.claims[ci].key}, request {data.request.name}: cannot add device "
                                      f"{cand.id} because a claim constraint would not be satisfied")
            for done in constraints[:i]:
                done.remove(base, sub)
            if charged:
                self._uncharge(cand)
            return None
        share: _Share | None = None
        if multiple:
            self.sharing.setdefault(cand.id, []).append(use)
            self.shares += 1
            share = (_share_id(self.shares), tuple(use.items()))
        else:
            self.allocating.setdefault(cand.id, set()).add(ci)
        self.results[ci].append((data, cand, share))

        def undo() -> None:
            for c in constraints:
                c.remove(base, sub)
            if multiple:
                self.sharing[cand.id].pop()
            else:
                self.allocating[cand.id].discard(ci)
            if charged:
                self._uncharge(cand)
            self.results[ci].pop()

        return undo

    def _charge(self, cand: _Candidate) -> bool:
        available = self.src.available_counters(cand.pool)
        consumed = self.consumed.setdefault(cand.pool.key, {})
        for use in cand.device.consumes_counters:
            into = consumed.setdefault(use.counter_set, {})
            for name, amount in use.counters.items():
                into[name] = into.get(name, Decimal(0)) + amount
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for name, amount in counters.items():
                if amount < used.get(name, 0):
                    self._uncharge(cand)
                    return False
        return True

    def _uncharge(self, cand: _Candidate) -> None:
        consumed = self.consumed[cand.pool.key]
        for use in cand.device.consumes_counters:
            for name, amount in use.counters.items():
                consumed[use.counter_set][name] -= amount

    def _explain(self) -> str:
        return explain(self)


def _share_id(n: int) -> str:
    """A share's id: a UUID as the API wants (upstream draws a random one; here the n-th of the attempt)."""
    return f"00000000-0000-4000-8000-{n:012x}"


def node_selector_for(results: Sequence[tuple[Device, ResourceSlice]]) -> tuple[SelectorTerm, ...] | None:
    """The allocation's node selector: the node of any node-local device, else the union of the
    devices' one-term selectors, else None (reachable from everywhere)."""
    fields: list[SelectorRequirement] = []
    exprs: list[SelectorRequirement] = []
    for device, slice_ in results:
        name, selector = ((device.node_name, device.node_selector) if slice_.per_device_node_selection
                          else (slice_.node_name, slice_.node_selector))
        if name:
            return ((SelectorRequirement("metadata.name", "In", (name,), field=True),),)
        if not selector:
            continue
        if len(selector) > 1:
            raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(selector)} terms")
        for req in selector[0]:
            target = fields if req.field else exprs
            if not any(r.key == req.key and r.operator == req.operator and set(r.values) == set(req.values)
                       for r in target):
                target.append(req)
    return (tuple(exprs) + tuple(fields),) if fields or exprs else None


# Why the claims of a pod cannot be allocated on a node, in one line for `explain`. Upstream says only
# "cannot allocate all claims"; this names the first request that cannot be met even alone (too few
# matching devices free on the node), or says that the requests only fail together (constraints, shared
# counters, devices wanted by two requests).
def explain(search: Search) -> str:
    if not search.claims:
        return "no claims"
    updating = [str(p) for p in search.pools if p.incomplete]
    suffix = f" (pools being updated: {', '.join(updating)})" if updating else ""
    for (ci, ri, si), data in sorted(search.req.items()):
        request = search.claims[ci].spec.requests[ri]
        if request.first_available and si > 0:
            continue  # judged with its first alternative below
        alternatives = ([search.req[(ci, ri, i)] for i in range(len(request.first_available))]
                        if request.first_available else [data])
        shortfalls = [_shortfall(search, (ci, ri, i), d) for i, d in enumerate(alternatives)]
        if all(shortfalls):
            claim = search.claims[ci]
            return f"claim {claim.key}: request {request.name}: {'; '.join(s for s in shortfalls if s)}{suffix}"
    claims = ", ".join(c.key for c in search.claims)
    return (f"claims {claims}: each request has devices, but not all together (matchAttribute constraints, "
            f"shared counters, or the same devices wanted twice){suffix}")


def _shortfall(search: Search, key: tuple[int, int, int], data: _ReqData) -> str:
    """Empty when enough matching devices are free for this request alone, else what is missing."""
    matching = free = tainted = short = 0
    for pool in search.pools:
        if pool.incomplete or pool.invalid:
            continue
        for s in pool.slices:
            for d in s.devices:
                if not search.is_selectable(key, data, s, d):
                    continue
                matching += 1
                did = DeviceID(pool.driver, pool.name, d.name)
                if search.tainted(data, d):
                    tainted += 1
                elif did not in search.src.allocated:
                    try:
                        fits = search._capacity(data, d, search._shares(did) if d.allow_multiple else ())
                    except AllocationError:
                        fits = None
                    free += fits is not None
                    short += fits is None
    label = data.result_name
    cls = data.device_class.name
    taints = f", {tainted} tainted (not tolerated)" if tainted else ""
    taints += f", {short} without the capacity asked left" if short else ""
    if data.request.allocation_mode == ALL:
        if tainted:
            return f"{label}: all devices of class {cls} asked{taints}"
        return "" if matching else f"{label}: no device of class {cls} matches on the node"
    if free >= data.num_devices:
        return ""
    return (f"{label}: needs {data.num_devices} device(s) of class {cls}, {matching} match on the node, "
            f"{free} of them free{taints}")
