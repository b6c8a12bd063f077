"""Builds examples/snapshot-aws-dra-shared.json (`python tests/scaler/sim/dra_shared_snapshot.py > examples/...`):
a kubectl List with one running node of the `l4-shared` pool (examples/pools-aws-dra-shared.yaml) whose L4 is
shared by memory (allowMultipleAllocations, consumable capacity), one running pod holding a 12 GiB share of
it, and pending pods each claiming a 4 GiB share: two fit beside it, the rest get new nodes, five per GPU."""

from __future__ import annotations

import json
from typing import Any

from dra_snapshot import T, classes, exactly, node, pod, slice_, template

NODE = "ip-10-0-1-20.ec2.internal"
GiB = 2**30
L4 = 23034 * 2**20  # the L4's memory as NVML reports it


def shared_slice() -> dict[str, Any]:
    """The node's slice as a driver sharing GPUs by memory publishes it (4 GiB steps, the pool's)."""
    out = slice_()
    dev = out["spec"]["devices"][0]
    dev["allowMultipleAllocations"] = True
    dev["capacity"]["memory"]["requestPolicy"] = {
        "default": str(L4 // (4 * GiB) * 4 * GiB), "validRange": {"min": "4Gi", "step": "4Gi"}}
    return out


def shared_node() -> dict[str, Any]:
    out = node()
    out["metadata"]["labels"].update({"gpuburst.io/pool": "l4-shared", "gpuburst.io/gpu-memory-step-gib": "4"})
    return out


def held_claim(name: str, memory: str) -> dict[str, Any]:
    """An allocated claim holding a share of the node's GPU (status as kube-scheduler writes it)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml", "creationTimestamp": T},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                **exactly("gpu.nvidia.com"), "capacity": {"requests": {"memory": memory}}}}]}},
            "status": {"allocation": {
                "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0",
                                         "shareID": "6a1f0c4e-7d55-4b53-9d8e-2f4a1b3c5d6e",
                                         "consumedCapacity": {"memory": memory}}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}},
                "reservedFor": [{"resource": "pods", "name": "holder", "uid": "uid-holder"}]}}


def small(out: dict[str, Any]) -> dict[str, Any]:
    """A pod of an inference server: half a CPU, 2 GiB (five fit a g6.xlarge beside its daemons)."""
    out["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "500m", "memory": "2Gi"}
    return out


def running(name: str, claim: str) -> dict[str, Any]:
    out = small(pod(name, {"gpu": f"claim:{claim}"}))
    out["spec"]["nodeName"] = NODE
    out["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return out


def snapshot(pending: int = 7, held: str | None = "12Gi") -> dict[str, Any]:
    share = template("gpu-4gi", [{"name": "gpu", "exactly": {
        **exactly("gpu.nvidia.com"), "capacity": {"requests": {"memory": "4Gi"}}}}])
    items: list[dict[str, Any]] = [*classes(), share]
    if held is not None:
        items += [shared_node(), shared_slice(), held_claim("holder-gpu", held), running("holder", "holder-gpu")]
    items += [small(pod(f"share-{i}", {"gpu": "gpu-4gi"}, minute=i)) for i in range(pending)]
    return {"apiVersion": "v1", "kind": "List", "items": items}


if __name__ == "__main__":
    print(json.dumps(snapshot(), indent=1))
