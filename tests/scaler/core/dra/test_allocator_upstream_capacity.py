# ruff: noqa: E501 - one table row per upstream case reads best on one line each
"""Consumable capacity (DRAConsumableCapacity, beta and on in 1.36+), ported from kubernetes/kubernetes
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go,
TestAllocator's table (v1.37.2), cases `consumable-capacity-*` and `allow-multiple-allocations-*` run by
incubating/allocator_test.go; each keeps its upstream name. The helpers are upstream's: a multi-allocatable
device `multi(...)`, `ranged` = withCapacityRequestPolicyRange (default 2, min 2, step 2, max 4),
`valid` = withCapacityRequestPolicyValidValues, `shareable(True)` = classWithAllowMultipleAllocations.
A result of a share is (request, driver, pool, device, consumed); upstream's fixed share id is not compared
(ours are the attempt's own). Not ported: cases with the gate off, compatibility groups and the list-typed
attribute cases (other gates, not modelled), distinctAttribute (not modelled, see scaler/core/dra/README.md).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from dra_builders import CLASS_A, DRIVER_A, NODE1, claim, class_, device, exact, first_available, match, request, slice_

from scaler.core.dra.allocator import Allocator
from scaler.core.dra.pools import NodeRef
from scaler.core.model.dra import ALL, CapacityPolicy, Device, DeviceID, DeviceRequest, ResourceClaim

C0, C1 = "capacity-0", "capacity-1"
A = class_(CLASS_A, DRIVER_A)
STR = f"{DRIVER_A}/stringAttribute"
D = Decimal


def shareable(multiple: bool) -> Any:
    return class_(CLASS_A, DRIVER_A, f"device.allowMultipleAllocations == {str(multiple).lower()}")


def multi(name: str, capacity: dict[str, int] | None = None, attrs: dict[str, object] | None = None,
          policies: dict[str, CapacityPolicy] | None = None, allow: bool = True) -> Device:
    base = device(name, {k: str(v) for k, v in (capacity or {}).items()}, attrs)
    return Device(base.name, base.attributes, base.capacity, allow_multiple=allow, policies=policies or {})


def ranged(name: str, value: int, attrs: dict[str, object] | None = None, allow: bool = True) -> Device:
    return multi(name, {C0: value}, attrs, {C0: CapacityPolicy(D(2), min=D(2), step=D(2), max=D(4))}, allow)


def valid(name: str, default: int, value: int, *more: int) -> Device:
    return multi(name, {C0: value}, policies={C0: CapacityPolicy(D(default), (D(default), *map(D, more)))})


def req(name: str, amount: int | str | None = None, count: int = 1, mode: str = "ExactCount") -> DeviceRequest:
    base = request(name, CLASS_A, count) if mode != ALL else DeviceRequest(name, exact(name, CLASS_A, mode=ALL))
    asked = ((C0, D(amount)),) if amount is not None else ()
    assert base.exactly is not None
    return DeviceRequest(name, _with(base.exactly, asked))


def _with(e: Any, asked: tuple[tuple[str, Decimal], ...]) -> Any:
    return type(e)(e.name, e.device_class_name, e.selectors, e.allocation_mode, e.count, e.tolerations, asked)


def on1(*devices: Device) -> list[Any]:
    return [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices)]


def one(dev: str, amount: int | None, request_name: str = "req-0") -> tuple[object, ...]:
    return (request_name, DRIVER_A, "pool-1", dev, ((C0, D(amount)),) if amount is not None else ())


def plain(dev: str, request_name: str = "req-0") -> tuple[object, ...]:
    return (request_name, DRIVER_A, "pool-1", dev, None)


def allocate(classes: list[Any], slices: list[Any], claims: list[ResourceClaim],
             allocated: tuple[str, ...] = (), consumed: dict[str, int] | None = None) -> Any:
    alloc = Allocator(classes, slices, [DeviceID(DRIVER_A, "pool-1", d) for d in allocated],
                      consumed={DeviceID(DRIVER_A, "pool-1", d): {C0: D(v)} for d, v in (consumed or {}).items()})
    return alloc.allocate(NodeRef(NODE1, {"region": "region-1"}), claims)


def shares(outcome: Any) -> list[set[tuple[object, ...]]] | None:
    if outcome.allocations is None:
        return None
    return [{(r.request, r.driver, r.pool, r.device, r.consumed if r.share_id else None) for r in a.results}
            for a in outcome.allocations]


CASES: list[Any] = [
    ("consumable-capacity-multi-allocatable-device-with-missing-capacity-request", [A], on1(multi("device-1", {C1: 1})), [claim("claim-0", req("req-0", 1))], {}, None),
    ("consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request", [shareable(True)], on1(multi("device-1", {C1: 1})), [claim("claim-0", req("req-0", 1, mode=ALL))], {}, None),
    ("consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request", [shareable(True)], on1(multi("device-1")), [claim("claim-0", req("req-0")), claim("claim-1", req("req-0"))], {},
     [{("req-0", DRIVER_A, "pool-1", "device-1", ())}, {("req-0", DRIVER_A, "pool-1", "device-1", ())}]),
    ("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request", [shareable(True)], on1(multi("device-1", {C0: 1}), multi("device-2", {C0: 1})), [claim("claim-0", req("req-0")), claim("claim-1", req("req-0"))], {},
     [{one("device-1", 1)}, {one("device-2", 1)}]),
    ("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block", [shareable(True)], on1(multi("device-1", {C0: 2})), [claim("claim-0", req("req-0")), claim("claim-1", req("req-0"))], {}, None),
    ("consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request", [shareable(True)], on1(multi("device-1", {C0: 2})), [claim("claim-0", req("req-0", 1)), claim("claim-1", req("req-0", 1))], {},
     [{one("device-1", 1)}, {one("device-1", 1)}]),
    ("consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request", [shareable(True)], on1(ranged("device-1", 4)), [claim("claim-0", req("req-0")), claim("claim-1", req("req-0"))], {},
     [{one("device-1", 2)}, {one("device-1", 2)}]),
    ("consumable-capacity-multi-allocatable-device-with-zero-request-policy", [shareable(True)], on1(valid("device-1", 0, 1)), [claim("claim-0", req("req-0")), claim("claim-1", req("req-0"))], {},
     [{one("device-1", 0)}, {one("device-1", 0)}]),
    ("consumable-capacity-multi-allocatable-device-violates-zero-request-policy", [shareable(True)], on1(valid("device-1", 0, 1)), [claim("claim-0", req("req-0", 1))], {}, None),
    ("consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request", [shareable(True)], on1(ranged("device-1", 4)), [claim("claim-0", req("req-0", 1)), claim("claim-1", req("req-0", 1))], {},
     [{one("device-1", 2)}, {one("device-1", 2)}]),
    ("consumable-capacity-multi-allocatable-device-with-range-policy-step", [shareable(True)], on1(ranged("device-1", 4)), [claim("claim-0", req("req-0", 3))], {}, [{one("device-1", 4)}]),
    ("consumable-capacity-multi-allocatable-device-with-valid-values-policy", [shareable(True)], on1(valid("device-1", 1, 4, 2)), [claim("claim-0", req("req-0", 2))], {}, [{one("device-1", 2)}]),
    ("consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up", [shareable(True)], on1(valid("device-1", 1, 3, 3)), [claim("claim-0", req("req-0", 2))], {}, [{one("device-1", 3)}]),
    ("consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request", [shareable(True)], on1(ranged("device-1", 2)), [claim("claim-0", req("req-0", 1)), claim("claim-1", req("req-0", 2))], {}, None),
    ("consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy", [shareable(True)], on1(ranged("device-1", 10)), [claim("claim-0", req("req-0", 6))], {}, None),
    ("consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining", [shareable(True)], on1(ranged("device-1", 4)), [claim("claim-0", req("req-0", 2))], {"consumed": {"device-1": 2}}, [{one("device-1", 2)}]),
    ("consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device", [shareable(True)], on1(ranged("device-1", 2), ranged("device-2", 2)), [claim("claim-0", req("req-0", 2))], {"consumed": {"device-1": 2}}, [{one("device-2", 2)}]),
    ("consumable-capacity-with-multi-allocatable-device-backtrack", [A],
     on1(ranged("device-2", 2, {"stringAttribute": "stringAttributeValue1"}), ranged("device-1", 4, {"stringAttribute": "stringAttributeValue2"})),
     [claim("claim-0", req("req-0", 2), req("req-1", 2), constraints=(match(STR),)), claim("claim-1", req("req-0", 2))], {},
     [{one("device-1", 2), one("device-1", 2, "req-1")}, {one("device-2", 2)}]),
    ("consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity", [shareable(True)], on1(ranged("device-1", 2)), [claim("claim-0", req("req-0", 2))], {"consumed": {"device-1": 2}}, None),
    ("consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity", [shareable(True)], on1(multi("device-1", {C0: 2}), multi("device-2")), [claim("claim-0", req("req-0", 2, mode=ALL))], {}, [{one("device-1", 2)}]),
    ("consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity", [shareable(True)], on1(multi("device-1", {C0: 2}), multi("device-2", {C0: 1})), [claim("claim-0", req("req-0", 2, mode=ALL))], {}, [{one("device-1", 2)}]),
    ("consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient", [A], on1(multi("device-1", {C0: 2}), multi("device-2", {C0: 1})), [claim("claim-0", req("req-0", 1), req("req-1", 1, mode=ALL))], {},
     [{one("device-1", 1), one("device-1", 1, "req-1"), one("device-2", 1, "req-1")}]),
    ("consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient", [A], on1(multi("device-1", {C0: 2}), multi("device-2", {C0: 1})), [claim("claim-0", req("req-0", 1, mode=ALL))], {"consumed": {"device-1": 1}},
     [{one("device-1", 1), one("device-2", 1)}]),
    ("consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient", [A], on1(multi("device-1", {C0: 1}), multi("device-2", {C0: 1})), [claim("claim-0", req("req-0", 1), req("req-1", 1, mode=ALL))], {}, None),
    ("consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient", [A], on1(multi("device-1", {C0: 1}), multi("device-2", {C0: 1})), [claim("claim-0", req("req-0", 1, mode=ALL))], {"consumed": {"device-1": 1}}, None),
    ("consumable-capacity-dedicated-device-with-consumable-capacity-request", [shareable(False)], on1(multi("device-1", {C0: 1}, allow=False)), [claim("claim-0", req("req-0", 1))], {}, [{plain("device-1")}]),
    ("consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request", [shareable(False)], on1(ranged("device-1", 2, allow=False)), [claim("claim-0", req("req-0", 1)), claim("claim-1", req("req-0", 1))], {}, None),
    ("allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector", [shareable(False)], on1(multi("device-1", {C0: 1})), [claim("claim-0", req("req-0", 1))], {}, None),
    ("allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated", [shareable(True)], on1(ranged("device-1", 2)), [claim("claim-0", req("req-0", 1))], {"allocated": ("device-1",)}, None),
    ("allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable", [shareable(True)], on1(ranged("device-1", 2, allow=False)), [claim("claim-0", req("req-0", 1))], {"consumed": {"device-1": 1}}, None),
]


@pytest.mark.parametrize(("name", "classes", "slices", "claims", "state", "expect"), CASES, ids=[c[0] for c in CASES])
def test_upstream_consumable_capacity_cases(name: str, classes: Any, slices: Any, claims: Any, state: Any, expect: Any) -> None:
    outcome = allocate(classes, slices, claims, **state)
    assert not outcome.error, outcome.reason
    assert shares(outcome) == expect, outcome.reason


def test_consumable_capacity_multi_allocatable_device_with_subrequest() -> None:
    """consumable-capacity-multi-allocatable-device-with-subrequest: the first subrequest (4) is over the
    range's max; the second (2) fits and is the one allocated."""
    asked = [_with(exact(n, CLASS_A), ((C0, D(v)),) if v else ()) for n, v in (("sub-req-0", 4), ("sub-req-1", 2), ("sub-req-2", 0))]
    outcome = allocate([shareable(True)], on1(ranged("device-1", 2)), [claim("claim-0", first_available("req-0", *asked))])
    assert shares(outcome) == [{one("device-1", 2, "req-0/sub-req-1")}]


