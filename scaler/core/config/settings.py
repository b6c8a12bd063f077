"""The scaler's configuration: the pools plus the knobs of the planners, and `runtime`, those of `scaler run`'s
adapters (scaler.core.config.runtime).

Pure: `parse_config` takes the already-loaded mapping and a source name for messages;
`scaler.configfile` reads files. Every error is an `Issue` naming the source, the key path (pool, field)
and the fault. Besides each field's own range, the checks where one value makes another meaningless
run at load, for `run` as for `simulate`: timings against each other, every pool's allocatable (after
the kubelet reserve its max_pods implies and its DaemonSets) against its instance type, zones against
the region, and caps no node of a pool could ever fit under.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scaler.core.config.catalogue import CATALOGUE, Cloud, InstanceType
from scaler.core.config.pool import Pool
from scaler.core.config.runtime import Runtime
from scaler.core.config.specs import InstanceTypeSpec
from scaler.core.model import keys
from scaler.core.model.errors import ConfigError, FieldError, Issue, KeyPath
from scaler.core.model.quantity import format_units

__all__ = ["ConfigError", "Limits", "Runtime", "ScaleDownSettings", "ScalerConfig", "Timings", "parse_config"]

WEEK = 7 * 86400.0  # no timing of the scaler is meaningful beyond this
AZURE_ZONES = ("1", "2", "3")


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    max_nodes: int | None = Field(default=None, ge=0)
    max_gpus: int | None = Field(default=None, ge=0)
    max_cost_per_hour: float | None = Field(default=None, ge=0)
    max_nodes_per_pass: int = Field(default=50, gt=0)


class Timings(BaseModel):
    """Seconds. Defaults are what a real EKS / AKS GPU pool shows (see docs/simulator.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    scan_interval: float = Field(default=10, gt=0, le=3600)
    # Set: every pool's unneeded nodes are removed after this long. Unset: each pool's time is chosen each pass
    # from its own idle periods (scaler.core.planning.idle_time), within scale_down.unneeded_time_min / _max.
    unneeded_time: float | None = Field(default=None, ge=0, le=WEEK)
    provision_timeout: float = Field(default=900, gt=0, le=WEEK)
    unavailable_ttl: float = Field(default=1800, gt=0, le=WEEK)
    backoff_initial: float = Field(default=300, gt=0, le=WEEK)
    backoff_max: float = Field(default=1800, gt=0, le=WEEK)
    gpu_boot: float = Field(default=240, gt=0, le=WEEK)
    cpu_boot: float = Field(default=120, gt=0, le=WEEK)
    # A stopped warm-pool instance (scaler.core.config.warm) to Ready: started, its boot and image pulls done before.
    warm_start: float = Field(default=90, gt=0, le=WEEK)
    # A planned drain whose pods cannot all be evicted in this time is abandoned (the node uncordoned).
    drain_timeout: float = Field(default=600, gt=0, le=WEEK)
    # A Node whose instance is gone is normally deleted by the cloud controller manager within a minute;
    # after this long the scaler deletes it (some clusters run none).
    node_gone_grace: float = Field(default=300, gt=0, le=WEEK)
    # How long a Provisioned ProvisioningRequest's capacity is kept for its pods (cluster-autoscaler's 10 min).
    booking_ttl: float = Field(default=600, gt=0, le=WEEK)
    # The longest wait between two passes after failed passes (the wait doubles from scan_interval).
    error_backoff_max: float = Field(default=300, gt=0, le=WEEK)

    @model_validator(mode="after")
    def _consistent(self) -> Timings:
        if self.backoff_initial > self.backoff_max:
            raise FieldError("backoff_initial", f"{self.backoff_initial:g} s is above backoff_max "
                             f"({self.backoff_max:g} s): the backoff could never grow")
        if self.unneeded_time is not None and 0 < self.unneeded_time < self.scan_interval:
            raise FieldError("unneeded_time", f"{self.unneeded_time:g} s is shorter than scan_interval "
                             f"({self.scan_interval:g} s): a node is only seen unneeded once per pass "
                             "(0 removes at the first pass)")
        if self.unavailable_ttl < self.scan_interval:
            raise FieldError("unavailable_ttl", f"{self.unavailable_ttl:g} s is shorter than scan_interval "
                             f"({self.scan_interval:g} s): an offering marked unavailable would be tried again "
                             "before the next pass could see it")
        return self


class ScaleDownSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    enabled: bool = True
    utilization_threshold: float = Field(default=0.5, ge=0, le=1)
    budget_fraction: float = Field(default=0.1, gt=0, le=1)
    # Remove an unneeded node whose pods fit nowhere else when new nodes of cheaper pools would hold
    # them for less (the 2-GPU pod that keeps an 8-GPU node alive); its pods wait one node boot.
    consolidate: bool = True
    # The adaptive unneeded time (timings.unneeded_time unset; scaler.core.planning.idle_time): its bounds (the
    # maximum is cluster-autoscaler's fixed 10 minutes), and the boots a removed node's return costs on top of
    # its own for each GPU beyond the first.
    unneeded_time_min: float = Field(default=20, ge=0, le=WEEK)
    unneeded_time_max: float = Field(default=600, ge=0, le=WEEK)
    rebuy_weight: float = Field(default=1.5, ge=0, le=100)
    # Idle periods kept per pool (scaler.core.planning.idle_time): recent enough to follow a changing workload,
    # enough to be stable; each pass costs at most its square per pool.
    idle_history: int = Field(default=40, ge=1, le=1000)

    @model_validator(mode="after")
    def _bounds(self) -> ScaleDownSettings:
        if self.unneeded_time_min > self.unneeded_time_max:
            raise FieldError("unneeded_time_min", f"{self.unneeded_time_min:g} s is above unneeded_time_max "
                             f"({self.unneeded_time_max:g} s)")
        return self


class ScalerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    # Letters, digits, "-" and "." (kops names its clusters by DNS name: ml.example.com).
    cluster: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]{0,99}$")
    cloud: Cloud
    region: str = ""
    spot_price_factor: float = Field(default=0.4, gt=0, le=1)
    gang_label: str = keys.LABEL_POD_GROUP
    gang_min_annotation: str = keys.ANNOTATION_POD_GROUP_MIN
    discover: bool = Field(default=False, description="also adopt groups found by cluster-autoscaler tags")
    # Which pool new nodes come from: "price" (the cheapest per pod, spot first, then the least waste), or
    # cluster-autoscaler's "random" (its default) and "least-waste" (ties at random), for comparing with it.
    expander: Literal["price", "least-waste", "random"] = "price"
    limits: Limits = Limits()
    timings: Timings = Timings()
    scale_down: ScaleDownSettings = ScaleDownSettings()
    runtime: Runtime = Runtime()  # how `scaler run` talks to the API server and the clouds (no plan reads it)
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
        # Against the defaults, not the keys given: a rendered config (the Pulumi program's ConfigMap) carries them all.
        adaptive = [k for k in ("unneeded_time_min", "unneeded_time_max", "rebuy_weight")
                    if getattr(self.scale_down, k) != ScaleDownSettings.model_fields[k].default]
        if self.timings.unneeded_time is not None and adaptive:
            raise FieldError(("scale_down", adaptive[0]), f"sets the adaptive unneeded time, which the fixed "
                             f"timings.unneeded_time ({self.timings.unneeded_time:g} s) replaces: drop one of them")
        seen: set[str] = set()
        for pool in self.pools:
            if pool.name in seen:
                raise FieldError(("pools", f"[{pool.name}]", "name"), f"pool {pool.name!r} is declared twice")
            seen.add(pool.name)
            if pool.cloud != self.cloud:
                raise FieldError(("pools", f"[{pool.name}]", "cloud"), f"{pool.cloud} in a {self.cloud} config")
        by_name = {p.name: p for p in self.pools}
        for pool in self.pools:
            where = ("pools", f"[{pool.name}]", "fallback")
            if pool.fallback is None:
                if pool.capacity_type in ("spot", "capacity-block") and pool.role == "gpu":
                    raise FieldError(where, f"is required for a {pool.capacity_type} GPU pool: its pods need "
                                     "somewhere to go when its capacity does")
                continue
            target = by_name.get(pool.fallback)
            if target is None:
                raise FieldError(where, f"{pool.fallback!r} is not a declared pool")
            if target.name == pool.name:
                raise FieldError(where, "names the pool itself")
            # Follow the chain: a cycle would bounce pods forever.
            chain, cur = [pool.name], target
            while cur.fallback:
                if cur.fallback in chain or cur.name in chain:
                    raise FieldError(where, f"the fallback chain loops: {' -> '.join([*chain, cur.name])}")
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




