"""The scaler's settings checked across fields, once each field is valid on its own (`settings.parse_config`
calls `meaning_errors`): timings that make each other meaningless, pools whose zones, region, caps or
fallback ladder cannot work, and pools whose own labels or taints contradict what the pool model
derives. Each error is a key path and a message. Pure."""

from __future__ import annotations

import re

from scaler.core.config.pool import Pool
from scaler.core.config.settings import AZURE_ZONES, ScalerConfig
from scaler.core.model import keys
from scaler.core.model.errors import FieldError, KeyPath
from scaler.core.model.quantity import format_units


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
