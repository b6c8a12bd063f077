"""The `--mix dra` snapshot of bench/plan_scale.py: the same cluster with every GPU pool
`gpu_allocation: dra` and every GPU pod asking through a ResourceClaim (issue 24).

`to_dra` turns the plain snapshot into it: a GPU pool's node loses nvidia.com/gpu from its allocatable
and publishes the NVIDIA driver's slice (the one its pool's template carries), each running GPU pod holds
an allocated claim of its own on that node's first free GPUs, and each pending GPU pod (gangs included)
asks for its N GPUs through the ResourceClaimTemplate `gpu-N` of its namespace (class gpu.nvidia.com).
Device taints (issue 39): on every tenth DRA node the last GPU carries the NVIDIA driver's health taint
(`gpu.nvidia.com/xid`, NoSchedule), and every tenth pending GPU pod asks through `gpu-N-tolerant`, whose
request tolerates it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.dra.nvidia import DEVICE_CLASSES, DRIVER, GPU_CLASS
from scaler.core.model import keys
from scaler.core.model.dra import (
    Allocation,
    ClaimSpec,
    DeviceRequest,
    DeviceResult,
    DeviceTaint,
    DeviceToleration,
    DraObjects,
    ExactRequest,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from scaler.core.model.objects import Node, Pod, PodResourceClaim, SelectorRequirement
from scaler.core.planning.snapshot import PoolObservation, Snapshot

COUNTS = (1, 2, 4, 8)
XID = DeviceTaint("gpu.nvidia.com/xid", "79", "NoSchedule")
TOLERATE = (DeviceToleration("gpu.nvidia.com/xid", "Exists"),)


def dra_config(pools: list[dict[str, Any]]) -> ScalerConfig:
    dra = [{**p, "gpu_allocation": "dra"} if p.get("role", "gpu") == "gpu" else p for p in pools]
    return parse_config({"cluster": "bench", "cloud": "aws", "region": "us-east-1", "pools": dra,
                         "limits": {"max_nodes_per_pass": 100000}}, "bench")


def _spec(n: int, tolerant: bool = False) -> ClaimSpec:
    exact = ExactRequest("gpu", GPU_CLASS.name, count=n, tolerations=TOLERATE if tolerant else ())
    return ClaimSpec((DeviceRequest("gpu", exact),))


def _tainted(slices: tuple[ResourceSlice, ...]) -> list[ResourceSlice]:
    """The node's slices with its last GPU tainted."""
    out = list(slices)
    last = out[-1]
    devices = (*last.devices[:-1], dataclasses.replace(last.devices[-1], taints=(XID,)))
    out[-1] = dataclasses.replace(last, devices=devices)
    return out


def _no_gpu(pod: Pod) -> dict[str, int]:
    return {r: v for r, v in pod.requests.items() if r != keys.RES_GPU}


def _node(node: Node, cfg: ScalerConfig, objects: DraObjects, i: int) -> Node:
    pool = next(p for p in cfg.pools if p.name == node.pool)
    if not pool.dra:
        return node
    slices = pool.dra_slices(node.name)
    objects.slices.extend(_tainted(slices) if i % 10 == 0 else slices)
    pinned = ((SelectorRequirement("metadata.name", "In", (node.name,), field=True),),)
    pods, used = [], 0
    for p in node.pods:
        n = p.requests.get(keys.RES_GPU, 0)
        if n <= 0:
            pods.append(p)
            continue
        results = tuple(DeviceResult("gpu", DRIVER, node.name, f"gpu-{k}") for k in range(used, used + n))
        used += n
        claim = ResourceClaim(p.namespace, f"{p.name}-gpu", _spec(n), Allocation(results, pinned), (p.name,))
        objects.claims[claim.key] = claim
        pods.append(dataclasses.replace(p, requests=_no_gpu(p),
                                        resource_claims=(PodResourceClaim("gpu", claim_name=claim.name),)))
    allocatable = {r: v for r, v in node.allocatable.items() if r != keys.RES_GPU}
    labels = {**node.labels, keys.LABEL_GPU_ALLOCATION: keys.GPU_ALLOCATION_DRA}
    return dataclasses.replace(node, labels=labels, allocatable=allocatable, pods=pods)


def _pending(pod: Pod, tolerant: bool) -> Pod:
    n = pod.requests.get(keys.RES_GPU, 0)
    if n <= 0:
        return pod
    name = f"gpu-{n}-tolerant" if tolerant else f"gpu-{n}"
    return dataclasses.replace(pod, requests=_no_gpu(pod),
                               resource_claims=(PodResourceClaim("gpu", template_name=name),))


def to_dra(snap: Snapshot, cfg: ScalerConfig) -> Snapshot:
    """The plain snapshot (built with the same pools, device-plugin) as a DRA cluster of `cfg`."""
    namespaces = {p.namespace for p in snap.pending} | {p.namespace for n in snap.nodes for p in n.pods}
    objects = DraObjects(classes={c.name: c for c in DEVICE_CLASSES}, templates={
        f"{ns}/gpu-{n}{t}": ResourceClaimTemplate(ns, f"gpu-{n}{t}", _spec(n, bool(t)))
        for ns in namespaces for n in COUNTS for t in ("", "-tolerant")})
    nodes = [_node(n, cfg, objects, i) for i, n in enumerate(snap.nodes)]
    # every tenth GPU pod tolerant, the pods kept in their order
    gpu = [p for p in snap.pending if p.requests.get(keys.RES_GPU, 0) > 0]
    tolerant = {id(p) for p in gpu[::10]}
    pools = {p.name: PoolObservation(p, snap.pools[p.name].desired, snap.pools[p.name].instances) for p in cfg.pools}
    pending = [_pending(p, id(p) in tolerant) for p in snap.pending]
    return dataclasses.replace(snap, nodes=nodes, pending=pending, pools=pools, dra=objects)
