"""The search-free path (`scaler.core.dra.simple`) gives exactly what the allocator gives, on random
slices (pools of one or two slices, some incomplete, some devices on counters) and random one-request
claims (a class per driver, a count, memory and attribute selectors), with random devices in use."""

from __future__ import annotations

from dra_builders import (
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    REGION1,
    claim,
    class_,
    device,
    mem_at_least,
    request,
    slice_,
)
from dra_builders import node as node_ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.core.dra import simple
from scaler.core.dra.allocator import Allocator
from scaler.core.model.dra import DeviceID, ResourceClaim, ResourceSlice

CLASSES = [class_(CLASS_A, DRIVER_A), class_(CLASS_B, DRIVER_B)]
MEMORY = ("8Gi", "16Gi", "40Gi", "80Gi")


@st.composite
def cluster(draw: st.DrawFn) -> tuple[list[ResourceSlice], ResourceClaim, set[DeviceID]]:
    slices: list[ResourceSlice] = []
    for p in range(draw(st.integers(1, 3))):
        driver = draw(st.sampled_from((DRIVER_A, DRIVER_B)))
        parts = draw(st.integers(1, 2))
        published = draw(st.integers(1, parts))  # fewer than `parts`: the pool is incomplete
        counters = draw(st.booleans())
        for s in range(published):
            devices = [device(f"d{s}-{i}", {"memory": draw(st.sampled_from(MEMORY))},
                              {"kind": draw(st.sampled_from(("a", "b")))},
                              {"gpu-0": {"memory": "8Gi"}} if counters and draw(st.booleans()) else None)
                       for i in range(draw(st.integers(0, 5)))]
            slices.append(slice_(f"s{p}-{s}", NODE1, f"pool-{p}", driver, *devices, count=parts,
                                 counters={"gpu-0": {"memory": "80Gi"}} if counters and s == 0 else None))
    selectors = []
    if draw(st.booleans()):
        selectors.append(mem_at_least(draw(st.sampled_from(MEMORY)), draw(st.sampled_from((DRIVER_A, DRIVER_B)))))
    if draw(st.booleans()):
        selectors.append(f'device.attributes["{DRIVER_A}"].kind == "a"')
    cls = draw(st.sampled_from((CLASS_A, CLASS_B)))
    wanted = claim("c", request("req", cls, draw(st.integers(1, 4)), *selectors))
    every = [DeviceID(s.driver, s.pool.name, d.name) for s in slices for d in s.devices]
    in_use = set(draw(st.lists(st.sampled_from(every), max_size=4))) if every else set()
    return slices, wanted, in_use


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster())
def test_the_fast_path_allocates_what_the_allocator_does(case: tuple[list[ResourceSlice], ResourceClaim,
                                                                     set[DeviceID]]) -> None:
    slices, wanted, in_use = case
    allocator = Allocator(CLASSES, slices, in_use)
    at = node_ref(NODE1, REGION1)
    full = allocator.allocate(at, [wanted])
    cands = simple.candidates(allocator, at, wanted)
    if cands is None:  # counters, or a selector error: the allocator decides
        return
    fast = simple.pick(wanted, cands, in_use)
    if fast is None:
        assert not full.ok, full
    else:
        assert full.allocations == (fast,)


def test_the_fast_path_steps_aside_for_what_needs_a_search() -> None:
    two = claim("c", request("a", CLASS_A), request("b", CLASS_A))
    assert simple.candidates(Allocator(CLASSES, []), node_ref(NODE1, REGION1), two) is None
    on_counters = slice_("s", NODE1, "p", DRIVER_A, device("d", {"memory": "8Gi"}, None, {"gpu-0": {"memory": "8Gi"}}),
                         counters={"gpu-0": {"memory": "80Gi"}})
    one = claim("c", request("a", CLASS_A))
    assert simple.candidates(Allocator(CLASSES, [on_counters]), node_ref(NODE1, REGION1), one) is None
