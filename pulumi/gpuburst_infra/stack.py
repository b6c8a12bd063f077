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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gpuburst_infra.stack_models import (
    AGENT_POOL_NAME,
    AZURE_MAX_TAGS,
    NAMESPACE,
    REGION_KEY,
    SUPPORTED_REGIONS,
    AwsStackConfig,
    AzureStackConfig,
    StackConfigError,
)
from scaler.core.config.catalogue import Cloud
from scaler.core.config.pool import Pool
from scaler.core.config.settings import AZURE_ZONES, ConfigError, ScalerConfig, parse_config
from scaler.core.model.errors import FieldError, KeyPath, render_path
from scaler.core.planning.capacity import zone_hints


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
    if not AGENT_POOL_NAME.match(ref):
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
