"""What the NVIDIA DRA driver publishes on a node of a DRA pool (`gpu_allocation: dra`), derived from
the instance catalogue (`catalogue.gpu_facts`) and the pool's MIG layout (`sharing`): the template
node's ResourceSlices, so a DRA pool scales from zero. Pure.

MIG devices sit on each GPU largest first, each at the next free memory slice (the aligned starts
NVIDIA's placement allows for the layouts `sharing` accepts). A dynamic MIG pool's GPUs carry every
instance at every placement NVIDIA allows, beside the whole GPU (`nvidia.node_slices`). A MIG device's
memory is its share of the GPU's memory slices and its multiprocessors its compute slices' share of the
GPU's: close to what NVML reports, not exact (no selector we know reads more than the profile name).
"""

from __future__ import annotations

from scaler.core.config.catalogue import GpuFacts, InstanceType, gpu_facts
from scaler.core.config.sharing import MigGpu, SharingPlan, placements
from scaler.core.dra.nvidia import MEMORY_SLICES, GpuModel, MigInstance, node_slices
from scaler.core.model.dra import ResourceSlice

MiB = 2**20
# NVML's GPU instance profile ids by (compute slices, memory slices) on A100 / H100-class GPUs.
_PROFILE_IDS = {(1, 1): 19, (1, 2): 15, (2, 2): 14, (3, 4): 9, (4, 4): 5, (7, 8): 0}
_SMS_PER_SLICE = {"Ampere": 14, "Hopper": 16}


def gpu_model(itype: InstanceType, sharing: SharingPlan | None) -> GpuModel | None:
    """The node's GPUs as the driver describes them; None when the catalogue cannot describe the GPU."""
    facts = gpu_facts(itype)
    if facts is None or itype.gpus == 0:
        return None
    migs: list[MigInstance] = []
    geometry = sharing.geometry if sharing is not None else None
    if sharing is not None and geometry is not None and sharing.dynamic:
        # every instance the driver could create, at each placement NVIDIA allows (partitionable devices)
        migs = [_instance(facts, geometry, name, start) for name in sharing.per_gpu
                for start in placements(geometry, name)]
    elif sharing is not None and geometry is not None:
        start = 0
        layout = sorted(sharing.per_gpu.items(), key=lambda kv: (-geometry.profiles[kv[0]].memory, kv[0]))
        for name, count in layout:
            p = geometry.profiles[name]
            for _ in range(count):
                migs.append(_instance(facts, geometry, name, start))
                start += p.memory
    step = sharing.memory_step_gib if sharing is not None else None
    return GpuModel(facts.product_name, facts.architecture, facts.memory_mib * MiB, facts.compute_capability,
                    count=itype.gpus, mig=tuple(migs), share_step=(step or 0) * 2**30,
                    mig_gpus=sharing.cut if sharing is not None and migs and not sharing.dynamic else None,
                    dynamic=sharing is not None and sharing.dynamic)


def _instance(facts: GpuFacts, geometry: MigGpu, name: str, start: int) -> MigInstance:
    p = geometry.profiles[name]
    return MigInstance(name, _PROFILE_IDS.get((p.compute, p.memory), 0), start, p.memory,
                       memory=facts.memory_mib * p.memory // geometry.memory * MiB,
                       multiprocessors=_SMS_PER_SLICE.get(facts.architecture, 14) * p.compute,
                       decoders=p.compute // 2, jpeg_engines=int(p.memory == MEMORY_SLICES),
                       ofa_engines=int(p.memory == MEMORY_SLICES))


def template_slices(node_name: str, itype: InstanceType, sharing: SharingPlan | None) -> tuple[ResourceSlice, ...]:
    model = gpu_model(itype, sharing)
    return node_slices(node_name, model) if model is not None else ()
