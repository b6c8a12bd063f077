# ruff: noqa: E501 - one table row per upstream case reads best on one line each
"""Device taints and tolerations in the allocator, ported from kubernetes/kubernetes
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go
(v0.37.2), TestAllocator's cases named below with DeviceTaints on (GA in 1.37: the "-disabled" cases are
not ported, nor "tainted-admin-access", adminAccess not being modelled). The taints and tolerations are
upstream's: taintNoSchedule (taint-key=taint-value:NoSchedule), taintNoExecute (taint-key=taint-value-2:
NoExecute), taintNone, tolerationNoSchedule (Exists taint-key NoSchedule), tolerationNoExecute (Equal
taint-key=taint-value-2 NoExecute)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from dra_builders import (
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    all_request,
    claim,
    class_,
    device,
    exact,
    first_available,
    request,
    results,
    run,
    slice_,
)

from scaler.core.model.dra import Device, DeviceRequest, DeviceTaint, DeviceToleration

A, B = class_(CLASS_A, DRIVER_A), class_(CLASS_B, DRIVER_B)
NO_SCHEDULE = DeviceTaint("taint-key", "taint-value", "NoSchedule")
NO_EXECUTE = DeviceTaint("taint-key", "taint-value-2", "NoExecute")
NONE = DeviceTaint("taint-key", "taint-value", "None")
TOL_NO_SCHEDULE = DeviceToleration("taint-key", "Exists", "", "NoSchedule")
TOL_NO_EXECUTE = DeviceToleration("taint-key", "Equal", "taint-value-2", "NoExecute")


def tainted(name: str, *taints: DeviceTaint, **kw: Any) -> Device:
    return dataclasses.replace(device(name, **kw), taints=taints)


def tolerating(req: DeviceRequest, *tolerations: DeviceToleration) -> DeviceRequest:
    assert req.exactly is not None
    return dataclasses.replace(req, exactly=dataclasses.replace(req.exactly, tolerations=tolerations))


def r(req: str, dev: str = "device-1", pool: str = "pool-1", driver: str = DRIVER_A) -> tuple[str, str, str, str]:
    return (req, driver, pool, dev)


def on_node1(*devices: Device) -> list[Any]:
    return [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices)]


CASES: list[Any] = [
    ("tainted-two-devices", [A], on_node1(tainted("device-1", NO_SCHEDULE), tainted("device-2", NO_EXECUTE)),
     [claim("claim-0", request("req-0", CLASS_A))], None),
    ("tainted-one-device-two-taints", [A], on_node1(tainted("device-1", NO_SCHEDULE, NO_EXECUTE)),
     [claim("claim-0", request("req-0", CLASS_A))], None),
    ("tainted-two-devices-tolerated", [A], on_node1(tainted("device-1", NO_SCHEDULE), tainted("device-2", NO_EXECUTE)),
     [claim("claim-0", tolerating(request("req-0", CLASS_A), TOL_NO_EXECUTE))], [{r("req-0", "device-2")}]),
    ("tainted-two-devices-prioritized-list-tolerated", [A],
     on_node1(tainted("device-1", NO_SCHEDULE), tainted("device-2", NO_EXECUTE)),
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_A, 1),
                                       dataclasses.replace(exact("subReq-1", CLASS_A, 1), tolerations=(TOL_NO_EXECUTE,))))],
     [{r("req-0/subReq-1", "device-2")}]),
    ("tainted-no-effect", [A], on_node1(tainted("device-1", NONE)),
     [claim("claim-0", request("req-0", CLASS_A))], [{r("req-0")}]),
    ("tainted-one-device-two-taints-both-tolerated", [A], on_node1(tainted("device-1", NO_SCHEDULE, NO_EXECUTE)),
     [claim("claim-0", tolerating(request("req-0", CLASS_A), TOL_NO_SCHEDULE, TOL_NO_EXECUTE))], [{r("req-0")}]),
    ("tainted-prioritized-list", [A, B], on_node1(tainted("device-1", NO_SCHEDULE)),
     [claim("claim-0", first_available("req-0", exact("subReq-0", CLASS_B, 1), exact("subReq-1", CLASS_A, 1)))], None),
    ("tainted-all-devices-single", [A], on_node1(tainted("device-1", NO_SCHEDULE)),
     [claim("claim-0", all_request("req-0", CLASS_A))], None),
    # device-1 is refused by its taint; its counter stays free for device-2
    ("partitionable-devices-taint-releases-counter", [A],
     [slice_("slice-1", NODE1, "pool-1", DRIVER_A,
             tainted("device-1", NO_SCHEDULE, consumes={"counter-set-1": {"c": "1"}}),
             device("device-2", consumes={"counter-set-1": {"c": "1"}}), count=2),
      slice_("slice-2", NODE1, "pool-1", DRIVER_A, count=2, counters={"counter-set-1": {"c": "1"}})],
     [claim("claim-0", request("req-0", CLASS_A))], [{r("req-0", "device-2")}]),
]


@pytest.mark.parametrize(("name", "classes", "slices", "claims", "expect"), CASES, ids=[c[0] for c in CASES])
def test_upstream_taint_cases(name: str, classes: Any, slices: Any, claims: Any, expect: Any) -> None:
    outcome = run(classes, slices, claims)
    assert not outcome.error, outcome.reason
    assert results(outcome) == expect, outcome.reason


def test_all_mode_with_one_tainted_device_of_two_allocates_nothing() -> None:
    """Beyond upstream's table, as its allocateDevice decides: "All" must take every matching device, and a
    tainted one cannot be taken, so the claim does not allocate (not the untainted device alone)."""
    outcome = run([A], on_node1(tainted("device-1", NO_SCHEDULE), device("device-2")),
                  [claim("claim-0", all_request("req-0", CLASS_A))])
    assert outcome.allocations is None
    assert "tainted" in outcome.reason
