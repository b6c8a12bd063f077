"""DRA pools (`gpu_allocation: dra`): the template node carries the ResourceSlices the NVIDIA DRA driver
would publish, derived from the catalogue for every GPU type we list, and no nvidia.com/gpu."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from scaler.core.config.catalogue import CATALOGUE
from scaler.core.config.pool import Pool
from scaler.core.config.settings import parse_config
from scaler.core.dra.allocator import Allocator, NodeRef
from scaler.core.dra.nvidia import DEVICE_CLASSES
from scaler.core.model import keys
from scaler.core.model.dra import ClaimSpec, DeviceRequest, ExactRequest, ResourceClaim, Version

GPU_TYPES = sorted(name for name, t in CATALOGUE.items() if t.gpus)


def _pool(itype: str, **extra: Any) -> Pool:
    cloud = CATALOGUE[itype].cloud
    raw = {"name": "dra", "cloud": cloud, "instance_types": [itype], "zones": ["z1"], "max": 3,
           "gpu_allocation": "dra", **extra}
    return parse_config({"cluster": "c1", "cloud": cloud, "pools": [raw]}, "t").pools[0]


def _claim(cls: str, count: int, *selectors: str) -> ResourceClaim:
    request = DeviceRequest("gpu", ExactRequest("gpu", cls, selectors, count=count))
    return ResourceClaim("ml", "c", ClaimSpec((request,)))


@pytest.mark.parametrize("itype", GPU_TYPES)
def test_every_listed_gpu_type_scales_from_zero_under_dra(itype: str) -> None:
    pool = _pool(itype)
    node = pool.template_node()
    entry = CATALOGUE[itype]
    assert keys.RES_GPU not in node.allocatable
    assert node.labels[keys.LABEL_GPU_ALLOCATION] == "dra"
    [published] = node.slices
    assert published.node_name == node.name
    assert len(published.devices) == entry.gpus
    attrs = published.devices[0].attributes
    assert attrs["type"] == "gpu"
    assert isinstance(attrs["productName"], str) and entry.gpu_model in attrs["productName"]
    assert attrs["architecture"] in ("Turing", "Ampere", "Ada Lovelace", "Volta", "Hopper")
    assert isinstance(attrs["cudaComputeCapability"], Version)
    # The NVIDIA chart's class takes every GPU; no more.
    alloc = Allocator(DEVICE_CLASSES, node.slices)
    where = NodeRef(node.name, node.labels)
    assert alloc.allocate(where, [_claim("gpu.nvidia.com", entry.gpus)]).ok
    assert not alloc.allocate(where, [_claim("gpu.nvidia.com", entry.gpus + 1)]).ok
    # memory is what NVML reports: a little under the marketing figure, never over it
    gib = entry.gpu_memory_gib
    over = f"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{gib + 1}Gi')) >= 0"
    assert not alloc.allocate(where, [_claim("gpu.nvidia.com", 1, over)]).ok


def test_a_mig_dra_pool_publishes_its_layout_and_overlaps_cannot_both_be_had() -> None:
    pool = _pool("p4d.24xlarge", gpu_sharing={"mig": {"strategy": "mixed", "layout": "all-balanced"}})
    counters, published = pool.template_node().slices  # counter sets in a slice of their own
    assert counters.shared_counters and not counters.devices
    profiles = sorted(str(d.attributes["profile"]) for d in published.devices if d.name.startswith("gpu-0-"))
    assert profiles == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    node = pool.template_node()
    alloc = Allocator(DEVICE_CLASSES, node.slices)
    where = NodeRef(node.name, node.labels)
    one = "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"
    assert alloc.allocate(where, [_claim("mig.nvidia.com", 16, one)]).ok  # 2 per GPU x 8 GPUs
    assert not alloc.allocate(where, [_claim("mig.nvidia.com", 17, one)]).ok
    assert not alloc.allocate(where, [_claim("gpu.nvidia.com", 1)]).ok  # no whole GPU on a MIG node


def test_a_pool_sharing_gpus_by_memory_publishes_shareable_gpus() -> None:
    """gpu_sharing: {memory: ...}: each GPU allows multiple allocations, its memory consumed in the pool's
    steps; claims asking for no memory take a GPU whole."""
    pool = _pool("g6.12xlarge", gpu_sharing={"memory": {"step_gib": 8}})
    node = pool.template_node()
    [published] = node.slices
    assert all(d.allow_multiple and d.policies["memory"].step == 8 * 2**30 for d in published.devices)
    alloc = Allocator(DEVICE_CLASSES, node.slices)
    where = NodeRef(node.name, node.labels)
    eight = DeviceRequest("gpu", ExactRequest("gpu", "gpu.nvidia.com", capacity=(("memory", Decimal(8 * 2**30)),)))
    shares = [ResourceClaim("ml", f"c{i}", ClaimSpec((eight,))) for i in range(8)]  # two 8 GiB shares per L4
    assert alloc.allocate(where, shares).ok
    assert not alloc.allocate(where, [*shares, ResourceClaim("ml", "c8", ClaimSpec((eight,)))]).ok
    assert not alloc.allocate(where, [_claim("gpu.nvidia.com", 5)]).ok and alloc.allocate(
        where, [_claim("gpu.nvidia.com", 4)]).ok


@pytest.mark.parametrize(("itype", "sharing"), [("g6.12xlarge", None), ("Standard_NC24ads_A100_v4", None),
                                                 ("g6.12xlarge", {"memory": {"step_gib": 4}})])
def test_dra_pool_tags_round_trip(itype: str, sharing: dict[str, Any] | None) -> None:
    pool = _pool(itype, **({"gpu_sharing": sharing} if sharing else {}))
    tags = pool.to_tags("c1")
    assert not any("resources" in k and "nvidia.com" in k for k in tags)  # no GPU resource to promise
    back = Pool.from_tags(tags, cloud=pool.cloud, cluster="c1", provider_ref=pool.provider_ref or pool.name,
                          instance_types=pool.instance_types, zones=pool.zones, min_size=0, max_size=3)
    assert back.gpu_allocation == "dra"
    assert back.model_dump(exclude={"provider_ref"}) == pool.model_dump(exclude={"provider_ref"})


def test_a_device_plugin_pool_is_unchanged() -> None:
    pool = _pool("g6.12xlarge", gpu_allocation="device-plugin")
    node = pool.template_node()
    assert node.allocatable[keys.RES_GPU] == 4
    assert node.slices == ()
    assert keys.LABEL_GPU_ALLOCATION not in node.labels
