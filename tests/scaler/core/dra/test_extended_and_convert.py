"""DeviceClass extendedResourceName (dynamicresources plugin behaviour) and the JSON converters' errors."""

from __future__ import annotations

import pytest

from scaler.core.dra import convert, nvidia
from scaler.core.dra.allocator import Allocator, NodeRef
from scaler.core.dra.extended import extended_resource_claim
from scaler.core.model.dra import DeviceClass

H100 = nvidia.GpuModel("NVIDIA H100 80GB HBM3", "Hopper", 80 * 2**30, "9.0", count=8)
# A cluster's own GPU class that serves nvidia.com/gpu (the 25.8.1 chart's declares no extendedResourceName).
SERVING = (DeviceClass(nvidia.DRIVER, nvidia.GPU_CLASS.selectors, extended_resource_name="nvidia.com/gpu"),
           nvidia.MIG_CLASS)


def test_nvidia_gpu_request_is_served_by_the_gpu_class_on_a_dra_node() -> None:
    claim = extended_resource_claim("ml/p", {"nvidia.com/gpu": 2, "cpu": 4000}, {"cpu": 96000}, SERVING)
    assert claim is not None
    outcome = Allocator(SERVING, nvidia.node_slices("n1", H100)).allocate(NodeRef("n1"), [claim])
    assert outcome.allocations is not None
    assert {r.device for r in outcome.allocations[0].results} == {"gpu-0", "gpu-1"}


def test_device_plugin_node_keeps_its_extended_resource() -> None:
    assert extended_resource_claim("ml/p", {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 8}, SERVING) is None


def test_the_charts_classes_serve_no_extended_resource() -> None:
    # nvidia-dra-driver-gpu 25.8.1: an nvidia.com/gpu pod is never served on a DRA node by the chart's classes
    assert extended_resource_claim("ml/p", {"nvidia.com/gpu": 1}, {"cpu": 96000}, nvidia.DEVICE_CLASSES) is None


def test_too_many_gpus_is_a_reason_not_an_error() -> None:
    claim = extended_resource_claim("ml/p", {"nvidia.com/gpu": 9}, {}, SERVING)
    assert claim is not None
    outcome = Allocator(SERVING, nvidia.node_slices("n1", H100)).allocate(NodeRef("n1"), [claim])
    assert not outcome.ok and not outcome.error
    assert "needs 9 device(s) of class gpu.nvidia.com, 8 match on the node, 8 of them free" in outcome.reason


def test_selector_that_does_not_compile_is_refused_on_reading_in_one_line() -> None:
    # as the API server validates it: the object is bad input (plan --snapshot: exit 2; the live cache
    # skips it with a Warning Event), not a pass that fails later
    spec = {"selectors": [{"cel": {"expression": "device.x ="}}]}
    with pytest.raises(convert.DraInputError) as err:
        convert.device_class({"metadata": {"name": "broken"}, "spec": spec})
    assert str(err.value).startswith("DeviceClass broken: spec.selectors[0].cel.expression: CEL compile error: ")
    assert "\n" not in str(err.value)
    template = {"metadata": {"name": "t", "namespace": "ml"}, "spec": {"spec": {"devices": {"requests": [
        {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": spec["selectors"]}}]}}}}
    with pytest.raises(convert.DraInputError, match=r"^ResourceClaimTemplate ml/t: .*CEL compile error"):
        convert.resource_claim_template(template)


def test_selector_that_does_not_compile_names_class_and_expression() -> None:
    bad = DeviceClass("broken", ("device.x =",))  # built without convert (its check is above)
    claim = extended_resource_claim("ml/p", {"deviceclass.resource.kubernetes.io/broken": 1}, {}, [bad])
    assert claim is not None
    outcome = Allocator([bad], nvidia.node_slices("n1", H100)).allocate(NodeRef("n1"), [claim])
    assert outcome.error and "class broken: selector #0 (device.x =): CEL compile error" in outcome.reason


@pytest.mark.parametrize(("obj", "message"), [
    ({"metadata": {"name": "c", "namespace": "ml"}, "spec": {"devices": {"requests": [{"name": "g"}]}}},
     "ResourceClaim ml/c: spec.devices.requests[0]: exactly one of exactly and firstAvailable must be set"),
    ({"metadata": {"name": "c", "namespace": "ml"}, "spec": {"devices": {"requests": [
        {"name": "g", "exactly": {"deviceClassName": "x", "count": "two"}}]}}},
     "ResourceClaim ml/c: spec.devices.requests[0].exactly.count: expected int, got 'two'"),
])
def test_claim_errors_name_object_and_field(obj: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(convert.DraInputError) as err:
        convert.resource_claim(obj)
    assert str(err.value) == message


def test_slice_errors_name_object_and_field() -> None:
    obj = {"metadata": {"name": "s"}, "spec": {"driver": "d", "pool": {"name": "p"}, "nodeName": "n",
           "devices": [{"name": "x", "capacity": {"memory": {"value": "lots"}}}]}}
    with pytest.raises(convert.DraInputError, match=r"ResourceSlice s: spec.devices\[0\].capacity\[memory\].value"):
        convert.resource_slice(obj)
