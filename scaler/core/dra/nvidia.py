"""The ResourceSlice the NVIDIA DRA driver (gpu.nvidia.com, v25.8.1) publishes for a node, and the
DeviceClasses its chart creates: what a DRA pool's template node carries so it scales from zero.

Facts from ../shared/dra/README.md (NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go):
whole GPUs are `gpu-<minor>` with `type`, `uuid`, `productName`, `brand`, `architecture`,
`cudaComputeCapability`, `driverVersion`, `cudaDriverVersion`, `pcieBusID` and capacity `memory`;
MIG devices are `gpu-<minor>-mig-<profileId>-<start>-<size>` with the parent's attributes, `profile`,
`parentUUID`, engine capacities and one `memorySlice<i>` = 1 per memory slice they occupy. A template
cannot know real UUIDs or bus IDs: they are made up from the node name and the minor, which no
selector of ours reads. The memory slices are also published as a shared counter set per GPU that
its MIG devices consume, so two devices on the same slices cannot both be allocated. With the driver's
DynamicMIG (pull request 1018, on Hopper) each GPU is published whole beside every MIG device it could hold,
the whole GPU consuming all its memory slices (KEP-4815's partitionable devices): a GPU serves one whole-GPU
claim or any mix of slices that fits, chosen at allocation. In the order the driver publishes them (its device
slice of a GPU sorted by name: the whole GPU, then each profile's placements, lowest start first), which is the
order kube-scheduler's allocator tries them in. The driver's counter set also carries the GPU's engines and
multiprocessors; NVIDIA's placements never overcommit them, so only the memory slices are modelled. A pool that shares
GPUs by memory (`gpu_sharing: {memory: ...}`) gets whole GPUs that allow multiple allocations, their
`memory` consumable in the pool's steps (DRAConsumableCapacity): the slice the planner assumes of a driver
configured for it (see docs/gpu-sharing.md), not one v25.8.1 publishes by default.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from scaler.core.model.dra import (
    CapacityPolicy,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClass,
    PoolRef,
    ResourceSlice,
    Version,
)

DRIVER: Final = "gpu.nvidia.com"
# The chart's classes, their selectors as the pinned chart's templates/deviceclass-*.yaml make them
# (tests/platform/test_dra_driver.py renders it and compares). The pinned chart's GPU class also declares
# extendedResourceName nvidia.com/gpu where the cluster serves resource.k8s.io/v1; these template classes leave it
# out, as a cluster without DRAExtendedResource does, so in a snapshot or `simulate` a pod that asks for
# nvidia.com/gpu goes to a device-plugin pool. On a live cluster the classes are read from the API server.
GPU_CLASS: Final = DeviceClass(
    DRIVER,
    (f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'",),
)
MIG_CLASS: Final = DeviceClass(
    "mig.nvidia.com",
    (f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig'",),
)
DEVICE_CLASSES: Final = (GPU_CLASS, MIG_CLASS)
MEMORY_SLICES: Final = 8  # memory slices of an A100/H100/H200/B200-class GPU


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One MIG instance: its profile ("1g.10gb"), NVML profile id, and where it sits (start, size) in
    the GPU's memory slices; engines as nvidia-smi reports for the profile."""

    name: str
    profile_id: int
    start: int
    size: int
    memory: int  # bytes
    multiprocessors: int
    copy_engines: int = 1
    decoders: int = 0
    encoders: int = 0
    jpeg_engines: int = 0
    ofa_engines: int = 0


@dataclass(frozen=True, slots=True)
class GpuModel:
    product_name: str  # "NVIDIA H100 80GB HBM3"
    architecture: str  # "Hopper"
    memory: int  # bytes
    cuda_compute_capability: str  # "9.0"
    count: int = 1
    brand: str = "Nvidia"
    driver_version: str = "580.82.07"
    cuda_driver_version: str = "13.0.0"
    mig: tuple[MigInstance, ...] = ()  # the layout of every GPU of the node; empty: whole GPUs
    share_step: int = 0  # bytes: whole GPUs shared by their memory in steps of this (0: not shared)
    mig_gpus: int | None = None  # the GPUs cut into `mig` (the first ones; the others whole); None: all
    dynamic: bool = False  # DynamicMIG: each GPU published whole beside `mig`, all on its memory-slice counters


def _version(text: str) -> Version:
    parts = [*text.split("."), "0", "0"][:3]
    return Version(".".join(str(int(p)) for p in parts))


def physical_gpu(device: Device) -> object:
    """The GPU a device the driver publishes is on: a whole GPU's `uuid`, a MIG device's `parentUUID` (the
    device's name when it carries neither)."""
    return device.attributes.get("parentUUID") or device.attributes.get("uuid") or device.name


def _common(gpu: GpuModel, node: str, minor: int) -> dict[str, str | int | bool | Version]:
    return {
        "uuid": f"GPU-{node}-{minor}",
        "productName": gpu.product_name,
        "brand": gpu.brand,
        "architecture": gpu.architecture,
        "cudaComputeCapability": _version(gpu.cuda_compute_capability),
        "driverVersion": _version(gpu.driver_version),
        "cudaDriverVersion": _version(gpu.cuda_driver_version),
        "pcieBusID": f"0000:{minor + 1:02x}:00.0",
    }


