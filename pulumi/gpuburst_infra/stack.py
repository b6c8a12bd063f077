"""The stack configuration: a typed model per cloud, validated before any resource is declared.

A stack file (`Pulumi.<stack>.yaml`) holds the cloud provider's region key (`aws:region` or
`azure-native:location`) and gpuburst's own keys (`gpuburst:*`). `gpuburst:pools` and
`gpuburst:catalogue` ARE the scaler's pool model: they are validated by `scaler.core.config.settings.parse_config`
together with the scaler's knobs from `gpuburst:scaler`, so the pools Pulumi creates and the pools the
scaler reads are one object. Every error names the stack file and the key, e.g.
`Pulumi.aws-dev.yaml: gpuburst:pools[gpu1-spot-a].max: ...`.

This module reads no files and declares no resources: `load_stack` takes the config as a mapping
(`read_pulumi_config` gets it from Pulumi's runtime, `offline.stack_file_config` from a stack file).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from scaler.core.config.catalogue import Cloud
from scaler.core.config.pool import Pool
from scaler.core.config.settings import AZURE_ZONES, ConfigError, ScalerConfig, parse_config
from scaler.core.model.errors import FieldError, KeyPath, render_path
from scaler.core.planning.capacity import zone_hints

NAMESPACE = "gpuburst"
REGION_KEY: dict[Cloud, str] = {"aws": "aws:region", "azure": "azure-native:location"}

# Regions with the GPU families of the catalogue and three zones; extend when a team needs another.
SUPPORTED_REGIONS: dict[Cloud, tuple[str, ...]] = {
    "aws": ("us-east-1", "us-east-2", "us-west-2", "ca-central-1", "eu-west-1", "eu-west-2",
            "eu-central-1", "eu-north-1", "ap-northeast-1", "ap-southeast-2", "ap-south-1"),
    "azure": ("eastus", "eastus2", "southcentralus", "westus2", "westus3", "northeurope",
              "westeurope", "swedencentral", "uksouth", "japaneast", "australiaeast"),
}
# Kubernetes minor versions EKS (with AL2023 images) and AKS support in standard support.
SUPPORTED_KUBERNETES: dict[Cloud, tuple[str, ...]] = {
    "aws": ("1.31", "1.32", "1.33", "1.34"),
    "azure": ("1.31", "1.32", "1.33", "1.34"),
}
AZURE_MAX_TAGS = 50
_AGENT_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
_IAM_PRINCIPAL = re.compile(r"^arn:aws:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class StackConfigError(ValueError):
    """Bad stack configuration; every line names the stack file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value))
    except ValueError as err:
        raise ValueError(f"{value!r} is not a CIDR block: {err}") from None


