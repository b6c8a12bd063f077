"""The pool: the single source of truth for a group of identical nodes.

Declared once (a pools file or a Pulumi stack config), it yields the cloud resources' tags, the
nodes' labels and taints, and the scaler's template node for scale-from-zero, so the three can
never drift. Validation errors name the pool and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from scaler.core.config import dra_slices
from scaler.core.config import reservation as rsv
from scaler.core.config.catalogue import AWS_ACCELERATOR, CATALOGUE, GPU_FACTS, Cloud, InstanceType
from scaler.core.config.repair import RepairSpec
from scaler.core.config.sharing import GpuSharing, SharingPlan, plan_sharing, sharing_from_tags
from scaler.core.config.specs import LABEL_KEY, StrictModel, TaintSpec, taint_spec
from scaler.core.config.warm import WarmPool, check_warm
from scaler.core.model import keys
from scaler.core.model.dra import ResourceSlice
from scaler.core.model.errors import FieldError
from scaler.core.model.objects import Node, Pod, Taint
from scaler.core.model.resources import Resources, parse_resources
from scaler.core.model.workload import is_gpu_device


def _whole(v: Any) -> Any:
    return int(v) if isinstance(v, float) and v.is_integer() else v


Count = Annotated[int, BeforeValidator(_whole)]

Role = Literal["system", "general", "gpu"]
GpuAllocation = Literal["device-plugin", "dra"]
CapacityType = Literal["spot", "on-demand", "reserved", "capacity-block"]

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
# The largest root volume each cloud creates: an EBS gp3 volume (16 TiB), an Azure managed OS disk (4 TiB - 1).
MAX_ROOT_VOLUME_GIB = {"aws": 16_384, "azure": 4_095}
GiB = 2**30
MiB = 2**20


class Pool(StrictModel):
    """One group of identical nodes the scaler can grow and shrink."""

    name: str
    cloud: Cloud
    role: Role = "gpu"
    provider_ref: str | None = Field(
        default=None, description="ASG name, AKS agent pool name or VMSS name; derived when unset"
    )
    azure_kind: Literal["agentpool", "vmss"] = "agentpool"
    instance_types: Annotated[list[str], Field(min_length=1)]
    capacity_type: CapacityType = "on-demand"
    reservation: rsv.Reservation | None = Field(
        default=None, description="what a reserved or capacity-block pool launches into (reservation.py)")
    zones: Annotated[list[str], Field(min_length=1)]
    # Counts are strict: `max: true` is not the 1 pydantic would read it as (a YAML slip, not a count); a
    # whole float (Pulumi's config gives numbers as floats) is the count it spells.
    min_size: Count = Field(default=0, ge=0, alias="min", strict=True)
    max_size: Count = Field(ge=0, le=2**31 - 1, alias="max", strict=True)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[TaintSpec] = Field(default_factory=list)
    gpus_per_node: Count | None = Field(default=None, ge=0, strict=True)
    min_pod_gpus: int = Field(
        default=0, ge=0, strict=True,
        description="pods must ask for at least this many GPUs to land here (spelled as a taint)",
    )
    price_per_hour: float | None = Field(default=None, ge=0)
    fallback: str | None = None
    max_pods: Count = Field(default=110, gt=0, strict=True)
    root_volume_gib: Count = Field(default=100, gt=0, strict=True)
    daemonset_overhead: dict[str, str | int | float] | None = None
    gpu_sharing: GpuSharing | None = Field(
        default=None, description="time-slicing or MIG (scaler/core/config/sharing.py); whole GPUs when unset")
    gpu_allocation: GpuAllocation = Field(
        default="device-plugin", description="device-plugin (nvidia.com/gpu) or dra (ResourceSlices, claims)")
    repair: RepairSpec = Field(
        default_factory=RepairSpec, description="GPU health signals and the repair budget (repair.py)")
    warm: WarmPool | None = Field(
        default=None, description="instances kept stopped or running beside the pool, ready sooner (warm.py)")
    # Filled in by validation from the catalogue (plus the pools file's overrides).
    instance: InstanceType | None = Field(default=None, exclude=True, repr=False)
    sharing: SharingPlan | None = Field(default=None, exclude=True, repr=False)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for single in ("instance_type", "vm_size"):
                if single in data:
                    if "instance_types" in data:
                        raise FieldError(single, f"give either {single} or instance_types, not both")
                    data["instance_types"] = [data.pop(single)]
            if "zone" in data:
                data["zones"] = [data.pop("zone")]
            if isinstance(data.get("taints"), list):
                data["taints"] = [taint_spec(t, i) for i, t in enumerate(data["taints"])]
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"{v!r} must be 1-40 lower-case letters, digits or '-'")
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not LABEL_KEY.match(k):
                raise ValueError(f"{k!r} is not a valid label key")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Pool:
        if self.min_size > self.max_size:
            raise FieldError("max", f"min ({self.min_size}) is greater than max ({self.max_size})")
        twice = sorted({z for z in self.zones if self.zones.count(z) > 1})
        if twice:
            raise FieldError("zones", f"{', '.join(twice)} listed twice")
        if self.root_volume_gib > MAX_ROOT_VOLUME_GIB[self.cloud]:
            raise FieldError("root_volume_gib", f"{self.root_volume_gib} GiB is above the largest root volume "
                             f"{self.cloud} creates ({MAX_ROOT_VOLUME_GIB[self.cloud]} GiB)")
        rsv.check(self.capacity_type, self.reservation, self.cloud, self.instance_types)
        if self.warm is not None:
            check_warm(self.warm, cloud=self.cloud, capacity_type=self.capacity_type,
                       instance_types=self.instance_types, max_size=self.max_size)
        if self.cloud == "azure" and len(self.instance_types) > 1:
            raise FieldError("instance_types", "an Azure pool has exactly one VM size")
        if self.cloud == "azure" and self.role == "system" and self.capacity_type == "spot":
            raise FieldError("capacity_type", "AKS refuses a Spot system pool: use capacity_type on-demand")
        if self.gpu_allocation == "dra" and self.role != "gpu":
            raise FieldError("gpu_allocation", f"gpu_allocation dra on a role {self.role} pool: only a GPU pool "
                             "allocates GPUs")
        if self.gpu_allocation != "dra" and self.gpu_sharing is not None and self.gpu_sharing.memory:
            raise FieldError(("gpu_sharing", "memory"), "memory sharing is DRA's consumable capacity: a device "
                             "plugin advertises whole GPUs; declare gpu_allocation: dra (or use time_slicing)")
        mig = self.gpu_sharing.mig if self.gpu_sharing is not None else None
        if self.gpu_allocation != "dra" and mig is not None and mig.dynamic:
            raise FieldError(("gpu_sharing", "mig", "dynamic"), "dynamic MIG is the NVIDIA DRA driver's (DynamicMIG): "
                             "a device plugin advertises a layout fixed at boot; declare gpu_allocation: dra")
        if self.gpu_allocation == "dra" and self.gpu_sharing is not None and self.gpu_sharing.time_slicing:
            raise FieldError("gpu_allocation", "gpu_allocation dra with time_slicing: under DRA a claim shares a "
                             "GPU (its config), the driver publishes each GPU once; drop time_slicing")
        if self.cloud == "azure":
            bad = [k for k in [*self.labels, *(t.key for t in self.taints)] if "_" in k]
            if bad:
                raise FieldError("labels" if set(bad) & set(self.labels) else "taints",
                                 f"keys {bad} contain '_', which Azure's tag form cannot round-trip")
        return self

    # --- derived facts (all from this one object) -----------------------------------------
    def resolve(self, catalogue: Mapping[str, InstanceType]) -> Pool:
        """Check the instance types against the catalogue and fill GPUs and price from it."""
        entries = []
        for name in self.instance_types:
            entry = catalogue.get(name)
            if entry is None:
                raise FieldError("instance_types", f"instance type {name!r} is not in the catalogue; add it under "
                                 "'catalogue:'")
            if entry.cloud != self.cloud:
                raise FieldError("instance_types", f"instance type {name!r} is an {entry.cloud} type, the pool is "
                                 f"{self.cloud}")
            entries.append(entry)
        gpu_counts = {e.gpus for e in entries}
        if len(gpu_counts) > 1:
            raise FieldError("instance_types", f"instance_types mix GPU counts {sorted(gpu_counts)}: a pool's nodes "
                             "must be alike")
        gpus = entries[0].gpus
        if self.gpus_per_node is not None and self.gpus_per_node != gpus:
            raise FieldError("gpus_per_node", f"gpus_per_node is {self.gpus_per_node} but {entries[0].name} has {gpus}")
        if self.role == "gpu" and gpus == 0:
            raise FieldError("role", f"role gpu on {entries[0].name}, which has no GPU")
        if self.role != "gpu" and gpus > 0:
            raise FieldError("role", f"role {self.role} on GPU type {entries[0].name}: use role gpu")
        if self.min_pod_gpus > gpus:
            raise FieldError("min_pod_gpus", f"min_pod_gpus {self.min_pod_gpus} exceeds the node's {gpus} GPUs")
        if self.min_pod_gpus and self.gpu_sharing is not None:
            raise FieldError("gpu_sharing", "a shared pool serves pods of a GPU share: drop min_pod_gpus")
        # The smallest type is the template: the scaler never promises more than any type gives.
        smallest = min(entries, key=lambda e: (e.vcpu, e.memory_gib, e.price_per_hour))
        sharing = None
        if self.gpu_sharing is not None:
            if len({(e.gpu_model, e.gpu_memory_gib) for e in entries}) > 1:
                raise FieldError("gpu_sharing", "instance_types mix GPU models: a shared pool's GPUs must be alike")
            sharing = plan_sharing(self.gpu_sharing, smallest, self.max_pods)
            if self.cloud == "azure" and sharing.mig_strategy == "mixed":
                # AKS cuts GPUs only through an agent pool's gpuInstanceProfile: one profile per GPU.
                raise FieldError(("gpu_sharing", "mig", "strategy"), "Azure applies MIG as one profile per GPU "
                                   "(gpuInstanceProfile): use strategy single")
        if self.dra and dra_slices.gpu_model(smallest, sharing) is None:
            raise FieldError("gpu_allocation", f"gpu_allocation dra: the catalogue cannot describe {smallest.name}'s "
                             f"{smallest.gpu_model} {smallest.gpu_memory_gib}GB as the DRA driver would (known: "
                             f"{', '.join(f'{m} {g}GB' for m, g in GPU_FACTS)})")
        return self.model_copy(update={"gpus_per_node": gpus, "instance": smallest, "sharing": sharing})

    @property
    def itype(self) -> InstanceType:
        if self.instance is None:
            raise ValueError(f"pool {self.name!r} was not resolved against the catalogue")
        return self.instance

    @property
    def gpus(self) -> int:
        return self.itype.gpus

    @property
    def dra(self) -> bool:
        """GPUs allocated through DRA (ResourceSlices and claims), not the device plugin's nvidia.com/gpu."""
        return self.gpu_allocation == "dra"

    def node_labels(self) -> dict[str, str]:
        """Labels every node of the pool carries at registration (kubelet --node-labels)."""
        out = {
            keys.LABEL_POOL: self.name,
            keys.LABEL_CAPACITY_TYPE: self.capacity_type,
            keys.LABEL_ROLE: self.role,
        }
        if self.gpus:
            out[keys.LABEL_GPU_PRESENT] = "true"
            model = self.itype.gpu_model or ""
            if self.cloud == "aws":
                out[keys.LABEL_ACCELERATOR_AWS] = AWS_ACCELERATOR.get(model, f"nvidia-{model.lower()}")
            else:
                out[keys.LABEL_ACCELERATOR_AZURE] = "nvidia"
        if self.sharing is not None:
            out.update(self.sharing.labels(self.name))
        if self.dra:
            out[keys.LABEL_GPU_ALLOCATION] = keys.GPU_ALLOCATION_DRA
        out.update(self.labels)
        return out

    def derived_taints(self) -> list[Taint]:
        out: list[Taint] = []
        if self.gpus:
            out.append(Taint(keys.TAINT_GPU, keys.TAINT_GPU_VALUE, "NoSchedule"))
        if self.min_pod_gpus > 1:
            out.append(Taint(keys.TAINT_MIN_GPUS, str(self.min_pod_gpus), "NoSchedule"))
        shared = self.sharing.taint_value() if self.sharing is not None and not self.dra else None
        if shared:
            out.append(Taint(keys.TAINT_GPU_SHARING, shared, "NoSchedule"))
        if self.cloud == "azure" and self.capacity_type == "spot":
            out.append(Taint(keys.TAINT_AZURE_SPOT, keys.TAINT_AZURE_SPOT_VALUE, "NoSchedule"))
        return out

    def node_taints(self) -> list[Taint]:
        """Taints every node carries (kubelet --register-with-taints / AKS nodeTaints)."""
        derived = self.derived_taints()
        seen = {t.key for t in derived}
        return derived + [t.to_taint() for t in self.taints if t.key not in seen]

    def capacity(self) -> Resources:
        t = self.itype
        out: Resources = {
            keys.RES_CPU: t.vcpu * 1000,
            keys.RES_MEMORY: int(t.memory_gib * GiB),
            keys.RES_EPHEMERAL: self.root_volume_gib * GiB,
            keys.RES_PODS: self.max_pods,
        }
        if self.dra:
            return out  # the GPUs are devices of the node's ResourceSlices
        if self.sharing is not None:
            out.update(self.sharing.resources())
        elif t.gpus:
            out[keys.RES_GPU] = t.gpus
        return out

    def system_reserve(self) -> Resources:
        """kube-reserved + system-reserved + eviction threshold, as the EKS / AKS bootstrap sets them."""
        vcpu = self.itype.vcpu
        # 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of the rest.
        cpu = 60 + (10 if vcpu > 1 else 0) + 5 * min(max(vcpu - 2, 0), 2) + math.ceil(2.5 * max(vcpu - 4, 0))
        memory = (255 + 11 * self.max_pods + 100) * MiB  # kube-reserved + hard eviction 100Mi
        return {keys.RES_CPU: cpu, keys.RES_MEMORY: memory, keys.RES_EPHEMERAL: 10 * GiB}

    def daemonset_requests(self) -> Resources:
        """What the pool's DaemonSets request on every node (CNI, kube-proxy, exporters, device plugin)."""
        if self.daemonset_overhead is not None:
            return parse_resources(self.daemonset_overhead)
        if self.gpus:
            return parse_resources({"cpu": "400m", "memory": "768Mi", "pods": 6})
        return parse_resources({"cpu": "200m", "memory": "384Mi", "pods": 4})

    def allocatable(self) -> Resources:
        """Node allocatable (capacity - reserve); what is free for workloads subtracts DaemonSets."""
        reserve = self.system_reserve()
        return {k: v - reserve.get(k, 0) for k, v in self.capacity().items()}

    @property
    def prepaid(self) -> bool:
        """Paid for whether used or not (a reservation, a Capacity Block)."""
        return self.capacity_type in rsv.PREPAID

    def hourly_price(self, spot_price_factor: float) -> float:
        """What one more node costs: nothing on prepaid capacity (`list_price` is what it is charged)."""
        return 0.0 if self.prepaid else self.list_price(spot_price_factor)

    def list_price(self, spot_price_factor: float) -> float:
        if self.price_per_hour is not None:
            return self.price_per_hour
        base = self.itype.price_per_hour
        return round(base * spot_price_factor, 4) if self.capacity_type == "spot" else base

    def template_node(self, zone: str | None = None, region: str = "") -> Node:
        """The node a scale-up from zero would create, with the pool's DaemonSets already on it."""
        zone = zone or self.zones[0]
        labels = {
            keys.LABEL_ARCH: self.itype.arch,
            keys.LABEL_OS: "linux",
            keys.LABEL_INSTANCE_TYPE: self.itype.name,
            keys.LABEL_ZONE: zone,
            keys.LABEL_HOSTNAME: f"template-{self.name}-{zone}",
            **({keys.LABEL_REGION: region} if region else {}),
            **self.node_labels(),
        }
        if self.gpus:
            labels[keys.LABEL_GPU_COUNT] = str(self.gpus)
        ds = Pod(name=f"daemonsets-{self.name}", namespace="kube-system",
                 requests=self.daemonset_requests(), owner_kind="DaemonSet", phase="Running")
        name = f"template-{self.name}-{zone}"
        return Node(
            name=name, labels=labels, taints=tuple(self.node_taints()), allocatable=self.allocatable(),
            pool=self.name, pods=[ds], is_template=True, slices=self.dra_slices(name),
        )

    def dra_slices(self, node_name: str) -> tuple[ResourceSlice, ...]:
        """The ResourceSlices the DRA driver publishes on a node of this pool (none unless dra)."""
        return dra_slices.template_slices(node_name, self.itype, self.sharing) if self.dra else ()

    # --- cluster-autoscaler tags -------------------------------------------------------------
    def to_tags(self, cluster: str) -> dict[str, str]:
        """Tags for the ASG (AWS form) or the VMSS (Azure form: '_' for '/')."""
        tags = {
            keys.TAG_CA_ENABLED: "true",
            keys.tag_ca_cluster(cluster): "owned",
            keys.TAG_POOL: self.name,
            keys.TAG_ROLE: self.role,
        }
        if self.fallback:
            tags[keys.TAG_FALLBACK] = self.fallback
        if self.reservation is not None:
            tags.update(rsv.to_tags(self.reservation))
        for k, v in self.node_labels().items():
            tags[keys.TAG_CA_TEMPLATE_LABEL + k] = v
        for t in self.node_taints():
            tags[keys.TAG_CA_TEMPLATE_TAINT + t.key] = f"{t.value}:{t.effect}"
        gpu_resources = {k: v for k, v in self.capacity().items() if is_gpu_device(k)}  # none under DRA
        for name, count in gpu_resources.items():
            tags[keys.TAG_CA_TEMPLATE_RESOURCES + name] = str(count)
        tags[keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_EPHEMERAL] = f"{self.root_volume_gib}Gi"
        if self.cloud == "azure":
            return {keys.azure_tag_key(k): v for k, v in tags.items()}
        return tags

    @classmethod
    def from_tags(cls, tags: Mapping[str, str], *, cloud: Cloud, cluster: str, provider_ref: str,
                  instance_types: list[str], zones: list[str], min_size: int, max_size: int,
                  catalogue: Mapping[str, InstanceType] = CATALOGUE) -> Pool:
        """A pool from a group's tags plus what the cloud says of the group itself (`pool_from_tags`)."""
        return pool_from_tags(tags, cloud=cloud, cluster=cluster, provider_ref=provider_ref,
                              instance_types=instance_types, zones=zones, min_size=min_size, max_size=max_size,
                              catalogue=catalogue)


