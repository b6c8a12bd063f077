"""The allocator's answer without a search, for the claim most pods ask: one request of ExactCount N
devices, no constraints, no firstAvailable, no capacity requests, on a node whose matching devices consume
no counters and are not shared (allowMultipleAllocations).

There the search (`search.py`) takes the first N matching devices not in use, in pool order: the
devices a selector admits depend on the device alone, so they are listed once per (node's slices,
claim spec) and each question is "how many of them are free". Anything else (constraints, counters,
several requests or claims, a selector that fails, a node with too few) goes to the full allocator,
which also words the reason. tests/scaler/core/dra/test_simple_property.py checks both agree.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from scaler.core.dra.allocator import Allocator
from scaler.core.dra.pools import NodeRef
from scaler.core.dra.search import AllocationError, Search, node_selector_for
from scaler.core.model.dra import (
    ALLOCATION_RESULTS_MAX_SIZE,
    EXACT_COUNT,
    Allocation,
    ClaimSpec,
    Device,
    DeviceID,
    DeviceResult,
    ResourceClaim,
    ResourceSlice,
)

Candidates = list[tuple[DeviceID, Device, ResourceSlice]]  # in pool order


def is_simple(spec: ClaimSpec) -> bool:
    if len(spec.requests) != 1 or spec.constraints:
        return False
    exact = spec.requests[0].exactly
    return (exact is not None and exact.allocation_mode == EXACT_COUNT
            and 0 < exact.count <= ALLOCATION_RESULTS_MAX_SIZE and not exact.capacity)


def candidates(allocator: Allocator, node: NodeRef, claim: ResourceClaim) -> Candidates | None:
    """The devices the claim's one request may take on the node, in pool order, in use or not; None
    when the fast path does not apply (a device consumes counters, or a selector fails)."""
    if not is_simple(claim.spec):
        return None
    search = Search(allocator, node, [claim])
    key = (0, 0, 0)
    try:
        search._prepare()
        data = search.req[key]
        found = [(DeviceID(pool.driver, pool.name, d.name), d, s)
                 for pool in search.pools if not (pool.incomplete or pool.invalid)
                 for s in pool.slices for d in s.devices
                 if search.is_selectable(key, data, s, d) and not search.tainted(data, d)]
    except AllocationError:
        return None
    if any(d.consumes_counters or d.allow_multiple for _, d, _ in found):
        return None
    return found


def pick(claim: ResourceClaim, cands: Sequence[tuple[DeviceID, Device, ResourceSlice]],
         in_use: Container[DeviceID]) -> Allocation | None:
    """The allocation the search finds (the first free devices), or None when too few are free."""
    exact = claim.spec.requests[0].exactly
    assert exact is not None
    taken = []
    for c in cands:
        if c[0] not in in_use:
            taken.append(c)
            if len(taken) == exact.count:
                break
    else:
        return None
    name = exact.name
    results = tuple(DeviceResult(name, d.driver, d.pool, d.device) for d, _, _ in taken)
    try:
        selector = node_selector_for([(dev, sl) for _, dev, sl in taken])
    except AllocationError:
        return None
    return Allocation(results, selector)
