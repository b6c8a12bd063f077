"""A DRA node whose GPU NVIDIA's driver withdrew from its ResourceSlices is broken (scaler/core/planning/repair.py,
published_gpus): a GPU NVML no longer lists when the driver (re)starts (fallen off the bus), or one a driver
without device taints withdrew on a critical XID (25.12.0's NVMLDeviceHealthCheck), leaves the node advertising
nothing else the repair could read."""

from __future__ import annotations

import dataclasses

from core_builders import POOLS, config, node_of, plan, pod, snapshot

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.dra import (
    Allocation,
    ClaimSpec,
    Device,
    DeviceResult,
    DraObjects,
    PoolRef,
    ResourceClaim,
    ResourceSlice,
)
from scaler.core.model.objects import Node, Pod, PodResourceClaim
from scaler.core.planning.state import State

NOW = 1000.0


def _config() -> ScalerConfig:
    pools = [{**p, "gpu_allocation": "dra", "repair": {"lost_gpu_grace": 60}} for p in POOLS
             if p["name"].startswith("gpu8")]
    return config(pools, timings={"scan_interval": 10})


def _slices(node: str, published: int, count: int = 1, generation: int = 1) -> list[ResourceSlice]:
    """The node's slices in `count` parts, together publishing its first `published` GPUs."""
    devices = [Device(f"gpu-{i}", attributes={"type": "gpu", "uuid": f"GPU-{node}-{i}"}) for i in range(published)]
    return [ResourceSlice(f"{node}-{k}", "gpu.nvidia.com", PoolRef(node, generation, count), node_name=node,
                          devices=tuple(devices[k::count])) for k in range(count)]


def _train(node: str, started: float) -> tuple[Pod, ResourceClaim]:
    """A pod holding 4 of the node's GPUs through its ResourceClaim, checkpointing every 1,800 s."""
    p = dataclasses.replace(pod("train-0", node=node, annotations={keys.ANNOTATION_CHECKPOINT_INTERVAL: "1800"}),
                            resource_claims=(PodResourceClaim("gpus", claim_name="train-0-gpus"),))
    p.started_at = started
    results = tuple(DeviceResult("gpus", "gpu.nvidia.com", node, f"gpu-{i}") for i in range(4))
    return p, ResourceClaim("default", "train-0-gpus", ClaimSpec(()), Allocation(results))


def _repairs(cfg: ScalerConfig, nodes: list[Node], slices: list[ResourceSlice],
             claims: list[ResourceClaim] = (), now: float = NOW) -> dict[str, str]:
    snap = snapshot(cfg, [], nodes, now=now)
    snap.dra = DraObjects(claims={c.key: c for c in claims}, slices=slices)
    result, _ = plan(snap, State(unhealthy_since={n.name: NOW - 1 for n in nodes}), cfg)
    return {r.node: r.signal for r in result.repairs}


def test_an_idle_dra_node_publishing_fewer_gpus_than_it_has_is_replaced_at_once() -> None:
    cfg = _config()
    nodes = [node_of(cfg, "gpu8-spot-a", n, [], zone="us-east-1a") for n in ("d1", "d2", "d3")]
    # d2 publishes all 8; d3's pool is half published (2 slices declared, 1 seen): it says nothing yet
    slices = [*_slices("d1", 7), *_slices("d2", 8), *_slices("d3", 8, count=2)[:1]]
    assert _repairs(cfg, nodes, slices) == {
        "d1": "1 of 8 GPUs withdrawn from its ResourceSlices by the DRA driver"}


def test_a_dra_node_whose_pod_would_lose_work_is_kept_until_it_checkpoints() -> None:
    cfg = _config()
    # past the grace, 4 GPUs have run 1,000 s since their last checkpoint: 4,000 GPU-s at stake against the dead
    # GPU's 60 s; just after the checkpoint they have run 10 s
    for since_start, kept in ((1000.0, True), (1810.0, False)):
        train, claim = _train("d1", NOW + 60 - since_start)
        node = node_of(cfg, "gpu8-spot-a", "d1", [train], zone="us-east-1a")
        signal = _repairs(cfg, [node], _slices("d1", 7), [claim], now=NOW + 60)["d1"]
        assert ("kept: a drain would lose 1.11 GPU-h" in signal) is kept, signal