# --- loading ------------------------------------------------------------------------------------------
def _path(loc: tuple[int | str, ...], data: Any) -> KeyPath:
    """('pools', 2, 'max') -> ('pools', '[gpu-spot-a]', 'max'), using the entry's name when it has one."""
    parts: list[str] = []
    node: Any = data
    for item in loc:
        if isinstance(item, int):
            entry = node[item] if isinstance(node, list) and 0 <= item < len(node) else None
            name = entry.get("name") if isinstance(entry, dict) else None
            parts.append(f"[{name}]" if isinstance(name, str) and name else f"[{item}]")
            node = entry
        else:
            parts.append(str(item))
            node = node.get(item) if isinstance(node, dict) else None
    return tuple(parts)


# pydantic's words for a wrong type name its own classes ("instance of TimeSlicing"): say what the file needs.
_EXPECTED = {"string_type": "a string", "dict_type": "a mapping", "model_type": "a mapping",
             "model_attributes_type": "a mapping", "int_type": "an integer", "int_parsing": "an integer",
             "int_from_float": "an integer", "float_type": "a number", "float_parsing": "a number",
             "bool_type": "true or false", "bool_parsing": "true or false"}
_FORMS: dict[KeyPath, str] = {("cluster",): "1-100 letters, digits, '-' or '.', starting with a letter or digit"}
_TAG = re.compile(r"^(str|int|float|bool|none|[a-z-]+\[.*\]|[A-Z]\w*)$")  # a union member in an error's loc


