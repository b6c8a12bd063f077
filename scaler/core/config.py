"""The scaler's configuration: the pools plus the knobs of the planners.

Pure: `parse_config` takes the already-loaded mapping and a source name for messages;
`scaler.configfile` reads files. Every error names the source, the pool and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scaler.core import keys
from scaler.core.catalogue import CATALOGUE, Cloud, InstanceType
from scaler.core.pool import InstanceTypeSpec, Pool
from scaler.core.sharing import SharingError


class ConfigError(ValueError):
    """Bad configuration: the message names the file (or stack), the pool and the field."""


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    max_nodes: int | None = Field(default=None, ge=0)
    max_gpus: int | None = Field(default=None, ge=0)
    max_cost_per_hour: float | None = Field(default=None, ge=0)
    max_nodes_per_pass: int = Field(default=50, gt=0)


class Timings(BaseModel):
    """Seconds. Defaults are what a real EKS / AKS GPU pool shows (see docs/simulator.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    scan_interval: float = Field(default=10, gt=0)
    unneeded_time: float = Field(default=600, ge=0)
    provision_timeout: float = Field(default=900, gt=0)
    unavailable_ttl: float = Field(default=1800, gt=0)
    backoff_initial: float = Field(default=300, gt=0)
    backoff_max: float = Field(default=1800, gt=0)
    gpu_boot: float = Field(default=240, gt=0)
    cpu_boot: float = Field(default=120, gt=0)


class ScaleDown(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = True
    utilization_threshold: float = Field(default=0.5, ge=0, le=1)
    budget_fraction: float = Field(default=0.1, gt=0, le=1)
    # Remove an unneeded node whose pods fit nowhere else when new nodes of cheaper pools would hold
    # them for less (the 2-GPU pod that keeps an 8-GPU node alive); its pods wait one node boot.
    consolidate: bool = True


class ScalerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    cluster: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,99}$")
    cloud: Cloud
    region: str = ""
    spot_price_factor: float = Field(default=0.4, gt=0, le=1)
    gang_label: str = keys.LABEL_POD_GROUP
    gang_min_annotation: str = keys.ANNOTATION_POD_GROUP_MIN
    discover: bool = Field(default=False, description="also adopt groups found by cluster-autoscaler tags")
    limits: Limits = Limits()
    timings: Timings = Timings()
    scale_down: ScaleDown = ScaleDown()
    catalogue: dict[str, InstanceTypeSpec] = Field(default_factory=dict)
    pools: list[Pool] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _inherit_cloud(cls, data: Any) -> Any:
        """A pool without `cloud` is in the config's cloud."""
        if isinstance(data, dict) and isinstance(data.get("pools"), list):
            data = {**data, "pools": [
                {"cloud": data.get("cloud"), **p} if isinstance(p, dict) else p for p in data["pools"]
            ]}
        return data

    @model_validator(mode="after")
    def _pools(self) -> ScalerConfig:
        seen: set[str] = set()
        for pool in self.pools:
            if pool.name in seen:
                raise ValueError(f"pool {pool.name!r} is declared twice")
            seen.add(pool.name)
            if pool.cloud != self.cloud:
                raise ValueError(f"pool {pool.name!r}: cloud {pool.cloud} in a {self.cloud} config")
        by_name = {p.name: p for p in self.pools}
        for pool in self.pools:
            if pool.fallback is None:
                if pool.capacity_type == "spot" and pool.role == "gpu":
                    raise ValueError(f"pool {pool.name!r}: fallback is required for a spot GPU pool")
                continue
            target = by_name.get(pool.fallback)
            if target is None:
                raise ValueError(f"pool {pool.name!r}: fallback {pool.fallback!r} is not a declared pool")
            if target.name == pool.name:
                raise ValueError(f"pool {pool.name!r}: fallback names the pool itself")
            # Follow the chain: a cycle would bounce pods forever.
            chain, cur = [pool.name], target
            while cur.fallback:
                if cur.fallback in chain or cur.name in chain:
                    raise ValueError(f"pool {pool.name!r}: fallback chain loops: {' -> '.join([*chain, cur.name])}")
                chain.append(cur.name)
                cur = by_name[cur.fallback]
        return self

    def full_catalogue(self) -> dict[str, InstanceType]:
        out = dict(CATALOGUE)
        for name, spec in self.catalogue.items():
            out[name] = InstanceType(name=name, cloud=self.cloud, **spec.model_dump())
        return out

    def pool(self, name: str) -> Pool:
        for p in self.pools:
            if p.name == name:
                return p
        raise KeyError(name)

    def price(self, pool: Pool) -> float:
        return pool.hourly_price(self.spot_price_factor)


def _where(loc: tuple[int | str, ...], data: Mapping[str, Any]) -> str:
    """('pools', 2, 'max') -> 'pools[gpu-spot-a].max' using the pool's name when it has one."""
    parts: list[str] = []
    node: Any = data
    for item in loc:
        if isinstance(item, int):
            name = node[item].get("name") if isinstance(node, list) and item < len(node) and \
                isinstance(node[item], dict) else None
            parts[-1] += f"[{name}]" if name else f"[{item}]"
            node = node[item] if isinstance(node, list) and item < len(node) else None
        else:
            parts.append(str(item))
            node = node.get(item) if isinstance(node, dict) else None
    return ".".join(parts)


def parse_config(data: Any, source: str) -> ScalerConfig:
    """Validate a pools / scaler config mapping; resolve pools against the catalogue."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        config = ScalerConfig.model_validate(data)
    except ValidationError as err:
        lines = []
        for e in err.errors():
            where = _where(tuple(e["loc"]), data) or "(top level)"
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{source}: {where}: {msg}")
        raise ConfigError("\n".join(lines)) from None
    catalogue = config.full_catalogue()
    resolved = []
    for pool in config.pools:
        try:
            resolved.append(pool.resolve(catalogue))
        except SharingError as err:
            raise ConfigError(f"{source}: pools[{pool.name}].{err.field}: {err}") from None
        except ValueError as err:
            field = "instance_types" if "instance type" in str(err) or "GPU counts" in str(err) else \
                "gpus_per_node" if "gpus_per_node" in str(err) else \
                "min_pod_gpus" if "min_pod_gpus" in str(err) else "role"
            raise ConfigError(f"{source}: pools[{pool.name}].{field}: {err}") from None
    return config.model_copy(update={"pools": resolved})
