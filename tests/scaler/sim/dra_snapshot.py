"""Builds examples/snapshot-aws-dra.json (`python tests/scaler/sim/dra_snapshot.py > examples/...`): a
kubectl List with one registered L4 DRA node (its slice published), the NVIDIA chart's DeviceClasses and
pending pods asking for GPUs through ResourceClaims, one per acceptance case of issue 24."""

from __future__ import annotations

import json
from typing import Any

T = "2026-11-20T10:00:00Z"
GPU_TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
H100 = "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"
MEM = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{}')) >= 0"


def cel(expr: str) -> dict[str, Any]:
    return {"cel": {"expression": expr}}


def template(name: str, requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None) -> dict:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "ml", "creationTimestamp": T},
            "spec": {"spec": {"devices": devices}}}


def exactly(cls: str, count: int = 1, *selectors: str) -> dict[str, Any]:
    return {"deviceClassName": cls, "count": count, "selectors": [cel(s) for s in selectors]}


def pod(name: str, claims: dict[str, str] | None = None, limits: dict[str, str] | None = None,
        tolerate: bool = True, minute: int = 0) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "2", "memory": "8Gi"}}
    if limits:
        resources["limits"] = limits
    if claims:
        resources["claims"] = [{"name": k} for k in claims]
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x", "resources": resources}]}
    if claims:
        spec["resourceClaims"] = [{"name": k, ("resourceClaimName" if v.startswith("claim:") else
                                               "resourceClaimTemplateName"): v.removeprefix("claim:")}
                                  for k, v in claims.items()]
    if tolerate:
        spec["tolerations"] = GPU_TOL
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "ml", "uid": f"uid-{name}",
        "creationTimestamp": f"2026-11-20T09:{minute:02d}:00Z",
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "u", "controller": True}]},
        "spec": spec, "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}


def node() -> dict[str, Any]:
    name = "ip-10-0-1-20.ec2.internal"
    labels = {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
              "node.kubernetes.io/instance-type": "g6.xlarge",
              "topology.kubernetes.io/zone": "us-east-1a", "kubernetes.io/hostname": name,
              "gpuburst.io/pool": "l4-dra", "gpuburst.io/capacity-type": "on-demand", "gpuburst.io/role": "gpu",
              "gpuburst.io/gpu-allocation": "dra"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels, "creationTimestamp": T},
            "spec": {"providerID": "aws:///us-east-1a/i-0dra", "taints": [
                {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "3920m", "memory": "14Gi", "ephemeral-storage": "90Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def slice_() -> dict[str, Any]:
    name = "ip-10-0-1-20.ec2.internal"
    attrs = {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA L4"},
             "architecture": {"string": "Ada Lovelace"},
             "brand": {"string": "Nvidia"}, "uuid": {"string": "GPU-1"}, "cudaComputeCapability": {"version": "8.9.0"},
             "driverVersion": {"version": "580.82.7"}, "cudaDriverVersion": {"version": "13.0.0"}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{name}-gpu.nvidia.com", "creationTimestamp": T},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0", "attributes": attrs, "capacity": {"memory": {"value": "23034Mi"}}}]}}


def classes() -> list[dict[str, Any]]:
    def cls(name: str, kind: str, ext: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"selectors": [cel(f"device.driver == 'gpu.nvidia.com' && "
                                                  f"device.attributes['gpu.nvidia.com'].type == '{kind}'")]}
        if ext:
            spec["extendedResourceName"] = ext
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}
    return [cls("gpu.nvidia.com", "gpu", "nvidia.com/gpu"), cls("mig.nvidia.com", "mig")]


def snapshot() -> dict[str, Any]:
    items = [node(), slice_(), *classes(),
             template("one-gpu", [{"name": "gpu", "exactly": exactly("gpu.nvidia.com")}]),
             template("gpu-40gi", [{"name": "gpu", "exactly": exactly("gpu.nvidia.com", 1, MEM.format("40Gi"))}]),
             template("mig-1g5gb", [{"name": "mig", "exactly": exactly(
                 "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'")}]),
             template("two-alike", [{"name": "gpus", "exactly": exactly("gpu.nvidia.com", 2)}],
                      [{"matchAttribute": "gpu.nvidia.com/productName"}]),
             template("h100-else-20gi", [{"name": "gpu", "firstAvailable": [
                 {"name": "h100", **exactly("gpu.nvidia.com", 1, H100)},
                 {"name": "big", **exactly("gpu.nvidia.com", 1, MEM.format("20Gi"))}]}]),
             template("no-class", [{"name": "gpu", "exactly": exactly("tpu.example.com")}]),
             pod("whole-gpu-0", {"gpu": "one-gpu"}, minute=1),
             pod("memory-40gi-0", {"gpu": "gpu-40gi"}, minute=2),
             pod("mig-1g5gb-0", {"mig": "mig-1g5gb"}, minute=3),
             pod("two-gpus-0", {"gpus": "two-alike"}, minute=4),
             pod("first-available-0", {"gpu": "h100-else-20gi"}, minute=5),
             pod("plugin-gpu-0", limits={"nvidia.com/gpu": "1"}, minute=6),
             pod("missing-class-0", {"gpu": "no-class"}, minute=7),
             pod("missing-claim-0", {"gpu": "claim:nowhere"}, minute=8),
             pod("cpu-0", tolerate=False, minute=9)]
    return {"apiVersion": "v1", "kind": "List", "items": items}


if __name__ == "__main__":
    print(json.dumps(snapshot(), indent=1))