def _mig_device(gpu: GpuModel, node: str, minor: int, p: MigInstance) -> Device:
    attrs = _common(gpu, node, minor)
    attrs.update(type="mig", profile=p.name, parentUUID=attrs["uuid"],
                 uuid=f"MIG-{node}-{minor}-{p.profile_id}-{p.start}")
    occupied = {f"memorySlice{i}": Decimal(1) for i in range(p.start, p.start + p.size)}
    capacity = {"multiprocessors": Decimal(p.multiprocessors), "copyEngines": Decimal(p.copy_engines),
                "decoders": Decimal(p.decoders), "encoders": Decimal(p.encoders),
                "jpegEngines": Decimal(p.jpeg_engines), "ofaEngines": Decimal(p.ofa_engines),
                "memory": Decimal(p.memory), **occupied}
    return Device(f"gpu-{minor}-mig-{p.profile_id}-{p.start}-{p.size}", attributes=attrs, capacity=capacity,
                  consumes_counters=(CounterConsumption(_counter_set(minor), {
                      counter_name(i): Decimal(1) for i in range(p.start, p.start + p.size)}),))


def _shared(gpu: GpuModel) -> dict[str, CapacityPolicy]:
    """A GPU shared by memory (consumable capacity): it allows multiple allocations, and its `memory` is
    consumed in steps (requestPolicy validRange min = step = the pool's step); a claim that asks for no memory
    consumes the default, every whole step of the GPU: no other share fits beside it (the whole GPU)."""
    if not gpu.share_step:
        return {}
    step = Decimal(gpu.share_step)
    whole = step * (gpu.memory // gpu.share_step)
    return {"memory": CapacityPolicy(whole, min=step, step=step)}


def _counter_set(minor: int) -> str:
    return f"gpu-{minor}-counter-set"


def counter_name(memory_slice: int) -> str:
    """A shared counter's name: a DNS label (RFC 1123), which resource.k8s.io/v1 requires of counter names
    (unlike capacity names, so a MIG device's capacity keeps `memorySlice<i>`)."""
    return f"memory-slice-{memory_slice}"


@functools.lru_cache(maxsize=4096)  # the planner asks for every DRA pool's template slices each pass
def node_slices(node: str, gpu: GpuModel, generation: int = 1) -> tuple[ResourceSlice, ...]:
    """The slices the driver publishes on `node`: one pool named after the node (shared, never to be changed),
    its MIG GPUs' memory-slice counters in a slice of their own."""
    devices: list[Device] = []
    counters: list[CounterSet] = []
    for minor in range(gpu.count):
        cut = bool(gpu.mig) and minor < (gpu.count if gpu.mig_gpus is None else gpu.mig_gpus)
        if cut:
            counters.append(CounterSet(_counter_set(minor),
                                       {counter_name(i): Decimal(1) for i in range(MEMORY_SLICES)}))
        if not cut or gpu.dynamic:
            attrs = _common(gpu, node, minor)
            attrs["type"] = "gpu"
            whole = (CounterConsumption(_counter_set(minor), {counter_name(i): Decimal(1)
                                                              for i in range(MEMORY_SLICES)}),) if cut else ()
            devices.append(Device(f"gpu-{minor}", attributes=attrs, capacity={"memory": Decimal(gpu.memory)},
                                  allow_multiple=bool(gpu.share_step), policies=_shared(gpu), consumes_counters=whole))
        if cut:
            devices.extend(_mig_device(gpu, node, minor, p) for p in gpu.mig)
    if not counters:
        return (ResourceSlice(f"{node}-{DRIVER}", DRIVER, PoolRef(node, generation, 1), node_name=node,
                              devices=tuple(devices)),)
    # resource.k8s.io/v1 allows only one of `sharedCounters` and `devices` in a slice (1.35+; validation.go,
    # ValidateResourceSliceSpec): the counter sets are a slice of their own in the same pool. It also allows at
    # most 64 devices that consume counters in a slice, so DynamicMIG's driver publishes a slice per GPU.
    per_gpu = [tuple(d for d in devices if d.name == f"gpu-{m}" or d.name.startswith(f"gpu-{m}-"))
               for m in range(gpu.count)] if gpu.dynamic else [tuple(devices)]
    pool = PoolRef(node, generation, 1 + len(per_gpu))
    named = [f"{node}-{DRIVER}-gpu-{m}" for m in range(gpu.count)] if gpu.dynamic else [f"{node}-{DRIVER}"]
    return (ResourceSlice(f"{node}-{DRIVER}-counters", DRIVER, pool, node_name=node, shared_counters=tuple(counters)),
            *(ResourceSlice(n, DRIVER, pool, node_name=node, devices=d) for n, d in zip(named, per_gpu, strict=True)))