# Pools read back from their groups' tags: cluster-autoscaler's node-template tags and gpuburst's own,
# on groups made by gpuburst, eksctl, the console or by hand (`Pool.from_tags`, `adopt`): to_tags's inverse.


def pool_from_tags(
    tags: Mapping[str, str],
    *,
    cloud: Cloud,
    cluster: str,
    provider_ref: str,
    instance_types: list[str],
    zones: list[str],
    min_size: int,
    max_size: int,
    catalogue: Mapping[str, InstanceType] = CATALOGUE,
) -> Pool:
    """A pool from a group's tags plus what the cloud says of the group itself.

    Works on groups made by gpuburst, eksctl, the console or by hand: whatever the tags do not
    say falls back to cluster-autoscaler's reading (on-demand, role from the GPU count).
    """
    if cloud == "azure":
        tags = {_aws_form(k): v for k, v in tags.items()}
    if tags.get(keys.TAG_CA_ENABLED, "").lower() != "true" or keys.tag_ca_cluster(cluster) not in tags:
        raise ValueError(f"{provider_ref}: not tagged for cluster-autoscaler in cluster {cluster!r}")
    labels = {k[len(keys.TAG_CA_TEMPLATE_LABEL):]: v for k, v in tags.items()
              if k.startswith(keys.TAG_CA_TEMPLATE_LABEL)}
    taints = []
    for k, v in tags.items():
        if k.startswith(keys.TAG_CA_TEMPLATE_TAINT):
            value, _, effect = v.rpartition(":")
            taints.append(TaintSpec(key=k[len(keys.TAG_CA_TEMPLATE_TAINT):], value=value,
                                    effect=effect))  # type: ignore[arg-type]
    capacity_type = capacity_type_of(labels)
    entry = catalogue.get(instance_types[0]) if instance_types else None
    role = tags.get(keys.TAG_ROLE) or ("gpu" if entry and entry.gpus else "general")
    name = tags.get(keys.TAG_POOL) or pool_name(provider_ref)
    # The min-gpus taint is how min_pod_gpus is spelled on a node: read it back as the field.
    min_gpus = next((t.value for t in taints if t.key == keys.TAINT_MIN_GPUS and t.value.isdigit()), "0")
    draft = Pool.model_validate({
        "name": name, "cloud": cloud, "role": role, "provider_ref": provider_ref,
        "instance_types": instance_types, "capacity_type": capacity_type, "zones": zones,
        "min": min_size, "max": max_size, "fallback": tags.get(keys.TAG_FALLBACK),
        "min_pod_gpus": int(min_gpus), "reservation": rsv.from_tags(tags),
        "gpu_sharing": sharing_from_tags(labels, tags, entry.gpus if entry else 0),
        "gpu_allocation": "dra" if labels.get(keys.LABEL_GPU_ALLOCATION) == keys.GPU_ALLOCATION_DRA
        else "device-plugin",
    })
    ephemeral = tags.get(keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_EPHEMERAL)
    update: dict[str, Any] = {}
    if ephemeral and ephemeral.endswith("Gi"):
        update["root_volume_gib"] = int(ephemeral[:-2])
    resolved = draft.model_copy(update=update).resolve(catalogue)
    derived_labels = resolved.model_copy(update={"labels": {}}).node_labels()
    derived_taints = set(resolved.derived_taints())
    update = {
        "labels": {k: v for k, v in labels.items() if derived_labels.get(k) != v},
        "taints": [t for t in taints if t.to_taint() not in derived_taints],
    }
    # Re-validate so that the extracted labels and taints get the same checks as a pools file.
    return Pool.model_validate({**resolved.model_dump(by_alias=True), **update}).resolve(catalogue)


def _aws_form(azure_key: str) -> str:
    return azure_key.replace("_", "/") if azure_key.startswith(keys.azure_tag_key(keys.TAG_CA_PREFIX)) or \
        azure_key.startswith(keys.azure_tag_key(keys.DOMAIN + "/")) else azure_key


def pool_name(raw: str) -> str:
    """A valid pool name from a group's name or tag."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    return cleaned[:40].strip("-") or "pool"


def capacity_type_of(labels: Mapping[str, str], spot: bool = False) -> str:
    """A group's capacity type: our own label when it names one, else what the other tools' labels (EKS,
    Karpenter, the Azure scale set's priority) or the group (`spot`) say; on-demand by default."""
    ours = labels.get(keys.LABEL_CAPACITY_TYPE, "")
    if ours in ("spot", "on-demand", *rsv.PREPAID):
        return ours
    spotty = {labels.get(keys.LABEL_EKS_CAPACITY_TYPE, "").lower(), labels.get(keys.LABEL_KARPENTER_CAPACITY_TYPE, ""),
              labels.get(keys.LABEL_AZURE_SCALESET_PRIORITY, "")}
    return "spot" if spot or "spot" in spotty else "on-demand"

