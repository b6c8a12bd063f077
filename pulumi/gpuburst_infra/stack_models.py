"""The stack configuration's typed models: the settings of each cloud (network, API endpoint, RBAC), the
supported regions and Kubernetes versions. `stack.load_stack` validates a stack file with them.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scaler.core.config.catalogue import Cloud
from scaler.core.model.errors import FieldError

NAMESPACE = "gpuburst"
REGION_KEY: dict[Cloud, str] = {"aws": "aws:region", "azure": "azure-native:location"}

# Regions with the GPU families of the catalogue and three zones; extend when a team needs another.
SUPPORTED_REGIONS: dict[Cloud, tuple[str, ...]] = {
    "aws": ("us-east-1", "us-east-2", "us-west-2", "ca-central-1", "eu-west-1", "eu-west-2",
            "eu-central-1", "eu-north-1", "ap-northeast-1", "ap-southeast-2", "ap-south-1"),
    "azure": ("eastus", "eastus2", "southcentralus", "westus2", "westus3", "northeurope",
              "westeurope", "swedencentral", "uksouth", "japaneast", "australiaeast"),
}
# Kubernetes minor versions a stack may name: those under standard support on EKS (AL2023 images) and
# AKS on 2026-11-28, plus 1.33 so that a cluster still on it can be upgraded one minor at a time.
# EKS (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html, "release calendar"; 14 months
# of standard support, then 12 months of paid extended support):
#   1.33: end of standard support July 29, 2026 (extended, billed per cluster hour, since)
#   1.34: EKS release Oct 2025, end of standard support Dec 2, 2026
#   1.35: EKS release Jan 28, 2026, end of standard support Mar 27, 2027
#   1.36: upstream release Apr 22, 2026, upstream end of life Jun 28, 2027 (kubernetes.io/releases/1.36);
#         on EKS 14 months of standard support from its EKS release, which follows upstream's: until mid-2027
#         at the earliest (check the calendar for the day)
# AKS (learn.microsoft.com/azure/aks/supported-kubernetes-versions, "AKS Kubernetes release calendar";
# "End of life" is the last day of the month, LTS aside):
#   1.33: GA Jun 2025, end of life Jul 2026;  1.34: GA Nov 2025, end of life Nov 2026
#   1.35: GA Mar 2026, end of life Mar 2027
#   1.36: GA after upstream's Apr 22, 2026 release; AKS supports a GA minor 12 months (its "Kubernetes version
#         support policy"): supported on 2026-11-28, until mid-2027 at the earliest
# The Workload API (gangs as PodGroups, KEP-4671: feature gate GenericWorkload and scheduling.k8s.io/v1beta1,
# beta but off by default in 1.37, alpha before) cannot be switched on on either: EKS and AKS take no
# kube-apiserver or kube-scheduler feature gates or runtime-config and serve only the APIs on by default
# (EKS: "all generally available (GA) features"). Gangs there are scheduler-plugins' or Volcano's PodGroups
# (CRDs) or Kueue's ProvisioningRequests; the scaler reads whichever PodGroups the server serves
# (docs/planner.md, "Gangs").
# DRA (resource.k8s.io/v1) is GA and on by default upstream since 1.34. EKS serves every GA API ("Amazon
# EKS supports all generally available (GA) features of the Kubernetes API", its version FAQ); AKS
# documents no flag for it on 1.34+ (an AKS blog post of November 2025 still called DRA alpha: true of
# the versions before 1.34). `gpu_allocation: dra` pools need 1.34+.
SUPPORTED_KUBERNETES: dict[Cloud, tuple[str, ...]] = {
    "aws": ("1.33", "1.34", "1.35", "1.36"),
    "azure": ("1.33", "1.34", "1.35", "1.36"),
}
# What a stack gets without gpuburst:kubernetes_version: the newest minor both clouds serve, under standard
# support on both on 2026-11-28 and into 2027. Move it with the calendars above.
DEFAULT_KUBERNETES = "1.36"
DRA_MIN_KUBERNETES = (1, 34)
AZURE_MAX_TAGS = 50
AGENT_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
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
    kubernetes_version: str = DEFAULT_KUBERNETES
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
        dra = [p.get("name") for p in self.pools if isinstance(p, dict) and p.get("gpu_allocation") == "dra"]
        if dra and tuple(map(int, self.kubernetes_version.split("."))) < DRA_MIN_KUBERNETES:
            raise FieldError("kubernetes_version", f"{self.kubernetes_version!r}: pool {dra[0]} has gpu_allocation "
                             "dra, which needs Kubernetes 1.34 or later (resource.k8s.io/v1)")
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