def test_consumable_capacity_requests_are_not_modified() -> None:
    """consumable-capacity-requests-are-not-modified: two requests of one claim share a device whose default
    is huge; each consumes its own amount (2, rounded up to min; and the 10^21 asked)."""
    big = D("1000000000000000000000")
    dev = multi("device-1", {C0: 1}, policies={C0: CapacityPolicy(big, min=D(2))})
    dev = Device(dev.name, capacity={C0: D("1000000000000000000002")}, allow_multiple=True, policies=dev.policies)
    asked = DeviceRequest("req-1", _with(exact("req-1", CLASS_A), ((C0, big),)))
    outcome = allocate([A], on1(dev), [claim("claim-0", req("req-0", 2), asked)])
    assert shares(outcome) == [{one("device-1", 2), ("req-1", DRIVER_A, "pool-1", "device-1", ((C0, big),))}]


@pytest.mark.parametrize(("name", "amount", "why"), [
    ("consumable-capacity-range-policy-request-above-int64-rejected", "18446744073709551616", "cannot be represented"),
    ("consumable-capacity-range-policy-rounded-value-overflow-rejected", "9223372036854775807", "cannot be represented"),
    ("consumable-capacity-negative-request-aborts", "-5", "negative"),
])
def test_unrepresentable_or_negative_requests_abort(name: str, amount: str, why: str) -> None:
    """Upstream aborts the allocation (an error of the objects, not a device that does not fit)."""
    dev = ranged("device-1", 4) if why != "negative" else multi("device-1", {C0: 10})
    outcome = allocate([shareable(True)], on1(dev), [claim("claim-0", req("req-0", amount))])
    assert outcome.error and why in outcome.reason, outcome.reason
