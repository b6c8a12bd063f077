"""Shared GPUs: time-slicing and MIG, declared on a pool and derived from that one declaration.

A GPU pool may say how its GPUs are shared (`gpu_sharing:` in a pools file or a stack):

    gpu_sharing: {time_slicing: {replicas: 4}}                     # each GPU advertised 4 times
    gpu_sharing: {mig: {strategy: single, profile: 1g.10gb}}       # every GPU cut into 7 x 1g.10gb
    gpu_sharing: {mig: {strategy: mixed, layout: all-balanced}}    # NVIDIA's named layout
    gpu_sharing: {mig: {strategy: mixed, layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}}
    gpu_sharing: {memory: {step_gib: 10}}    # DRA pools: claims share a GPU by its memory, 10 GiB steps
    gpu_sharing: {mig: {dynamic: true}}      # DRA pools on Hopper: each GPU whole or cut per claim

Dynamic MIG is the NVIDIA DRA driver's DynamicMIG (kubernetes-sigs/dra-driver-nvidia-gpu, pull request 1018)
on Kubernetes' partitionable devices (KEP-4815, DRAPartitionableDevices): the driver publishes each GPU whole
and every MIG device it could create on it, all consuming the GPU's memory-slice counters, so one GPU serves a
whole-GPU claim or any mix of slices, chosen when claims are allocated. On Hopper the driver turns MIG on and
off per allocation; on an A100 it keeps the MIG mode set at boot (a change needs a GPU reset), so a dynamic
pool must be Hopper, and `gpu_allocation: dra` (the device plugin cannot).

Memory sharing is DRA's consumable capacity (DRAConsumableCapacity, beta and on since Kubernetes 1.36):
each GPU the driver publishes allows multiple allocations and its `memory` capacity is consumed by the
claims that ask for some (`capacity.requests: {memory: 20Gi}`), rounded up to a whole number of steps;
a claim that asks for none takes the whole GPU (`scaler.core.dra.nvidia`). Only with `gpu_allocation: dra`.

From it come the node's allocatable (`nvidia.com/gpu` x replicas; MIG single: `nvidia.com/gpu` x
slices; MIG mixed: `nvidia.com/mig-<profile>` counts), the labels NVIDIA's device plugin and
GPU feature discovery use, a taint that keeps whole-GPU pods off nodes whose `nvidia.com/gpu` is a
share, the device plugin's named config for the pool, and the mig-parted layout applied at boot.
Nothing here does I/O.

MIG layouts are checked against the GPU's slices: a layout fits when its profiles' compute slices
and memory slices fit the GPU's (7 and 8 on A100 / H100, 4 and 4 on A30) and no profile exceeds the
count NVIDIA allows per GPU. That is a necessary condition; NVIDIA's placement rules are stricter
for a few odd mixes, which mig-parted then refuses at boot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scaler.core.config.catalogue import InstanceType, gpu_facts
from scaler.core.model import keys
from scaler.core.model.errors import FieldError


@dataclass(frozen=True, slots=True)
class MigProfile:
    compute: int  # compute slices (the "Ng" of the name)
    memory: int  # memory slices
    max_per_gpu: int


@dataclass(frozen=True, slots=True)
class MigGpu:
    """A MIG-capable GPU: its slices, its profiles and NVIDIA's named mixed layouts."""

    compute: int
    memory: int
    profiles: Mapping[str, MigProfile]
    layouts: Mapping[str, Mapping[str, int]]


def _profiles(*rows: tuple[str, int, int, int]) -> dict[str, MigProfile]:
    return {name: MigProfile(c, m, n) for name, c, m, n in rows}