class ScalerSection(BaseModel):
    """`gpuburst:scaler`: where the scaler runs, plus the planners' knobs of `ScalerConfig`.

    The knobs (spot_price_factor, limits, timings, scale_down, discover, ...) are not repeated here:
    they pass through to `parse_config`, which rejects unknown ones.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    namespace: str = Field(default="gpuburst-system", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    service_account: str = Field(default="gpuburst-scaler", pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

    def knobs(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class _Common(_Strict):
    cloud: Cloud
    cluster: str = Field(pattern=r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$")
    kubernetes_version: str
    tags: dict[str, str] = Field(default_factory=dict, description="extra tags on every resource")
    scaler: ScalerSection = Field(default_factory=ScalerSection)
    pools: list[Any] = Field(min_length=1)
    catalogue: dict[str, Any] = Field(default_factory=dict)
    platform: dict[str, Any] = Field(
        default_factory=dict, description="the in-cluster add-ons' settings, validated by gpuburst_platform")

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, float | int) else v

    @model_validator(mode="after")
    def _version(self) -> _Common:
        supported = SUPPORTED_KUBERNETES[self.cloud]
        if self.kubernetes_version not in supported:
            raise FieldError("kubernetes_version", f"{self.kubernetes_version!r} is not a supported Kubernetes "
                             f"version on {self.cloud} (supported: {', '.join(supported)}; quote it in YAML)")
        return self


# --- AWS -------------------------------------------------------------------------------------------
class AwsNetwork(_Strict):
    """Either an existing VPC (`vpc_id` and one private subnet per zone) or a new one (`cidr`)."""

    cidr: str | None = None
    nat: Literal["single", "per_zone"] = "single"
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    private_subnets: dict[str, str] = Field(default_factory=dict, description="zone -> subnet id")

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        if v is None:
            return v
        net = ipaddress.ip_network(_cidr(v))
        if net.version != 4 or not 16 <= net.prefixlen <= 20:
            raise ValueError(f"{v!r}: give an IPv4 block from /16 to /20 (it is split into subnets per zone)")
        return str(net)

    @field_validator("private_subnets")
    @classmethod
    def _subnets(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [s for s in v.values() if not re.match(r"^subnet-[0-9a-f]{8,17}$", s)]
        if bad:
            raise ValueError(f"{bad} are not subnet ids")
        return v

    @model_validator(mode="after")
    def _one_way(self) -> AwsNetwork:
        existing = self.vpc_id is not None or bool(self.private_subnets)
        if existing and self.cidr is not None:
            raise ValueError("give either cidr (a new VPC) or vpc_id with private_subnets (an existing one), not both")
        if existing and not (self.vpc_id and self.private_subnets):
            raise ValueError("an existing network needs both vpc_id and private_subnets (zone -> subnet id)")
        if not existing and self.cidr is None:
            return self.model_copy(update={"cidr": "10.40.0.0/16"})
        return self

    @property
    def create(self) -> bool:
        return self.vpc_id is None


class ApiEndpoint(_Strict):
    """`gpuburst:endpoint`, the cluster's API endpoint: private (EKS: inside the VPC; AKS: a private
    cluster) unless the stack asks for public access from given CIDRs (EKS public access CIDRs, AKS
    authorized IP ranges); a block open to every address (0.0.0.0/0) only with `open_to_internet: true`."""

    public: bool = False
    public_cidrs: list[str] = Field(default_factory=list)
    open_to_internet: bool = False

    @field_validator("public_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        return [_cidr(c) for c in v]

    @model_validator(mode="after")
    def _explicit(self) -> ApiEndpoint:
        if not self.public:
            if self.public_cidrs:
                raise ValueError("public_cidrs is set but public is false: set public: true to open the endpoint")
            return self
        if not self.public_cidrs:
            raise ValueError("public: true needs public_cidrs (the ranges that may reach the API endpoint)")
        anywhere = [c for c in self.public_cidrs if ipaddress.ip_network(c).prefixlen == 0]
        if anywhere and not self.open_to_internet:
            raise ValueError(f"{anywhere[0]} opens the API endpoint to the whole internet: give narrower "
                             f"public_cidrs, or set open_to_internet: true to mean it")
        return self


class AwsStackConfig(_Common):
    cloud: Literal["aws"]
    network: AwsNetwork = Field(default_factory=AwsNetwork)
    endpoint: ApiEndpoint = Field(default_factory=ApiEndpoint)
    admins: list[str] = Field(default_factory=list, description="IAM role/user ARNs given cluster-admin")
    log_retention_days: int = Field(default=30, gt=0)

    @field_validator("admins")
    @classmethod
    def _admins(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if not _IAM_PRINCIPAL.match(a)]
        if bad:
            raise ValueError(f"{bad} are not IAM role or user ARNs")
        return v


# --- Azure -----------------------------------------------------------------------------------------
class AzureNetwork(_Strict):
    """Either an existing subnet (`subnet_id`) or a new virtual network (`cidr`)."""

    cidr: str | None = None
    subnet_id: str | None = Field(
        default=None,
        pattern=r"^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+"
                r"/subnets/[^/]+$",
    )
    pod_cidr: str = "192.168.0.0/16"
    service_cidr: str = "10.0.0.0/16"
    dns_service_ip: str = "10.0.0.10"

    @field_validator("cidr", "pod_cidr", "service_cidr")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        return None if v is None else _cidr(v)

    @model_validator(mode="after")
    def _one_way(self) -> AzureNetwork:
        if self.cidr is not None and self.subnet_id is not None:
            raise ValueError("give either cidr (a new virtual network) or subnet_id (an existing subnet), not both")
        if ipaddress.ip_address(self.dns_service_ip) not in ipaddress.ip_network(self.service_cidr):
            raise ValueError(f"dns_service_ip {self.dns_service_ip} is outside service_cidr {self.service_cidr}")
        blocks = {"service_cidr": self.service_cidr, "pod_cidr": self.pod_cidr, "cidr": self.cidr}
        nets = {k: ipaddress.ip_network(v) for k, v in blocks.items() if v is not None}
        for a, b in (("service_cidr", "pod_cidr"), ("service_cidr", "cidr"), ("pod_cidr", "cidr")):
            if a in nets and b in nets and nets[a].overlaps(nets[b]):
                raise ValueError(f"{a} {nets[a]} overlaps {b} {nets[b]}")
        if self.cidr is None and self.subnet_id is None:
            return self.model_copy(update={"cidr": "10.224.0.0/12"})
        return self

    @property
    def create(self) -> bool:
        return self.subnet_id is None


class AzureRbac(_Strict):
    mode: Literal["azure", "kubernetes"] = "azure"
    admin_group_object_ids: list[str] = Field(default_factory=list)
    disable_local_accounts: bool = True
    # Who runs `pulumi up` (with mode azure it gets cluster admin on this cluster): CI's deploy identity
    # is a service principal; set User when a person deploys from a laptop.
    deployer_type: Literal["ServicePrincipal", "User"] = "ServicePrincipal"

    @field_validator("admin_group_object_ids")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        bad = [i for i in v if not _UUID.match(i)]
        if bad:
            raise ValueError(f"{bad} are not Entra ID object ids")
        return v

    @model_validator(mode="after")
    def _usable(self) -> AzureRbac:
        if self.disable_local_accounts and not self.admin_group_object_ids:
            raise ValueError("disable_local_accounts needs admin_group_object_ids, or nobody could reach the cluster")
        return self


class AzureStackConfig(_Common):
    cloud: Literal["azure"]
    resource_group: str | None = Field(default=None, pattern=r"^[-\w._()]{1,89}[-\w_()]$")
    network: AzureNetwork = Field(default_factory=AzureNetwork)
    endpoint: ApiEndpoint = Field(default_factory=ApiEndpoint)
    rbac: AzureRbac = Field(default_factory=lambda: AzureRbac(disable_local_accounts=False))
    gpu_driver: Literal["install", "none"] = Field(
        default="install", description="install: AKS installs the NVIDIA driver; none: the Ansible roles do")
    sku_tier: Literal["Free", "Standard", "Premium"] = "Standard"


# --- the loaded stack ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stack:
    """A validated stack: the file it came from, the cloud settings and the scaler's configuration."""

    file: str
    settings: AwsStackConfig | AzureStackConfig
    scaler: ScalerConfig  # pools resolved, provider_ref set to the cloud group's name

    @property
    def cloud(self) -> Cloud:
        return self.settings.cloud

    @property
    def cluster(self) -> str:
        return self.settings.cluster

    @property
    def region(self) -> str:
        return self.scaler.region

    @property
    def pools(self) -> list[Pool]:
        return list(self.scaler.pools)

    @property
    def zones(self) -> list[str]:
        return sorted({z for p in self.scaler.pools for z in p.zones})

    @property
    def warnings(self) -> list[str]:
        """What the scaler warns about at start (`zone_hints`: a one-zone pool whose fallback spans zones), named
        as stack keys. Not errors: the stack deploys, but a zone-pinned pod could not fall back."""
        return [f"{self.file}: {NAMESPACE}:{hint}" for hint in zone_hints(self.scaler.pools)]

    def scaler_config_dict(self) -> dict[str, Any]:
        """What the scaler reads (`scaler.configfile.load_config` accepts it as YAML)."""
        return self.scaler.model_dump(mode="json", by_alias=True, exclude_none=True)


