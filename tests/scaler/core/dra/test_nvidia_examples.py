"""NVIDIA slices built for a template node, allocated with the driver's own example claims
(../shared/dra/examples, k8s-dra-driver-gpu v25.8.1 quickstart)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from dra_builders import a100_40gb_profile

from scaler.core.dra import convert, nvidia
from scaler.core.dra.allocator import Allocator, NodeRef
from scaler.core.model.dra import ResourceClaim

EXAMPLES = Path(__file__).resolve().parents[4] / ".." / "shared" / "dra" / "examples"
H100 = nvidia.GpuModel("NVIDIA H100 80GB HBM3", "Hopper", 80 * 2**30, "9.0", count=8)
A100_MIG = nvidia.GpuModel(
    "NVIDIA A100-SXM4-40GB", "Ampere", 40 * 2**30, "8.0", count=1,
    mig=(a100_40gb_profile("1g.5gb", 0), a100_40gb_profile("1g.5gb", 1),
         a100_40gb_profile("2g.10gb", 2), a100_40gb_profile("3g.20gb", 4)))


def claims_from(name: str) -> list[ResourceClaim]:
    path = EXAMPLES / name
    if not path.exists():
        pytest.skip(f"{path} is not here (shared/ sits beside the repository)")
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    out = []
    for d in docs:
        if d["kind"] == "ResourceClaimTemplate":
            t = convert.resource_claim_template(d)
            out.append(ResourceClaim(t.namespace, f"{t.name}-0", t.spec))
        elif d["kind"] == "ResourceClaim":
            out.append(convert.resource_claim(d))
    return out


def allocate(gpu: nvidia.GpuModel, claims: list[ResourceClaim]) -> list[set[str]] | str:
    alloc = Allocator(nvidia.DEVICE_CLASSES, nvidia.node_slices("n1", gpu))
    outcome = alloc.allocate(NodeRef("n1"), claims)
    if outcome.allocations is None:
        return outcome.reason
    return [{r.device for r in a.results} for a in outcome.allocations]


def test_gpu_test1_single_gpu_from_template() -> None:
    assert allocate(H100, claims_from("gpu-test1.yaml")) == [{"gpu-0"}]


def test_gpu_test4_mig_devices_on_a_mig_gpu() -> None:
    got = allocate(A100_MIG, claims_from("gpu-test4.yaml"))
    assert got == [{"gpu-0-mig-19-0-1", "gpu-0-mig-19-1-1", "gpu-0-mig-14-2-2", "gpu-0-mig-9-4-4"}]


def test_mig_claim_does_not_fit_whole_gpus() -> None:
    assert isinstance(allocate(H100, claims_from("gpu-test4.yaml")), str)


def test_whole_gpu_slice_attributes_and_memory_selector() -> None:
    (s,) = nvidia.node_slices("n1", H100)
    assert [d.name for d in s.devices] == [f"gpu-{i}" for i in range(8)]
    big = ResourceClaim("ml", "c", convert.resource_claim({"metadata": {"name": "c", "namespace": "ml"}, "spec": {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2,
            "selectors": [{"cel": {"expression":
                "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0 && "
                "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))"}}]}}],
                    "constraints": [{"matchAttribute": "gpu.nvidia.com/productName"}]}}}).spec)
    assert allocate(H100, [big]) == [{"gpu-0", "gpu-1"}]


def test_overlapping_mig_placements_exclude_each_other() -> None:
    """Two placements on the same memory slices: the shared counters let only one be allocated."""
    gpu = nvidia.GpuModel("NVIDIA A100-SXM4-40GB", "Ampere", 40 * 2**30, "8.0",
                          mig=(a100_40gb_profile("3g.20gb", 4), a100_40gb_profile("4g.20gb", 4)))
    one = {"name": "m", "exactly": {"deviceClassName": "mig.nvidia.com"}}
    claim = convert.resource_claim({"metadata": {"name": "c"}, "spec": {"devices": {"requests": [one]}}})
    two = convert.resource_claim({"metadata": {"name": "c"}, "spec": {"devices": {"requests": [
        one, {**one, "name": "n"}]}}})
    assert allocate(gpu, [claim]) == [{"gpu-0-mig-9-4-4"}]
    assert isinstance(allocate(gpu, [two]), str)


def test_mig_counters_are_published_in_a_slice_of_their_own() -> None:
    """resource.k8s.io/v1 (1.35+) refuses a slice with both `sharedCounters` and `devices`
    (pkg/apis/resource/validation/validation.go): the counter sets get a slice of their own in the same
    pool, which then counts two slices; the MIG devices still consume them across slices."""
    counters, devices = nvidia.node_slices("n1", A100_MIG)
    assert counters.shared_counters and not counters.devices
    assert devices.devices and not devices.shared_counters
    assert counters.pool == devices.pool and devices.pool.resource_slice_count == 2
    assert {c.counter_set for d in devices.devices for c in d.consumes_counters} <= {
        s.name for s in counters.shared_counters}
    assert allocate(A100_MIG, claims_from("gpu-test4.yaml"))  # still allocated across the two slices
    # Counter names are DNS labels (resource.k8s.io/v1 validation); capacity names may be camelCase.
    names = {name for s in counters.shared_counters for name in s.counters}
    assert names == {f"memory-slice-{i}" for i in range(8)}
