"""Scale-down's count of the GPUs a DRA node's pods hold (`scaler.core.planning.dra_use`): MIG devices
carved from one GPU busy that GPU once; a shared claim counts once; a finished pod holds nothing."""

from __future__ import annotations

from scaler.core.dra.nvidia import DRIVER, GpuModel, MigInstance, node_slices
from scaler.core.model.dra import Allocation, ClaimSpec, DeviceResult, DraObjects, ResourceClaim
from scaler.core.model.objects import Pod, PodResourceClaim
from scaler.core.planning.dra_use import DraUse

HALF = {"profile_id": 9, "size": 4, "memory": 20 * 2**30, "multiprocessors": 42, "decoders": 2}  # A100 40GB 3g.20gb
A100 = GpuModel("NVIDIA A100-SXM4-40GB", "Ampere", 40 * 2**30, "8.0", count=2,
                mig=(MigInstance("3g.20gb", start=0, **HALF), MigInstance("3g.20gb", start=4, **HALF)))
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