def stack_file(stack_name: str) -> str:
    return f"Pulumi.{stack_name}.yaml"


def load_stack(config: Mapping[str, Any], file: str) -> Stack:
    """Validate a stack's config (`{"gpuburst:pools": [...], "aws:region": ..., ...}`, values decoded)."""
    errors: list[str] = []
    ours = {k.partition(":")[2]: v for k, v in config.items() if k.startswith(NAMESPACE + ":")}
    cloud = ours.get("cloud")
    if not isinstance(cloud, str) or cloud not in REGION_KEY:
        raise StackConfigError(f"{file}: {NAMESPACE}:cloud: must be one of {', '.join(REGION_KEY)} (got {cloud!r})")
    model: type[AwsStackConfig | AzureStackConfig] = AwsStackConfig if cloud == "aws" else AzureStackConfig
    region_key = REGION_KEY[cloud]
    region = config.get(region_key)
    if not isinstance(region, str) or region not in SUPPORTED_REGIONS[cloud]:
        errors.append(f"{file}: {region_key}: {region!r} is not a supported region "
                      f"(supported: {', '.join(SUPPORTED_REGIONS[cloud])})")
    try:
        settings = model.model_validate(ours)
    except ValidationError as err:
        for e in err.errors():
            path: KeyPath = tuple(f"[{p}]" if isinstance(p, int) else str(p) for p in e["loc"])
            msg = e["msg"].removeprefix("Value error, ")
            raised = (e.get("ctx") or {}).get("error")
            if isinstance(raised, FieldError):
                path, msg = (*path, *raised.path), raised.message
            errors.append(f"{file}: {NAMESPACE}:{render_path(path) or '(top level)'}: {msg}")
        raise StackConfigError("\n".join(errors)) from None
    if errors:
        raise StackConfigError("\n".join(errors))

    scaler_data = {
        **settings.scaler.knobs(), "cluster": settings.cluster, "cloud": cloud, "region": region,
        "pools": settings.pools, "catalogue": settings.catalogue,
    }
    try:
        scaler = parse_config(scaler_data, file)
    except ConfigError as err:
        lines = [f"{file}: {_stack_key(i.path, region_key)}: {i.message}" for i in err.issues]
        raise StackConfigError("\n".join(lines)) from None
    pools = [p.model_copy(update={"provider_ref": _provider_ref(settings, p, errors, file)}) for p in scaler.pools]
    errors += _placement_errors(settings, pools, file)
    if errors:
        raise StackConfigError("\n".join(errors))
    return Stack(file=file, settings=settings, scaler=scaler.model_copy(update={"pools": pools}))


