# ruff: noqa: E501 - one table row per upstream case reads best on one line each
"""Ported from kubernetes/kubernetes
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go,
TestAllocator's table (run there against the stable allocator by stable/allocator_test.go). Each case
keeps its upstream name. Device taints are ported in test_allocator_upstream_taints.py, consumable capacity
in test_allocator_upstream_capacity.py; upstream's cases on adminAccess, binding conditions and configs are
not ported (not modelled, see scaler/core/dra/README.md); cases
that need a feature gate off (PrioritizedList/PartitionableDevices disabled) are not either: 1.34
has both on.
"""

from __future__ import annotations

from typing import Any

import pytest
from dra_builders import (
    ALL_NODES,
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    NODE2,
    PER_DEVICE,
    REGION1,
    REGION2,
    Version,
    all_request,
    claim,
    class_,
    device,
    exact,
    first_available,
    labels,
    local,
    many_devices,
    match,
    mem_at_least,
    node,
    one_device,
    request,
    results,
    run,
    slice_,
)

from scaler.core.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX_SIZE,
    ClaimSpec,
    Constraint,
    DeviceClass,
    DeviceRequest,
    ResourceClaim,
)
from scaler.core.model.objects import SelectorRequirement

A, B = class_(CLASS_A, DRIVER_A), class_(CLASS_B, DRIVER_B)
INT, VER = f"{DRIVER_A}/numa", f"{DRIVER_A}/driverVersion"
STR, BOOL = f"{DRIVER_A}/stringAttribute", f"{DRIVER_A}/boolAttribute"
ATTRS = {"driverVersion": Version("1.0.0"), "numa": 1, "stringAttribute": "stringAttributeValue",
         "boolAttribute": True}
N2 = node(NODE2, REGION2)
GEN = f'device.attributes["{DRIVER_A}"].generation'


def r(req: str, dev: str = "device-1", pool: str = "pool-1", driver: str = DRIVER_A) -> tuple[str, str, str, str]:
    return (req, driver, pool, dev)


def two_mem(small: str, large: str) -> list[Any]:
    return [device("device-2", {"memory": large}), device("device-1", {"memory": small})]


def counters_dev(name: str, mem: str, cpus: str | None = None, cs: str = "counter-set-1") -> Any:
    use = {"memory": mem} if cpus is None else {"memory": mem, "cpus": cpus}
    return device(name, consumes={cs: use}, from_counters=True)


