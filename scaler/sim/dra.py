"""`simulate --dra`: the trace on DRA GPU pools (issue 24). Every GPU pool of the pools file is
`gpu_allocation: dra`; each job's pods ask for their GPUs through the ResourceClaimTemplate `gpu-N`
(class gpu.nvidia.com, N whole GPUs) instead of `nvidia.com/gpu`; a node publishes the NVIDIA
driver's slice (its pool's template slice) when it registers; the scheduler (`Binder`) allocates
claims with the planner's DRA filter; the scaler sees what a live cluster shows: the slices, and one
allocated ResourceClaim per running pod (`status.resourceClaimStatuses` names it).

With `--gpu-sharing` a job of a GPU share that the sharing model puts on a MIG mixed or dynamic pool's slice
(`nvidia.com/mig-<profile>`, scaler.sim.trace.share_request) asks instead for one device of class
mig.nvidia.com through the template `mig-<profile>`, whose selector names the profile: the same slice,
allocated by the DRA driver's rules (a slice sits on memory slices of its GPU: the counters).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from scaler.configfile import load_config, read_text
from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.dra.nvidia import DEVICE_CLASSES, DRIVER, GPU_CLASS, MIG_CLASS
from scaler.core.model import keys
from scaler.core.model.dra import (
    Allocation,
    ClaimSpec,
    DeviceRequest,
    DeviceResult,
    DraObjects,
    ExactRequest,
    ResourceClaim,
    ResourceClaimTemplate,
)
from scaler.core.model.objects import Node, Pod, PodResourceClaim, SelectorRequirement
from scaler.core.scheduling.filters import DraState

CLAIM = "gpu"  # the pod's claim name


def dra_config(path: str) -> ScalerConfig:
    """The pools file with every GPU pool `gpu_allocation: dra` (those that time-slice stay as they are)."""
    load_config(path)  # bad input is reported as for any pools file
    data: dict[str, Any] = yaml.safe_load(read_text(Path(path)))
    for pool in data.get("pools", []):
        sharing = pool.get("gpu_sharing") or {}
        if pool.get("role", "gpu") == "gpu" and not sharing.get("time_slicing"):
            pool["gpu_allocation"] = "dra"
    return parse_config(data, path)


def _spec(n: int) -> ClaimSpec:
    return ClaimSpec((DeviceRequest(CLAIM, ExactRequest(CLAIM, GPU_CLASS.name, count=n)),))


def _mig_spec(profile: str) -> ClaimSpec:
    selector = f"device.attributes['{DRIVER}'].profile == '{profile}'"
    return ClaimSpec((DeviceRequest(CLAIM, ExactRequest(CLAIM, MIG_CLASS.name, count=1, selectors=(selector,))),))


def on_claims(pod: Pod) -> Pod:
    """The pod asking for its GPUs through the template gpu-N of its namespace, or for its MIG slice
    through mig-<profile>."""
    for res, n in pod.requests.items():
        if res == keys.RES_GPU and n > 0:
            template = f"gpu-{n}"
        elif res.startswith(keys.MIG_RESOURCE_PREFIX) and n == 1:
            template = f"mig-{res.removeprefix(keys.MIG_RESOURCE_PREFIX)}"
        else:
            continue
        return dataclasses.replace(pod, requests={r: v for r, v in pod.requests.items() if r != res},
                                   resource_claims=(PodResourceClaim(CLAIM, template_name=template),))
    return pod


class SimDra:
    """The DRA objects of the simulated cluster, and the scheduler's allocations."""

    def __init__(self, config: ScalerConfig, namespace: str) -> None:
        most = max((p.gpus for p in config.pools), default=1)
        self.config = config
        profiles = {name for p in config.pools if p.dra and p.sharing is not None for name in p.sharing.per_gpu}
        specs = {**{f"gpu-{n}": _spec(n) for n in range(1, most + 1)}, **{f"mig-{m}": _mig_spec(m) for m in profiles}}
        self.objects = DraObjects(classes={c.name: c for c in DEVICE_CLASSES}, templates={
            f"{namespace}/{name}": ResourceClaimTemplate(namespace, name, spec) for name, spec in specs.items()})
        self.state = DraState(self.objects)  # the scheduler's: its placements are the allocations
        # id(pod) -> (the scheduler's allocation it was made from, the pod as seen, its claim)
        self._seen: dict[int, tuple[object, Pod, ResourceClaim]] = {}

    def register(self, node: Node) -> None:
        """The driver on a DRA pool's node publishes its slice."""
        pool = self.config.pool(node.pool) if node.pool else None
        if pool is None or not pool.dra:
            return
        self.state.publish(node.name, pool.dra_slices(node.name))

    def drop(self, name: str) -> None:
        self.state.unpublish(name)

    def view(self, nodes: list[Node]) -> tuple[list[Node], DraObjects]:
        """The nodes with each running pod's claim generated and allocated, and the objects with those claims."""
        claims: dict[str, ResourceClaim] = {}
        out = []
        for node in nodes:
            pods = [self._allocated(p, node.name, claims) for p in node.pods]
            same = all(a is b for a, b in zip(pods, node.pods, strict=True))
            out.append(node if same else dataclasses.replace(node, pods=pods, version=0))
        objects = DraObjects(self.objects.classes, claims, self.objects.templates, list(self.objects.slices))
        return out, objects

    def _allocated(self, pod: Pod, node: str, claims: dict[str, ResourceClaim]) -> Pod:
        hit = self.state.by_pod.get(id(pod))
        if not pod.resource_claims or hit is None or hit[0] != node:
            return pod
        seen = self._seen.get(id(pod))
        if seen is not None and seen[0] is hit:
            claims[seen[2].key] = seen[2]
            return seen[1]
        ref = pod.resource_claims[0]
        tmpl = self.objects.templates[f"{pod.namespace}/{ref.template_name}"]
        pinned = ((SelectorRequirement("metadata.name", "In", (node,), field=True),),)
        shares = self.state.given_shares.get(id(pod), ("", []))[1]  # of GPUs shared by memory (DRA pools that say so)
        results = tuple(DeviceResult(CLAIM, d.driver, d.pool, d.device)
                        for d in sorted(hit[2], key=lambda d: (d.pool, d.device))) + tuple(shares)
        claim = ResourceClaim(pod.namespace, f"{pod.name}-{CLAIM}", tmpl.spec, Allocation(results, pinned), (pod.name,))
        claims[claim.key] = claim
        seen_pod = dataclasses.replace(pod, resource_claims=(dataclasses.replace(ref, generated=claim.name),))
        self._seen[id(pod)] = (hit, seen_pod, claim)
        return seen_pod