_SCALER_OWN_KEYS = ("cluster", "pools", "catalogue", "cloud")


def _stack_key(path: KeyPath, region_key: str) -> str:
    """The stack key of a scaler config path: pools and catalogue are top-level `gpuburst:` keys, the region
    is the cloud's, every other knob sits under `gpuburst:scaler`."""
    if path[:1] == ("region",):
        return region_key
    where = render_path(path) or "(top level)"
    return f"{NAMESPACE}:{where}" if path[:1] and path[0] in _SCALER_OWN_KEYS else f"{NAMESPACE}:scaler.{where}"


def _provider_ref(settings: AwsStackConfig | AzureStackConfig, pool: Pool, errors: list[str], file: str) -> str:
    """The cloud group's name: the ASG name on AWS, the agent pool name on Azure."""
    where = f"{file}: {NAMESPACE}:pools[{pool.name}].provider_ref"
    if settings.cloud == "aws":
        return pool.provider_ref or f"{settings.cluster}-{pool.name}"
    ref = pool.provider_ref or pool.name.replace("-", "")
    if not _AGENT_POOL_NAME.match(ref):
        errors.append(f"{where}: AKS agent pool names are 1-12 lower-case letters and digits starting with a "
                      f"letter; {ref!r} is not: set provider_ref")
    return ref