CASES: list[Any] = [
    ("simple", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)], [claim("claim-0", request("req-0", CLASS_A))],
     None, (), [{r("req-0")}]),
    ("other-node", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_B), one_device("slice-2", NODE2, "pool-2", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A))], N2, (), [{r("req-0", pool="pool-2")}]),
    ("small-and-large", [A], [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *reversed(two_mem("1Gi", "2Gi")))],
     [claim("claim-0", request("req-0", CLASS_A, 1, mem_at_least("1Gi")), request("req-1", CLASS_A, 1, mem_at_least("2Gi")))],
     None, (), [{r("req-0"), r("req-1", "device-2")}]),
    ("small-and-large-backtrack-requests", [A], [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *two_mem("1Gi", "2Gi"))],
     [claim("claim-0", request("req-0", CLASS_A, 1, mem_at_least("1Gi")), request("req-1", CLASS_A, 1, mem_at_least("2Gi")))],
     None, (), [{r("req-0"), r("req-1", "device-2")}]),
    ("small-and-large-backtrack-claims", [A], [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *two_mem("1Gi", "2Gi"))],
     [claim("claim-0", request("req-0", CLASS_A, 1, mem_at_least("1Gi"))),
      claim("claim-1", request("req-1", CLASS_A, 1, mem_at_least("2Gi")))],
     None, (), [{r("req-0")}, {r("req-1", "device-2")}]),
    ("devices-split-across-different-slices", [A],
     [one_device("slice-1", NODE1, "pool-1", DRIVER_A), one_device("slice-2", NODE1, "pool-2", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A, 2))], None, (), [{r("req-0"), r("req-0", pool="pool-2")}]),
    ("obsolete-slice", [A],
     [slice_("slice-1-obsolete", NODE1, "pool-1", DRIVER_A, device("device-1"), count=2),
      slice_("slice-1-obsolete", NODE1, "pool-1", DRIVER_A, device("device-2"), count=2, generation=2)],
     [claim("claim-0", request("req-0", CLASS_A))], None, (), None),
    ("duplicate-slice", [A],
     [one_device("slice-1", NODE1, "pool-1", DRIVER_A, count=2), one_device("slice-1-2", NODE1, "pool-1", DRIVER_A, count=2)],
     [claim("claim-0", request("req-0", CLASS_A))], None, (), "invalid resource pools were encountered"),
    ("no-slices", [A], [], [claim("claim-0", request("req-0", CLASS_A))], None, (), None),
    ("not-enough-suitable-devices", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A)), claim("claim-0", request("req-1", CLASS_A))], None, (), None),
    ("no-classes", [], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)], [claim("claim-0", request("req-0", CLASS_A))],
     None, (), "could not retrieve device class class-a"),
    ("unknown-class", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", request("req-0", "unknown-class"))], None, (), "could not retrieve device class unknown-class"),
    ("empty-class", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)], [claim("claim-0", request("req-0", ""))],
     None, (), "claim default/claim-0, request req-0: missing device class name (unsupported request type?)"),
    ("no-claims-to-allocate", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)], [], None, (), []),
    ("all-devices-single", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", all_request("req-0", CLASS_A))], None, (), [{r("req-0")}]),
    ("all-devices-many", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A), one_device("slice-1", NODE1, "pool-2", DRIVER_A)],
     [claim("claim-0", all_request("req-0", CLASS_A))], None, (), [{r("req-0"), r("req-0", pool="pool-2")}]),
    ("all-devices-of-the-incomplete-pool", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A, count=2)],
     [claim("claim-0", all_request("req-0", CLASS_A))], None, (),
     "claim default/claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated"),
    ("all-devices-plus-another", [A, B],
     [one_device("slice-1", NODE1, "pool-1", DRIVER_A), one_device("slice-1", NODE1, "pool-1", DRIVER_B)],
     [claim("claim-0", all_request("req-0", CLASS_A)), claim("claim-1", request("req-0", CLASS_B))],
     None, (), [{r("req-0")}, {r("req-0", driver=DRIVER_B)}]),
    ("all-devices-plus-another-reversed", [A, B],
     [one_device("slice-1", NODE1, "pool-1", DRIVER_A), one_device("slice-1", NODE1, "pool-1", DRIVER_B)],
     [claim("claim-1", request("req-0", CLASS_B)), claim("claim-0", all_request("req-0", CLASS_A))],
     None, (), [{r("req-0", driver=DRIVER_B)}, {r("req-0")}]),
    ("all-devices-many-plus-another", [A, B],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1"), device("device-2")),
      one_device("slice-1", NODE1, "pool-1", DRIVER_B)],
     [claim("claim-0", all_request("req-0", CLASS_A)), claim("claim-1", request("req-0", CLASS_B))],
     None, (), [{r("req-0"), r("req-0", "device-2")}, {r("req-0", driver=DRIVER_B)}]),
    ("all-devices-no-solution", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-1", request("req-0", CLASS_A)), claim("claim-0", all_request("req-0", CLASS_A))], None, (), None),
    ("all-devices-no-solution-reversed", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", all_request("req-0", CLASS_A)), claim("claim-1", request("req-0", CLASS_A))], None, (), None),
    ("all-devices-slice-without-devices", [A], [slice_("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", all_request("req-0", CLASS_A))], None, (), None),
    ("all-devices-no-slices", [A], [], [claim("claim-0", all_request("req-0", CLASS_A))], None, (), None),
    ("all-devices-some-allocated", [A], [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1"), device("device-2"))],
     [claim("claim-0", all_request("req-0", CLASS_A))], None, ((DRIVER_A, "pool-1", "device-1"),), None),
    ("all-devices-slice-without-devices-prioritized-list", [A, B],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A), one_device("slice-2", NODE1, "pool-2", DRIVER_B)],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 0, mode=ALL), exact("subReq-1", CLASS_B)))],
     None, (), [{r("req-0/subReq-1", pool="pool-2", driver=DRIVER_B)}]),
    ("all-devices-no-slices-prioritized-list", [A, B], [one_device("slice-2", NODE1, "pool-2", DRIVER_B)],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 0, mode=ALL), exact("subReq-1", CLASS_B)))],
     None, (), [{r("req-0/subReq-1", pool="pool-2", driver=DRIVER_B)}]),
    ("all-devices-some-allocated-prioritized-list", [A, B],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1"), device("device-2")),
      one_device("slice-2", NODE1, "pool-2", DRIVER_B)],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 0, mode=ALL), exact("subReq-1", CLASS_B)))],
     None, ((DRIVER_A, "pool-1", "device-1"),), [{r("req-0/subReq-1", pool="pool-2", driver=DRIVER_B)}]),
    ("network-attached-device", [A], [one_device("slice-1", labels("region", REGION1), "pool-1", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A))], None, (), [{r("req-0")}]),
    ("unsuccessful-allocation-network-attached-device", [A], [one_device("slice-1", labels("region", REGION1), "pool-1", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A))], N2, (), None),
    ("many-network-attached-devices", [A],
     [one_device("slice-1", labels("region", REGION1), "pool-1", DRIVER_A), one_device("slice-1", ALL_NODES, "pool-2", DRIVER_A),
      one_device("slice-1", labels("planet", "earth"), "pool-3", DRIVER_A), one_device("slice-1", local(NODE1), "pool-4", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A, 4))], None, (),
     [{r("req-0", pool=p) for p in ("pool-1", "pool-2", "pool-3", "pool-4")}]),
    ("local-and-network-attached-devices", [A],
     [one_device("slice-1", labels("region", REGION1), "pool-1", DRIVER_A), one_device("slice-1", NODE1, "pool-2", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A, 2))], None, (), [{r("req-0"), r("req-0", pool="pool-2")}]),
    ("several-different-drivers", [A, B],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1"), device("device-2")),
      one_device("slice-1", NODE1, "pool-1", DRIVER_B)],
     [claim("claim-0", request("req-0", CLASS_A)), claim("claim-0", request("req-0", CLASS_B))],
     None, (), [{r("req-0")}, {r("req-0", driver=DRIVER_B)}]),
    ("already-allocated-devices", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A))], None,
     ((DRIVER_A, "pool-1", "device-1"), (DRIVER_A, "pool-1", "device-2")), None),
    ("with-constraint", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", None, ATTRS), device("device-2", None, ATTRS))],
     [claim("claim-0", request("req-0", CLASS_A), request("req-1", CLASS_A),
            constraints=(match(INT), match(VER), match(STR), match(BOOL)))],
     None, (), [{r("req-0"), r("req-1", "device-2")}]),
    ("with-constraint-non-existent-attribute", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A), constraints=(match(f"{DRIVER_A}/NonExistentAttribute"),))],
     None, (), None),
]