def _issues(err: ValidationError, data: Any, source: str) -> list[Issue]:
    found: dict[KeyPath, list[str]] = {}
    in_union: set[KeyPath] = set()
    for e in err.errors():
        loc = tuple(e["loc"])
        tagged = [i for i, part in enumerate(loc) if isinstance(part, str) and _TAG.match(part)
                  and not _has_key(data, loc[:i], part)]
        path = _path(tuple(p for i, p in enumerate(loc) if i not in tagged), data)
        if tagged:
            in_union.add(path)
        raised = (e.get("ctx") or {}).get("error")
        if isinstance(raised, FieldError):
            found.setdefault((*path, *raised.path), []).append(raised.message)
        elif e["type"] in _EXPECTED:
            found.setdefault(path, []).append(_EXPECTED[e["type"]])
        elif e["type"] == "string_pattern_mismatch":
            found.setdefault(path, []).append(f"{e['input']!r} must be {_FORMS.get(path, 'of the documented form')}")
        else:
            found.setdefault(path, []).append(e["msg"].removeprefix("Value error, "))
    # A value no member of a union takes: the member that read deepest says why; the others only what they wanted.
    deepest = {p: m for p, m in found.items()
               if p not in in_union or not any(o[:len(p)] == p and len(o) > len(p) for o in in_union)}
    out = []
    for path, messages in deepest.items():
        wanted = [m for m in messages if m in _EXPECTED.values()]
        text = f"expected {' or '.join(dict.fromkeys(wanted))}" if wanted else "; ".join(messages)
        out.append(Issue(source, path or ("(top level)",), text))
    return out


