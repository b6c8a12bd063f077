"""Scale-down's count of the GPUs a DRA node's pods hold (`scaler.core.planning.dra_use`): MIG devices
carved from one GPU busy that GPU once; a shared claim counts once; a finished pod holds nothing."""

from __future__ import annotations

from scaler.core.dra.model import Allocation, ClaimSpec, DeviceResult, ResourceClaim
from scaler.core.dra.nvidia import DRIVER, GpuModel, a100_40gb_profile, node_slices
from scaler.core.model.objects import Pod, PodResourceClaim
from scaler.core.planning.dra_use import DraUse
from scaler.core.scheduling.filters import DraObjects

A100 = GpuModel("NVIDIA A100-SXM4-40GB", "Ampere", 40 * 2**30, "8.0", count=2,
                mig=(a100_40gb_profile("3g.20gb", 0), a100_40gb_profile("3g.20gb", 4)))
NODE = "node-1"


def _world(holds: dict[str, tuple[str, ...]]) -> DraObjects:
    objects = DraObjects(slices=list(node_slices(NODE, A100)))
    for name, devices in holds.items():
        results = tuple(DeviceResult("gpu", DRIVER, NODE, d) for d in devices)
        objects.claims[f"ml/{name}"] = ResourceClaim("ml", name, ClaimSpec(()), Allocation(results, ()))
    return objects


def _pod(name: str, claim: str, phase: str = "Running") -> Pod:
    return Pod(name=name, namespace="ml", node_name=NODE, phase=phase,
               resource_claims=(PodResourceClaim("gpu", claim_name=claim),))


def test_mig_devices_of_one_gpu_busy_it_once() -> None:
    devices = [d.name for s in node_slices(NODE, A100) for d in s.devices]
    gpu0 = [d for d in devices if d.startswith("gpu-0-")]
    gpu1 = [d for d in devices if d.startswith("gpu-1-")]
    use = DraUse(_world({"a": (gpu0[0],), "b": (gpu0[1],), "c": (gpu1[0],)}))
    assert use.gpus_in_use([_pod("p", "a"), _pod("q", "b")]) == 1
    assert use.gpus_in_use([_pod("p", "a"), _pod("r", "c")]) == 2
    assert use.gpus_in_use([_pod("p", "a"), _pod("p2", "a"), _pod("q", "b", phase="Succeeded")]) == 1