def _not_matching(name: str, attr: str, key: str, v1: object, v2: object) -> Any:
    devices = [device("device-1", None, {key: v1}), device("device-2", None, {key: v2})]
    return (name, [A, B], [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices)],
            [claim("claim-0", request("req-0", CLASS_A, 2), constraints=(match(attr),))], None, (), None)


CASES += [
    _not_matching("with-constraint-not-matching-int-attribute", INT, "numa", 1, 2),
    _not_matching("with-constraint-not-matching-string-attribute", STR, "stringAttribute", "stringAttributeValue",
                  "stringAttributeValue2"),
    _not_matching("with-constraint-not-matching-bool-attribute", BOOL, "boolAttribute", True, False),
    _not_matching("with-constraint-not-matching-version-attribute", VER, "driverVersion", Version("1.0.0"),
                  Version("2.0.0")),
    ("with-constraint-not-matching-int-attribute-all-devices", [A, B],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", None, {"numa": 1}), device("device-2", None, {"numa": 2}))],
     [claim("claim-0", all_request("req-0", CLASS_A), constraints=(match(INT),))], None, (),
     "claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint "
     "would not be satisfied"),
    ("with-constraint-for-request", [A, B],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", None, {"driverVersion": Version("1.0.0")}),
             device("device-2", None, {"driverVersion": Version("2.0.0")}))],
     [claim("claim-0", request("req-0", CLASS_A), request("req-1", CLASS_A), constraints=(match(VER, "req-0"),))],
     None, (), [{r("req-0"), r("req-1", "device-2")}]),
    ("with-constraint-for-request-retry", [A, B],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A,
             device("device-1", None, {"driverVersion": Version("1.0.0"), "stringAttribute": "a"}),
             device("device-2", None, {"driverVersion": Version("2.0.0"), "stringAttribute": "b"}),
             device("device-3", None, {"driverVersion": Version("3.0.0"), "stringAttribute": "b"}))],
     [claim("claim-0", request("req-0", CLASS_A), request("req-1", CLASS_A), constraints=(match(VER, "req-0"), match(STR)))],
     None, (), [{r("req-0", "device-2"), r("req-1", "device-3")}]),
    ("unknown-selector", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A, 1, ""))], None, (), "CEL expression empty (unsupported selector type?)"),
    ("unknown-allocation-mode", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", DeviceRequest("req-0", exactly=exact("req-0", CLASS_A, 1, mode="future-mode")))], None, (),
     "unsupported count mode future-mode"),
    ("unknown-constraint", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [ResourceClaim("default", "claim-0", ClaimSpec((request("req-0", CLASS_A),), (Constraint(None),)))], None, (),
     "empty constraint (unsupported constraint type?)"),
    ("invalid-CEL-one-device", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", request("req-0", CLASS_A, 1, "noSuchVar"))], None, (), "undeclared reference"),
    ("invalid-CEL-one-device-class", [DeviceClass(CLASS_A, ("noSuchVar",))],
     [one_device("slice-1", NODE1, "pool-1", DRIVER_A)], [claim("claim-0", request("req-0", CLASS_A))], None, (),
     "undeclared reference"),
    ("invalid-CEL-all-devices", [A], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", all_request("req-0", CLASS_A, "noSuchVar"))], None, (), "undeclared reference"),
    ("too-many-devices-single-request", [A], [], [claim("claim-0", request("req-0", CLASS_A, 500))], None, (),
     "exceeds the claim limit"),
    ("many-devices-okay", [A], [], [claim("claim-0", request("req-0", CLASS_A, ALLOCATION_RESULTS_MAX_SIZE))],
     None, (), None),
    ("too-many-devices-total", [A], [many_devices("slice-1", NODE1, "pool-1", DRIVER_A, ALLOCATION_RESULTS_MAX_SIZE + 1)],
     [claim("claim-0", request("req-0", CLASS_A, ALLOCATION_RESULTS_MAX_SIZE), request("req-1", CLASS_A))], None, (),
     "exceeds the claim limit"),
    ("max-number-devices", [A], [many_devices("slice-1", NODE1, "pool-1", DRIVER_A, ALLOCATION_RESULTS_MAX_SIZE)],
     [claim("claim-0", request("req-0", CLASS_A, ALLOCATION_RESULTS_MAX_SIZE))], None, (),
     [{r("req-0", f"device-{i}") for i in range(ALLOCATION_RESULTS_MAX_SIZE)}]),
]

PARTITION = {"counter-set-1": {"memory": "8Gi"}}

CASES += [
    ("prioritized-list-first-unavailable", [A, B], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_B), exact("subReq-1", CLASS_A)))],
     None, (), [{r("req-0/subReq-1")}]),
    ("prioritized-list-non-available", [A, B],
     [one_device("slice-1", NODE1, "pool-1", DRIVER_A), one_device("slice-2", NODE1, "pool-2", DRIVER_B)],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_B, 2), exact("subReq-1", CLASS_A, 2)))],
     None, (), None),
    ("prioritized-list-subrequests-with-expressions", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", {"memory": "2Gi"}),
             device("device-2", {"memory": "2Gi"}), device("device-3", {"memory": "1Gi"}))],
     [claim("claim-0", request("req-0", CLASS_A, 1, mem_at_least("1Gi")),
            first_available("req-1", exact("subReq-0", CLASS_A, 1, mem_at_least("4Gi")),
                            exact("subReq-1", CLASS_A, 2, mem_at_least("2Gi"))))],
     None, (), [{r("req-0", "device-3"), r("req-1/subReq-1", "device-1"), r("req-1/subReq-1", "device-2")}]),
    ("prioritized-list-subrequests-with-constraints-ref-parent-request", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", {"memory": "8Gi"}, {"driverVersion": Version("1.0.0")})),
      slice_("slice-2", NODE1, "pool-2", DRIVER_A, device("device-2", {"memory": "2Gi"}, {"driverVersion": Version("2.0.0")}),
             device("device-3", {"memory": "1Gi"}, {"driverVersion": Version("1.0.0")}))],
     [claim("claim-0", request("req-0", CLASS_A, 1, mem_at_least("8Gi")),
            first_available("req-1", exact("subReq-0", CLASS_A, 1, mem_at_least("2Gi")),
                            exact("subReq-1", CLASS_A, 1, mem_at_least("1Gi"))),
            constraints=(match(VER, "req-0", "req-1"),))],
     None, (), [{r("req-0"), r("req-1/subReq-1", "device-3", "pool-2")}]),
    ("prioritized-list-subrequests-with-constraints-ref-sub-request", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", {"memory": "8Gi"}, {"driverVersion": Version("1.0.0")})),
      slice_("slice-2", NODE1, "pool-2", DRIVER_A, device("device-2", {"memory": "2Gi"}, {"driverVersion": Version("2.0.0")}))],
     [claim("claim-0", request("req-0", CLASS_A, 1, mem_at_least("8Gi")),
            first_available("req-1", exact("subReq-0", CLASS_A, 1, mem_at_least("2Gi")),
                            exact("subReq-1", CLASS_A, 1, mem_at_least("1Gi"))),
            constraints=(match(VER, "req-0", "req-1/subReq-0"),))],
     None, (), [{r("req-0"), r("req-1/subReq-1", "device-2", "pool-2")}]),
    ("prioritized-list-subrequests-with-allocation-mode-all", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1"), device("device-2"))],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 0, mode=ALL), exact("subReq-1", CLASS_A)))],
     None, ((DRIVER_A, "pool-1", "device-1"),), [{r("req-0/subReq-1", "device-2")}]),
    ("prioritized-list-allocation-mode-all-multiple-requests", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1"), device("device-2"))],
     [claim("claim-0", request("req-0", CLASS_A),
            first_available("req-1", exact("subReq-0", CLASS_A, 0, mode=ALL), exact("subReq-1", CLASS_A)))],
     None, (), [{r("req-0"), r("req-1/subReq-1", "device-2")}]),
    ("prioritized-list-multi-request", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", {"memory": "8Gi"})),
      slice_("slice-2", NODE1, "pool-2", DRIVER_A, device("device-2", {"memory": "4Gi"}))],
     [claim("claim-0", request("req-1", CLASS_A, 1, mem_at_least("8Gi")),
            first_available("req-0", exact("subReq-0", CLASS_A, 1, mem_at_least("8Gi")),
                            exact("subReq-1", CLASS_A, 1, mem_at_least("4Gi"))))],
     None, (), [{r("req-1"), r("req-0/subReq-1", "device-2", "pool-2")}]),
    ("prioritized-list-with-backtracking", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", {"memory": "8Gi"})),
      slice_("slice-2", NODE1, "pool-2", DRIVER_A, device("device-2", {"memory": "4Gi"}))],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 1, mem_at_least("8Gi")),
                                       exact("subReq-1", CLASS_A, 1, mem_at_least("4Gi"))),
            request("req-1", CLASS_A, 1, mem_at_least("8Gi")))],
     None, (), [{r("req-0/subReq-1", "device-2", "pool-2"), r("req-1")}]),
    ("prioritized-list-too-many-in-first-subrequest", [A, B], [one_device("slice-1", NODE1, "pool-1", DRIVER_A)],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_B, 500), exact("subReq-1", CLASS_A)))],
     None, (), [{r("req-0/subReq-1")}]),
    ("prioritized-list-allocation-mode-all", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1"), device("device-2"))],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 0, mode=ALL), exact("subReq-1", CLASS_A)))],
     None, ((DRIVER_A, "pool-1", "device-2"),), [{r("req-0/subReq-1")}]),
    ("prioritized-list-allocation-mode-all-with-selectors", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", None, {"generation": "v5"}))],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 0, f'{GEN} == "v6"', mode=ALL),
                                       exact("subReq-1", CLASS_A, 0, f'{GEN} == "v5"', mode=ALL)))],
     None, (), [{r("req-0/subReq-1")}]),
    ("prioritized-list-allocation-mode-all-with-selectors-multiple-pools", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", None, {"generation": "v5"})),
      slice_("slice-2", NODE1, "pool-2", DRIVER_A, device("device-1", None, {"generation": "v5"}))],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 0, f'{GEN} == "v6"', mode=ALL),
                                       exact("subReq-1", CLASS_A, 0, f'{GEN} == "v5"', mode=ALL)))],
     None, (), [{r("req-0/subReq-1"), r("req-0/subReq-1", pool="pool-2")}]),
    ("prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", None, {"generation": "v5"})),
      slice_("slice-2", NODE2, "pool-2", DRIVER_A, device("device-1", None, {"generation": "v5"}),
             device("device-2", None, {"generation": "v6"}))],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 0, f'{GEN} == "v6"', mode=ALL),
                                       exact("subReq-1", CLASS_A, 0, f'{GEN} == "v5"', mode=ALL)))],
     None, (), [{r("req-0/subReq-1")}]),
    ("prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
     [class_(CLASS_A, DRIVER_A, f'device.attributes["{DRIVER_A}"].selected')],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", None, {"generation": "v6", "selected": False}),
             device("device-2", None, {"generation": "v5", "selected": False}),
             device("device-3", None, {"generation": "v5", "selected": True}))],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 0, f'{GEN} == "v6"', mode=ALL),
                                       exact("subReq-1", CLASS_A, 0, f'{GEN} == "v5"', mode=ALL)))],
     None, (), [{r("req-0/subReq-1", "device-3")}]),
    ("prioritized-list-max-allocation-limit-request", [A],
     [many_devices("slice-1", NODE1, "pool-1", DRIVER_A, ALLOCATION_RESULTS_MAX_SIZE * 2)],
     [claim("claim-0", *(first_available(n, exact("subReq-0", CLASS_A, ALLOCATION_RESULTS_MAX_SIZE),
                                         exact("subReq-1", CLASS_A, ALLOCATION_RESULTS_MAX_SIZE // 2))
                         for n in ("req-0", "req-1")))],
     None, (), [{r("req-0/subReq-1", f"device-{i}") for i in range(16)}
                | {r("req-1/subReq-1", f"device-{i}") for i in range(16, 32)}]),
    ("partitionable-devices-single-device", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, device("device-1", consumes={"counter-set-1": {"memory": "4Gi"}}),
             count=2),
      slice_("slice-2", NODE1, "pool-1", DRIVER_A, count=2, counters=PARTITION)],
     [claim("claim-0", request("req-0", CLASS_A))], None, (), [{r("req-0")}]),
    ("partitionable-devices-prioritized-list", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, counters_dev("device-1", "4Gi"), counters_dev("device-2", "6Gi"),
             counters_dev("device-3", "4Gi"), count=2),
      slice_("slice-2", NODE1, "pool-1", DRIVER_A, count=2, counters=PARTITION)],
     [claim("claim-0", request("req-0", CLASS_A),
            first_available("req-1", exact("subReq-0", CLASS_A, 1, mem_at_least("6Gi")),
                            exact("subReq-1", CLASS_A, 1, mem_at_least("4Gi"))))],
     None, (), [{r("req-0"), r("req-1/subReq-1", "device-3")}]),
    ("partitionable-devices-multiple-devices", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, counters_dev("device-1", "4Gi"), counters_dev("device-2", "6Gi"),
             counters_dev("device-3", "4Gi"), count=2),
      slice_("slice-2", NODE1, "pool-1", DRIVER_A, count=2, counters=PARTITION)],
     [claim("claim-0", request("req-0", CLASS_A), request("req-1", CLASS_A))],
     None, (), [{r("req-0"), r("req-1", "device-3")}]),
    ("partitionable-devices-multiple-counters", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A,
             device("device-1", consumes={"counter-set-1": {"memory": "4Gi", "cpus": "6"},
                                          "counter-set-2": {"cpus": "4", "memory": "2Gi"}}),
             device("device-2", consumes={"counter-set-1": {"memory": "6Gi", "cpus": "4"},
                                          "counter-set-2": {"cpus": "6", "memory": "6Gi"}}),
             device("device-3", consumes={"counter-set-1": {"memory": "4Gi", "cpus": "4"},
                                          "counter-set-2": {"cpus": "4", "memory": "4Gi"}}), count=2),
      slice_("slice-2", NODE1, "pool-1", DRIVER_A, count=2,
             counters={"counter-set-1": {"cpus": "8", "memory": "18Gi"}, "counter-set-2": {"cpus": "12", "memory": "18Gi"}})],
     [claim("claim-0", request("req-0", CLASS_A), request("req-1", CLASS_A))],
     None, (), [{r("req-0", "device-2"), r("req-1", "device-3")}]),
    ("partitionable-devices-no-capacity-available", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A, counters_dev("device-1", "4Gi"), counters_dev("device-2", "16Gi")),
      slice_("slice-2", NODE1, "pool-1", DRIVER_A, counters={"counter-set-1": {"memory": "18Gi"}})],
     [claim("claim-0", request("req-0", CLASS_A))], None, ((DRIVER_A, "pool-1", "device-2"),), None),
    ("partitionable-devices-per-device-node-selection-nodename", [A],
     [slice_("slice-1", PER_DEVICE, "pool-1", DRIVER_A,
             device("device-1", consumes={"counter-set-1": {"memory": "4Gi"}}, from_counters=True, node_name=NODE1),
             device("device-2", consumes={"counter-set-1": {"memory": "6Gi"}}, from_counters=True, node_name=NODE2),
             count=2),
      slice_("slice-2", PER_DEVICE, "pool-1", DRIVER_A, count=2, counters={"counter-set-1": {"memory": "18Gi"}})],
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 1, mem_at_least("6Gi")),
                                       exact("subReq-1", CLASS_A, 1, mem_at_least("4Gi"))))],
     None, (), [{r("req-0/subReq-1")}]),
]