def _has_key(data: Any, loc: tuple[int | str, ...], key: str) -> bool:
    node = data
    for part in loc:
        node = node[part] if isinstance(node, list) and isinstance(part, int) and part < len(node) else \
            node.get(part) if isinstance(node, dict) else None
    return isinstance(node, dict) and key in node


def parse_config(data: Any, source: str) -> ScalerConfig:
    """Validate a pools / scaler config mapping; resolve pools against the catalogue; check what the
    values mean together. Raises ConfigError with every issue found, each with its key path."""
    if not isinstance(data, dict):
        raise ConfigError(Issue(source, (), f"expected a mapping at the top level, got {type(data).__name__}"))
    try:
        config = ScalerConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_issues(err, data, source)) from None
    catalogue = config.full_catalogue()
    resolved: list[Pool] = []
    issues: list[Issue] = []
    for pool in config.pools:
        try:
            resolved.append(pool.resolve(catalogue))
        except FieldError as err:
            issues.append(Issue(source, ("pools", f"[{pool.name}]", *err.path), err.message))
    if issues:
        raise ConfigError(issues)
    config = config.model_copy(update={"pools": resolved})
    issues = [Issue(source, path, message) for path, message in meaning_errors(config)]
    if issues:
        raise ConfigError(issues)
    return config


# The settings checked across fields, once each field is valid on its own (`parse_config` calls
# `meaning_errors`): timings that make each other meaningless, pools whose zones, region, caps or fallback
# ladder cannot work, and pools whose own labels or taints contradict what the pool model derives. Each
# error is a key path and a message.


def meaning_errors(config: ScalerConfig) -> list[tuple[KeyPath, str]]:
    """Values each valid alone that make another meaningless (pools resolved)."""
    out: list[tuple[KeyPath, str]] = []
    t = config.timings
    roles = {p.role for p in config.pools}
    for kind, boot in (("GPU", t.gpu_boot if "gpu" in roles else 0.0),
                       ("cpu", t.cpu_boot if roles - {"gpu"} else 0.0)):
        if boot and t.provision_timeout < boot + t.scan_interval:
            out.append((("timings", "provision_timeout"),
                        f"{t.provision_timeout:g} s is shorter than a {kind} node's boot ({kind.lower()}_boot "
                        f"{boot:g} s) plus one pass ({t.scan_interval:g} s): every such node would be given back "
                        "before it registers"))
            break
    for pool in config.pools:
        out += [(("pools", f"[{pool.name}]", *path), msg) for path, msg in _pool_errors(pool, config)]
        out += [(("pools", f"[{pool.name}]", *path), msg) for path, msg in contradictions(pool, config)]
    out += _ladder_errors(config)
    out += _cap_errors(config)
    out += _repair_errors(config)
    return out


def _repair_errors(config: ScalerConfig) -> list[tuple[KeyPath, str]]:
    """A repair grace shorter than one pass could never be honoured: a signal is only seen once per pass."""
    scan = config.timings.scan_interval
    return [(("pools", f"[{pool.name}]", "repair", name), f"{grace:g} s is shorter than scan_interval ({scan:g} s): "
             "a signal is only seen once per pass (0 repairs at the first pass)")
            for pool in config.pools if pool.repair.enabled
            for name, grace in pool.repair.graces().items() if 0 < grace < scan]