_A100_80_H100 = _profiles(
    ("1g.10gb", 1, 1, 7), ("1g.20gb", 1, 2, 4), ("2g.20gb", 2, 2, 3),
    ("3g.40gb", 3, 4, 2), ("4g.40gb", 4, 4, 1), ("7g.80gb", 7, 8, 1),
)
# (GPU model, memory GiB) as the catalogue states them -> MIG geometry (NVIDIA's MIG user guide).
MIG_GPUS: Final[dict[tuple[str, int], MigGpu]] = {
    ("A100", 40): MigGpu(7, 8, _profiles(
        ("1g.5gb", 1, 1, 7), ("1g.10gb", 1, 2, 4), ("2g.10gb", 2, 2, 3),
        ("3g.20gb", 3, 4, 2), ("4g.20gb", 4, 4, 1), ("7g.40gb", 7, 8, 1),
    ), {"all-balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}),
    ("A100", 80): MigGpu(7, 8, _A100_80_H100, {"all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}),
    ("H100", 80): MigGpu(7, 8, _A100_80_H100, {"all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}),
    ("A30", 24): MigGpu(4, 4, _profiles(("1g.6gb", 1, 1, 4), ("2g.12gb", 2, 2, 2), ("4g.24gb", 4, 4, 1)),
                        {"all-balanced": {"1g.6gb": 2, "2g.12gb": 1}}),
}

def gpu_product(itype: InstanceType) -> str:
    """GPU feature discovery's product label: NVML's name with spaces as '-'."""
    facts = gpu_facts(itype)
    return facts.product_name.replace(" ", "-") if facts else f"NVIDIA-{itype.gpu_model or 'GPU'}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TimeSlicing(_Strict):
    replicas: int = Field(ge=2, le=64, description="how many pods may share each GPU")


class Mig(_Strict):
    strategy: Literal["single", "mixed"] | None = Field(default=None, description="single or mixed: the device "
                                                        "plugin's MIG strategy (not with dynamic)")
    dynamic: bool = Field(default=False, description="DRA pools on Hopper: each GPU whole or cut per claim by the "
                          "NVIDIA DRA driver (DynamicMIG), no layout at boot")
    profile: str | None = Field(default=None, description="single: the one profile every GPU is cut into")
    layout: str | dict[str, int] | None = Field(
        default=None, description="mixed: NVIDIA's layout name (all-balanced) or profile -> count per GPU")
    gpus: int | None = Field(default=None, ge=1, description="mixed: how many of a node's GPUs are cut into the "
                             "layout; the others stay whole, advertised as nvidia.com/gpu (default: every GPU)")

    @model_validator(mode="after")
    def _shape(self) -> Mig:
        if self.dynamic:
            if self.strategy is not None or self.profile is not None or self.layout is not None or self.gpus:
                raise ValueError("dynamic MIG cuts each GPU per claim: give no strategy, profile, layout or gpus")
            return self
        if self.strategy is None:
            raise ValueError("give a strategy (single or mixed), or dynamic: true on a DRA pool")
        if self.strategy == "single" and (self.profile is None or self.layout is not None):
            raise ValueError("strategy single takes a profile (e.g. 1g.10gb) and no layout")
        if self.strategy == "single" and self.gpus is not None:
            raise ValueError("gpus is for strategy mixed: single advertises its slices as nvidia.com/gpu, so a whole "
                             "GPU beside them could not be told apart")
        if self.strategy == "mixed" and (self.layout is None or self.profile is not None):
            raise ValueError("strategy mixed takes a layout (a name, or profile -> count per GPU) and no profile")
        if isinstance(self.layout, dict) and (not self.layout or any(n < 1 for n in self.layout.values())):
            raise ValueError("a layout maps each profile to a count of at least 1")
        return self


class MemoryShares(_Strict):
    step_gib: int = Field(ge=1, le=1024, description="the GPU memory a share is counted in (its smallest share)")


class GpuSharing(_Strict):
    time_slicing: TimeSlicing | None = None
    mig: Mig | None = None
    memory: MemoryShares | None = Field(
        default=None, description="DRA pools: claims take shares of each GPU's memory (consumable capacity)")

    @model_validator(mode="after")
    def _one(self) -> GpuSharing:
        if sum(x is not None for x in (self.time_slicing, self.mig, self.memory)) != 1:
            raise ValueError("give exactly one of time_slicing, mig or memory")
        return self

    @property
    def strategy(self) -> str:
        return keys.SHARING_TIME_SLICING if self.time_slicing else "mig" if self.mig else keys.SHARING_MEMORY


@dataclass(frozen=True, slots=True)
class SharingPlan:
    """What one pool's sharing declaration means on one node: checked against its GPU."""

    sharing: GpuSharing
    gpus: int
    product: str
    per_gpu: Mapping[str, int]  # mig profile -> count per GPU (empty for time-slicing)
    geometry: MigGpu | None = None  # the GPU's MIG slices (MIG pools)

    @property
    def mig_strategy(self) -> str:
        mig = self.sharing.mig
        return "none" if mig is None else "dynamic" if mig.dynamic else mig.strategy or "none"

    @property
    def dynamic(self) -> bool:
        """Each GPU whole or cut per claim (the DRA driver's DynamicMIG): `per_gpu` is what a GPU can hold."""
        return self.mig_strategy == "dynamic"

    @property
    def memory_step_gib(self) -> int | None:
        """Memory sharing's step: each GPU shared by claims asking for its memory (DRA pools)."""
        return self.sharing.memory.step_gib if self.sharing.memory else None

    @property
    def cut(self) -> int:
        """The node's GPUs cut into MIG slices (a mixed layout may leave the others whole)."""
        mig = self.sharing.mig
        return 0 if mig is None or mig.dynamic else min(mig.gpus or self.gpus, self.gpus)

    def resources(self) -> dict[str, int]:
        """The GPU resources a node advertises (replaces the plain nvidia.com/gpu count): the device plugin's
        mixed strategy advertises a GPU left whole as nvidia.com/gpu beside the slices of the cut ones."""
        if self.sharing.memory or self.dynamic:
            return {keys.RES_GPU: self.gpus}  # (a DRA pool advertises none: its GPUs are devices of slices)
        if self.sharing.time_slicing:
            return {keys.RES_GPU: self.gpus * self.sharing.time_slicing.replicas}
        if self.mig_strategy == "single":
            return {keys.RES_GPU: self.gpus * sum(self.per_gpu.values())}
        whole = {keys.RES_GPU: self.gpus - self.cut} if self.cut < self.gpus else {}
        return {**whole, **{keys.MIG_RESOURCE_PREFIX + p: self.cut * n for p, n in sorted(self.per_gpu.items())}}

    def devices(self) -> int:
        return sum(self.resources().values())

    def labels(self, pool: str) -> dict[str, str]:
        """The device plugin's config selector and GPU feature discovery's labels for the sharing."""
        if self.sharing.memory:
            return {keys.LABEL_GPU_MEMORY_STEP: str(self.sharing.memory.step_gib)}
        if self.dynamic:
            return {keys.LABEL_MIG_DYNAMIC: "true"}  # no device plugin config, no layout at boot
        out = {keys.LABEL_DEVICE_PLUGIN_CONFIG: pool}
        if self.sharing.time_slicing:
            out[keys.LABEL_GPU_SHARING_STRATEGY] = keys.SHARING_TIME_SLICING
            out[keys.LABEL_GPU_REPLICAS] = str(self.sharing.time_slicing.replicas)
            out[keys.LABEL_GPU_PRODUCT] = f"{self.product}-SHARED"
        else:
            out[keys.LABEL_MIG_STRATEGY] = self.mig_strategy
            out[keys.LABEL_MIG_CONFIG] = mig_config_name(pool)
            only = next(iter(self.per_gpu)) if self.mig_strategy == "single" else None
            out[keys.LABEL_GPU_PRODUCT] = f"{self.product}-MIG-{only}" if only else self.product
        return out

    def taint_value(self) -> str | None:
        """Where nvidia.com/gpu is a share (time-slicing, MIG single), whole-GPU pods must stay off."""
        if self.sharing.time_slicing:
            return keys.SHARING_TIME_SLICING
        return keys.SHARING_MIG_SINGLE if self.mig_strategy == "single" else None

    def device_plugin_config(self) -> dict[str, Any]:
        """The device plugin's config file for this pool (one named entry of the chart's config.map)."""
        config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": self.mig_strategy}}
        if self.sharing.time_slicing:
            # Requests above one replica are allowed: a pod that needs half a GPU asks for half the
            # replicas. Time-slicing gives no memory or fault isolation either way (docs/gpu-sharing.md).
            config["sharing"] = {"timeSlicing": {
                "renameByDefault": False, "failRequestsGreaterThanOne": False,
                "resources": [{"name": keys.RES_GPU, "replicas": self.sharing.time_slicing.replicas}],
            }}
        return config

    def aks_gpu_instance_profile(self) -> str | None:
        """AKS's agent-pool MIG setting (MIG1g ... MIG7g) for a single-strategy pool."""
        if self.mig_strategy != "single":
            return None
        return f"MIG{next(iter(self.per_gpu)).split('g.')[0]}g"

    def mig_parted_config(self, pool: str) -> dict[str, Any] | None:
        """NVIDIA mig-parted's config: one named layout applied to every GPU of the node at boot (with `gpus`, to
        the first ones, the others with MIG disabled)."""
        if not self.sharing.mig or self.dynamic:
            return None
        cut = {"mig-enabled": True, "mig-devices": dict(sorted(self.per_gpu.items()))}
        if self.cut >= self.gpus:
            return {"version": "v1", "mig-configs": {mig_config_name(pool): [{"devices": "all", **cut}]}}
        return {"version": "v1", "mig-configs": {mig_config_name(pool): [
            {"devices": list(range(self.cut)), **cut},
            {"devices": list(range(self.cut, self.gpus)), "mig-enabled": False},
        ]}}


def mig_config_name(pool: str) -> str:
    return f"gpuburst-{pool}"


def plan_sharing(sharing: GpuSharing, itype: InstanceType, max_pods: int) -> SharingPlan:
    """Check a declaration against the instance type's GPU; raise FieldError naming the field."""
    if itype.gpus == 0:
        raise FieldError("gpu_sharing", f"{itype.name} has no GPU to share")
    model = itype.gpu_model or "?"
    per_gpu: dict[str, int] = {}
    geometry = None
    facts = gpu_facts(itype)  # the memory NVML reports (the driver publishes), under the marketing figure
    usable = facts.memory_mib / 1024 if facts is not None else itype.gpu_memory_gib
    if sharing.memory and 2 * sharing.memory.step_gib > usable:
        raise FieldError(("gpu_sharing", "memory", "step_gib"), f"{sharing.memory.step_gib} GiB steps: the "
                         f"{model}'s {usable:.1f} GiB hold fewer than two shares (at most {int(usable // 2)})")
    if sharing.mig:
        geometry = MIG_GPUS.get((model, itype.gpu_memory_gib))
        if geometry is None:
            capable = ", ".join(f"{m} {g}GB" for m, g in MIG_GPUS)
            raise FieldError(("gpu_sharing", "mig"), f"{itype.name}'s {model} {itype.gpu_memory_gib}GB does not "
                               f"support MIG (MIG GPUs: {capable}); use time_slicing")
        if sharing.mig.dynamic and (facts is None or facts.architecture != "Hopper"):
            raise FieldError(("gpu_sharing", "mig", "dynamic"), f"{itype.name}'s {model} cannot change MIG mode per "
                             "claim: NVIDIA's DRA driver cuts GPUs per allocation only on Hopper (H100) and keeps an "
                             "A100's boot MIG mode; use strategy mixed with a layout")
        per_gpu = (_dynamic(geometry) if sharing.mig.dynamic
                   else _layout(sharing.mig, geometry, model, itype.gpu_memory_gib))
        if sharing.mig.gpus is not None and sharing.mig.gpus > itype.gpus:
            raise FieldError(("gpu_sharing", "mig", "gpus"), f"{sharing.mig.gpus} GPUs to cut, and {itype.name} has "
                               f"{itype.gpus}")
    plan = SharingPlan(sharing, itype.gpus, gpu_product(itype), per_gpu, geometry)
    if plan.devices() > max_pods:
        raise FieldError("gpu_sharing", f"{plan.devices()} shared devices per node exceed max_pods {max_pods}: "
                           "every device is meant for a pod")
    return plan


def _dynamic(gpu: MigGpu) -> dict[str, int]:
    """What a dynamic GPU can be cut into: every profile short of the whole GPU, at NVIDIA's per-GPU maximum."""
    return {name: p.max_per_gpu for name, p in gpu.profiles.items() if p.compute < gpu.compute}


def placements(gpu: MigGpu, profile: str) -> range:
    """The memory slices a profile's instance may start at (NVIDIA's MIG user guide, "A100/H100 placements"): aligned
    to its memory slices, its memory and its compute inside the GPU's (1g.10gb at 0-6, 2g at 0, 2, 4; 3g at 0, 4)."""
    p = gpu.profiles[profile]
    return range(0, min(gpu.memory - p.memory, gpu.compute - p.compute) + 1, p.memory)


def _layout(mig: Mig, gpu: MigGpu, model: str, memory: int) -> dict[str, int]:
    where = ("gpu_sharing", "mig", "profile" if mig.strategy == "single" else "layout")
    if mig.strategy == "single":
        assert mig.profile is not None
        profile = gpu.profiles.get(mig.profile)
        if profile is None:
            raise FieldError(where, f"{mig.profile!r} is not a MIG profile of the {model} {memory}GB "
                               f"(profiles: {', '.join(gpu.profiles)})")
        return {mig.profile: profile.max_per_gpu}
    if isinstance(mig.layout, str):
        named = gpu.layouts.get(mig.layout)
        if named is None:
            raise FieldError(where, f"{mig.layout!r} is not a named layout of the {model} {memory}GB "
                               f"(names: {', '.join(gpu.layouts)}; or give profile -> count)")
        return dict(named)
    assert mig.layout is not None
    unknown = [p for p in mig.layout if p not in gpu.profiles]
    if unknown:
        raise FieldError(where, f"{', '.join(unknown)} not MIG profiles of the {model} {memory}GB "
                           f"(profiles: {', '.join(gpu.profiles)})")
    compute = sum(gpu.profiles[p].compute * n for p, n in mig.layout.items())
    slices = sum(gpu.profiles[p].memory * n for p, n in mig.layout.items())
    over = [p for p, n in mig.layout.items() if n > gpu.profiles[p].max_per_gpu]
    if over or compute > gpu.compute or slices > gpu.memory:
        raise FieldError(where, f"the layout does not fit one {model} {memory}GB: it needs {compute} of "
                           f"{gpu.compute} compute and {slices} of {gpu.memory} memory slices"
                           + (f"; at most {', '.join(f'{gpu.profiles[p].max_per_gpu} x {p}' for p in over)}"
                              if over else ""))
    return dict(mig.layout)


def sharing_from_tags(labels: Mapping[str, str], tags: Mapping[str, str], gpus: int) -> dict[str, Any] | None:
    """The sharing declaration a group's template labels and resource tags spell (Pool.from_tags reads it)."""
    if labels.get(keys.LABEL_MIG_DYNAMIC) == "true":
        return {"mig": {"dynamic": True}}
    step = labels.get(keys.LABEL_GPU_MEMORY_STEP, "")
    if step.isdigit():
        return {"memory": {"step_gib": int(step)}}
    replicas = labels.get(keys.LABEL_GPU_REPLICAS, "")
    if replicas.isdigit() and int(replicas) > 1:
        return {"time_slicing": {"replicas": int(replicas)}}
    strategy = labels.get(keys.LABEL_MIG_STRATEGY)
    if strategy == "single":
        _, _, profile = labels.get(keys.LABEL_GPU_PRODUCT, "").rpartition("-MIG-")
        return {"mig": {"strategy": "single", "profile": profile}} if profile else None
    if strategy == "mixed" and gpus:
        prefix = keys.TAG_CA_TEMPLATE_RESOURCES + keys.MIG_RESOURCE_PREFIX
        whole = tags.get(keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU, "")
        cut = gpus - int(whole) if whole.isdigit() and 0 < int(whole) < gpus else gpus
        layout = {k[len(prefix):]: int(v) // cut for k, v in tags.items() if k.startswith(prefix) and v.isdigit()}
        if not layout:
            return None
        return {"mig": {"strategy": "mixed", "layout": layout, **({"gpus": cut} if cut < gpus else {})}}
    return None