def _placement_errors(settings: AwsStackConfig | AzureStackConfig, pools: list[Pool], file: str) -> list[str]:
    errors: list[str] = []
    key = f"{file}: {NAMESPACE}:pools"
    if not any(p.role == "system" for p in pools):
        errors.append(f"{key}: no pool has role system: the cluster's own pods (CoreDNS, the scaler) need one")
    refs: dict[str, str] = {}
    by_name = {p.name: p for p in pools}
    for p in pools:
        if p.capacity_type == "spot":
            # Spot capacity can vanish: the fallback chain must reach on-demand / regular capacity.
            chain, cur = [p.name], p
            while cur.capacity_type == "spot" and cur.fallback in by_name and cur.fallback not in chain:
                cur = by_name[cur.fallback]
                chain.append(cur.name)
            if cur.capacity_type == "spot":
                errors.append(f"{key}[{p.name}].fallback: a spot pool needs a fallback chain that ends in an "
                              f"on-demand pool (got {' -> '.join(chain)})")
        if p.provider_ref in refs:
            errors.append(f"{key}[{p.name}].provider_ref: {p.provider_ref!r} is also pool {refs[p.provider_ref]!r}'s")
        refs[str(p.provider_ref)] = p.name
        if p.role == "system" and p.min_size < 1:
            errors.append(f"{key}[{p.name}].min: a system pool needs at least one node")
        if p.role == "gpu" and p.capacity_type == "spot" and len(p.zones) > 1:
            errors.append(f"{key}[{p.name}].zones: declare one spot GPU pool per zone (e.g. {p.name}-1, "
                          f"{p.name}-2) so the scaler can move to another zone when one has no capacity")
        if settings.cloud == "azure":  # AKS agent pools take "1".."3" (AWS zones: parse_config checks them)
            bad = [z for z in p.zones if z not in AZURE_ZONES]
            if bad:
                errors.append(f"{key}[{p.name}].zones: {bad} are not availability zones (use {list(AZURE_ZONES)})")
    if isinstance(settings, AwsStackConfig):
        zones = sorted({z for p in pools for z in p.zones})
        net = settings.network
        if net.create and len(zones) < 2:
            errors.append(f"{key}: EKS needs subnets in two zones; the pools use only {zones}")
        if net.create and len(zones) > 3:
            errors.append(f"{file}: {NAMESPACE}:network.cidr: a new VPC spans at most three zones; the pools use "
                          f"{zones}: give vpc_id and private_subnets instead")
        if not net.create:
            missing = [z for z in zones if z not in net.private_subnets]
            if missing:
                errors.append(f"{file}: {NAMESPACE}:network.private_subnets: no subnet for zones {missing}")
    if isinstance(settings, AzureStackConfig):
        for p in pools:
            count = len(p.to_tags(settings.cluster)) + len(settings.tags) + 1
            if count > AZURE_MAX_TAGS:
                errors.append(f"{key}[{p.name}].labels: the pool's scale set would carry {count} tags; "
                              f"Azure allows {AZURE_MAX_TAGS} (fewer labels, taints or gpuburst:tags)")
        system = [p for p in pools if p.role == "system"]
        if len(system) > 1:
            errors.append(f"{key}: one system pool on AKS (the cluster's default pool); "
                          f"got {[p.name for p in system]}")
    return errors