def _ladder_errors(config: ScalerConfig) -> list[tuple[KeyPath, str]]:
    """A rung of a fallback chain that could never take a pod of the rung above it (pools resolved)."""
    out: list[tuple[KeyPath, str]] = []
    by_name = {p.name: p for p in config.pools}
    for pool in config.pools:
        below = by_name.get(pool.fallback or "")
        if below is None:
            continue
        need = max(pool.min_pod_gpus, 1 if pool.gpus else 0)
        why = None
        if need and not below.gpus:
            why = "has no GPU"
        elif need > below.gpus:
            why = f"has {below.gpus} GPUs a node and {pool.name}'s pods ask for at least {need}"
        elif pool.gpus and below.min_pod_gpus > pool.gpus:
            why = f"takes pods of at least {below.min_pod_gpus} GPUs and {pool.name}'s ask for at most {pool.gpus}"
        elif _sharing_kind(pool) == _sharing_kind(below):  # a different kind is `contradictions`' to say
            shared = set(pool.sharing.resources()) if pool.sharing is not None else set()
            # a DRA pool's slices are devices of its slices, not capacity: what its layout offers
            offered = below.sharing.resources() if below.dra and below.sharing is not None else below.capacity()
            missing = sorted(shared - set(offered))
            if missing:
                why = f"offers no {', '.join(missing)}, which {pool.name}'s pods ask for"
        if why:
            out.append((("pools", f"[{pool.name}]", "fallback"), f"{below.name} {why}: no pod of this pool could "
                        "ever fall back there"))
    return out


# Keys the pool model spells from gpu_sharing / min_pod_gpus: a user's own value would tell the device plugin,
# GPU feature discovery or the scheduler something the pool is not, even where the model derives none.
_SHARING_LABELS = (keys.LABEL_DEVICE_PLUGIN_CONFIG, keys.LABEL_GPU_SHARING_STRATEGY, keys.LABEL_GPU_REPLICAS,
                   keys.LABEL_MIG_STRATEGY, keys.LABEL_MIG_CONFIG)
_MODEL_TAINTS = (keys.TAINT_GPU_SHARING, keys.TAINT_MIN_GPUS)


def _sharing_kind(pool: Pool) -> str:
    if pool.sharing is None:
        return "whole GPUs"
    return keys.SHARING_TIME_SLICING if pool.sharing.sharing.time_slicing else f"MIG {pool.sharing.mig_strategy}"


def contradictions(pool: Pool, config: ScalerConfig) -> list[tuple[KeyPath, str]]:
    """Fields of one pool that contradict what the pool model derives, or its fallback (pools resolved)."""
    out: list[tuple[KeyPath, str]] = []
    target = next((p for p in config.pools if p.name == pool.fallback), None)
    if target is not None and pool.gpus and target.gpus and pool.gpu_allocation != target.gpu_allocation:
        out.append((("fallback",), f"{target.name!r} allocates GPUs by {target.gpu_allocation}, this pool by "
                    f"{pool.gpu_allocation}: the pods it serves ask for GPUs the fallback's nodes do not offer "
                    "(declare the same gpu_allocation)"))
    if target is not None and pool.gpus and target.gpus and _sharing_kind(pool) != _sharing_kind(target):
        out.append((("fallback",), f"{target.name!r} gives {_sharing_kind(target)}, this pool {_sharing_kind(pool)}: "
                    "the pods it serves could not run on the fallback (declare the same gpu_sharing)"))
    derived = pool.model_copy(update={"labels": {}}).node_labels()
    for key, value in pool.labels.items():
        if key in derived and derived[key] != value:
            out.append((("labels", key), f"{value!r} overrides {derived[key]!r}, which the pool derives from its "
                        "other fields: drop the label"))
        elif key in _SHARING_LABELS and key not in derived:
            out.append((("labels", key), "is spelled by gpu_sharing, which this pool does not declare: drop the "
                        "label or declare gpu_sharing"))
    taints = {t.key: t for t in pool.derived_taints()}
    for i, spec in enumerate(pool.taints):
        own = taints.get(spec.key)
        if own is not None and own != spec.to_taint():
            out.append((("taints", f"[{i}]"), f"{spec.key}={spec.value}:{spec.effect} overrides the pool's own "
                        f"{own.key}={own.value}:{own.effect}: drop the taint"))
        elif own is None and spec.key in _MODEL_TAINTS:
            out.append((("taints", f"[{i}]"), f"{spec.key} is spelled by gpu_sharing / min_pod_gpus, which give "
                        "this pool none: drop the taint or declare the field"))
    return out