@pytest.mark.parametrize(("name", "classes", "slices", "claims", "at", "allocated", "expect"),
                         CASES, ids=[c[0] for c in CASES])
def test_upstream_allocator_table(name: str, classes: Any, slices: Any, claims: Any, at: Any, allocated: Any,
                                  expect: Any) -> None:
    outcome = run(classes, slices, claims, at, allocated)
    if isinstance(expect, str):
        assert outcome.error, outcome
        assert expect in outcome.reason
        return
    assert not outcome.error, outcome.reason
    assert results(outcome) == expect, outcome.reason


def test_many_network_attached_devices_node_selector_is_the_union() -> None:
    """allocator_testing.go "many-network-attached-devices": the allocation's node selector is the
    union of the slices' selectors."""
    case = next(c for c in CASES if c[0] == "many-network-attached-devices")
    outcome = run(*case[1:6])
    assert outcome.allocations is not None
    (term,) = outcome.allocations[0].node_selector or ()
    assert set(term) == {SelectorRequirement("region", "In", (REGION1,)), SelectorRequirement("planet", "In", ("earth",)),
                         SelectorRequirement("metadata.name", "In", (NODE1,), field=True)}


def test_local_and_network_attached_devices_pin_the_node() -> None:
    """allocator_testing.go "local-and-network-attached-devices": any node-local device pins the node."""
    case = next(c for c in CASES if c[0] == "local-and-network-attached-devices")
    outcome = run(*case[1:6])
    assert outcome.allocations is not None
    assert outcome.allocations[0].node_selector == local(NODE1)