def _pool_errors(pool: Pool, config: ScalerConfig) -> list[tuple[KeyPath, str]]:
    out: list[tuple[KeyPath, str]] = []
    itype = pool.itype.name
    if pool.max_size == 0:
        out.append((("max",), "0: the pool could never hold a node (remove it to disable it)"))
    try:
        daemonsets = pool.daemonset_requests()
    except FieldError as err:
        return [(("daemonset_overhead", *err.path), err.message)]
    capacity, allocatable = pool.capacity(), pool.allocatable()
    for res, value in sorted(allocatable.items()):
        if value < 0:
            field = "max_pods" if res == keys.RES_MEMORY else "root_volume_gib" if res == keys.RES_EPHEMERAL \
                else "instance_types"
            out.append(((field,), f"the kubelet reserve leaves {itype} no allocatable {res} "
                        f"({format_units(res, capacity[res])} minus {format_units(res, capacity[res] - value)} "
                        f"reserved{f' for {pool.max_pods} pods' if field == 'max_pods' else ''})"))
    if out:
        return out
    for res, value in sorted(daemonsets.items()):
        left = allocatable.get(res, 0) - value
        if left < 0:
            out.append((("daemonset_overhead", res), f"{format_units(res, value)} is more than {itype}'s allocatable "
                        f"{res} ({format_units(res, allocatable.get(res, 0))})"))
    if not out and (allocatable.get(keys.RES_PODS, 0) - daemonsets.get(keys.RES_PODS, 0)) < 1:
        out.append((("max_pods",), f"{pool.max_pods} leaves no pod slot beside the pool's DaemonSets"))
    out += _zone_errors(pool, config)
    return out


_AWS_ZONE = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]$")


def _region(config: ScalerConfig) -> str:
    """The config's region; without one, on AWS, the region of the first pool's first zone (one cluster, one
    region: a zone of another region would never get a node)."""
    if config.region or config.cloud != "aws":
        return config.region
    zones = [z for p in config.pools for z in p.zones]
    match = _AWS_ZONE.match(zones[0]) if zones else None
    return match.group(1) if match else ""


def _zone_errors(pool: Pool, config: ScalerConfig) -> list[tuple[KeyPath, str]]:
    region = _region(config)
    if not region:
        return []
    if config.cloud == "aws":
        bad = [z for z in pool.zones if not re.fullmatch(rf"{re.escape(region)}[a-z]", z)]
    else:
        bad = [z for z in pool.zones if z not in AZURE_ZONES and not re.fullmatch(rf"{re.escape(region)}-[123]", z)]
    return [(("zones",), f"{bad} are not zones of {region}")] if bad else []


def _cap_errors(config: ScalerConfig) -> list[tuple[KeyPath, str]]:
    """Caps under which a pool could never add a node, or the pools' minimums already break."""
    out: list[tuple[KeyPath, str]] = []
    lim = config.limits
    gpus = [f"{p.name!r} ({p.gpus} GPUs)" for p in config.pools if lim.max_gpus is not None and p.gpus > lim.max_gpus]
    if gpus:
        out.append((("limits", "max_gpus"), f"{lim.max_gpus} is below one node of pool {', '.join(gpus)}: "
                    "it could never scale up"))
    cost = lim.max_cost_per_hour
    dear = [f"{p.name!r} ({config.price(p):g}/h)" for p in config.pools if cost is not None and config.price(p) > cost]
    if dear:
        out.append((("limits", "max_cost_per_hour"), f"{cost:g} is below one node of pool {', '.join(dear)}: "
                    "it could never scale up"))
    if lim.max_nodes is not None and lim.max_nodes < sum(p.min_size for p in config.pools):
        out.append((("limits", "max_nodes"), f"{lim.max_nodes} is below the pools' minimums "
                    f"({sum(p.min_size for p in config.pools)} nodes)"))
    if lim.max_gpus is not None and lim.max_gpus < sum(p.min_size * p.gpus for p in config.pools):
        out.append((("limits", "max_gpus"), f"{lim.max_gpus} is below the pools' minimums "
                    f"({sum(p.min_size * p.gpus for p in config.pools)} GPUs)"))
    return out
