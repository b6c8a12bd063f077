"""The candidates `scaler tune` searches, built from a candidate pools file and the instance catalogue.

The candidates file says what the user accepts: the cloud, the zones and spot price factor, the non-GPU pools (kept,
see below) and, through its GPU pools' instance types, the GPU models. From the catalogue, for each GPU count per
node that a type of those models offers, the file's own type of that count (else the catalogue's cheapest) is a
*shape*. A candidate is, in the shape examples/pools-aws.yaml uses:

- a set of shapes (always the largest, so every gang's pod fits a node);
- per shape but the smallest a `min_pod_gpus` taint: none, just above the next smaller shape (that shape's pods
  stay off it), or its own count (whole nodes only); combinations that leave a pod size of the trace without a
  home are not raced, nor a second one that admits the same pod sizes on every shape;
- per shape and zone a spot pool falling back to the on-demand pool of its zone, or on-demand alone (only
  searched with spot reclaims: without them spot costs less at the same GPU-hours);
- the file's non-GPU pools as they are, but a spot pool without a fallback gets an on-demand twin (a stack
  refuses a spot pool whose ladder does not end on demand);
- the adaptive unneeded time's bounds (`scale_down.unneeded_time_min` / `_max`);
- a CapacityBuffer of N GPUs, for each N of `--buffers` (default 0: none).
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass
from typing import Any

from scaler.core.config.catalogue import CATALOGUE, InstanceType
from scaler.core.config.settings import ScalerConfig
from scaler.sim.simulation import InputError
from scaler.sim.trace import Job, gang_split

IDLE_BOUNDS: tuple[tuple[float, float], ...] = ((30, 600), (30, 300), (30, 1200))  # the first is today's default


@dataclass(frozen=True)
class Candidate:
    shapes: tuple[tuple[int, int], ...]  # (GPUs per node, min_pod_gpus), smallest first
    spot: bool  # spot pools falling back to on-demand, or on-demand only
    idle: tuple[float, float]  # unneeded_time_min, unneeded_time_max
    buffer_gpus: int = 0

    @property
    def label(self) -> str:
        shapes = "+".join(f"{c}" + (f"t{t}" if t else "") for c, t in self.shapes)
        out = f"{shapes} {'spot>od' if self.spot else 'od'} idle{self.idle[0]:g}-{self.idle[1]:g}"
        return out + (f" buffer{self.buffer_gpus}" if self.buffer_gpus else "")


@dataclass(frozen=True)
class Space:
    data: dict[str, Any]  # the candidates file's data
    types: dict[int, InstanceType]  # GPUs per node -> the shape's instance type
    zones: tuple[str, ...]
    max_gpus: int  # the largest GPU count any one candidate pool of the file could reach
    keep: tuple[int, ...]  # indexes of the file's non-GPU pools


def space_of(config: ScalerConfig, data: dict[str, Any], path: str) -> Space:
    gpu = [p for p in config.pools if p.gpus_per_node]
    if not gpu:
        raise InputError(f"{path}: no GPU pool among the candidates (tune searches GPU pool shapes)")
    if config.timings.unneeded_time is not None:
        raise InputError(f"{path}: timings.unneeded_time: a fixed unneeded time ({config.timings.unneeded_time:g} s) "
                         "would replace the adaptive idle-time bounds tune races (scale_down.unneeded_time_min / "
                         "_max): drop it")
    models = {p.instance.gpu_model for p in gpu if p.instance is not None}
    own = {p.gpus_per_node: p.instance for p in gpu if p.instance is not None and p.capacity_type in
           ("spot", "on-demand")}
    types: dict[int, InstanceType] = {}
    for t in sorted(CATALOGUE.values(), key=lambda t: (t.price_per_hour, t.name)):
        if t.cloud == config.cloud and t.gpus and t.gpu_model in models:
            types.setdefault(t.gpus, t)
    types.update({c: t for c, t in own.items() if c is not None and t is not None})
    zones = tuple(sorted({z for p in gpu for z in p.zones}))
    return Space(data, dict(sorted(types.items())), zones, max((p.gpus_per_node or 0) * p.max_size for p in gpu),
                 tuple(i for i, p in enumerate(config.pools) if not p.gpus_per_node))


def taint_options(counts: tuple[int, ...], pods: frozenset[int]) -> list[tuple[tuple[int, int], ...]]:
    """The shapes' taint combinations that give every pod size of the trace a home, one of each set of
    combinations that admit the same pod sizes on each shape (the lowest taints: the most room for other pods)."""
    per = [[0]] + [sorted({0, counts[i - 1] + 1, counts[i]}) for i in range(1, len(counts))]
    seen: set[tuple[frozenset[int], ...]] = set()
    out = []
    for combo in itertools.product(*per):
        admits = tuple(frozenset(p for p in pods if t <= p <= c) for c, t in zip(counts, combo, strict=True))
        if admits in seen or set().union(*admits) != pods:
            continue
        seen.add(admits)
        out.append(tuple(zip(counts, combo, strict=True)))
    return out


def candidates(space: Space, jobs: list[Job], *, reclaims: bool, buffers: tuple[int, ...] = (0,)) -> list[Candidate]:
    counts = tuple(space.types)
    largest = counts[-1]
    pods = frozenset(gang_split(j.gpus, largest)[1] for j in jobs if j.gpus)
    subsets = [s for n in range(1, len(counts) + 1) for s in itertools.combinations(counts, n) if largest in s]
    return [Candidate(shapes, spot, idle, buf)
            for subset in subsets for shapes in taint_options(subset, pods)
            for spot in ((True, False) if reclaims else (True,)) for idle in IDLE_BOUNDS for buf in buffers]


def kept_pools(pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The file's non-GPU pools, a spot pool without a fallback given an on-demand twin to fall back to: a stack
    refuses a spot pool whose ladder does not end on demand (`pulumi up`'s loader, gpuburst_infra/stack.py)."""
    out = []
    names = {p["name"] for p in pools}
    for pool in pools:
        twin = f"{pool['name'][:37]}-od"
        if pool.get("capacity_type") == "spot" and not pool.get("fallback") and twin not in names:
            od = {k: copy.deepcopy(v) for k, v in pool.items() if k != "capacity_type"}
            out += [{**pool, "fallback": twin}, {**od, "name": twin}]
        else:
            out.append(pool)
    return out


def pools_data(space: Space, cand: Candidate) -> dict[str, Any]:
    """The candidates file's data with its GPU pools replaced by the candidate's, and its knobs set."""
    data = {k: v for k, v in space.data.items() if k != "pools"}
    pools = kept_pools([space.data["pools"][i] for i in space.keep])
    suffix = {z: (z[-1] if len({x[-1] for x in space.zones}) == len(space.zones) else str(i))
              for i, z in enumerate(space.zones)}
    for count, taint in cand.shapes:
        itype = space.types[count]
        size = max(1, math.ceil(space.max_gpus / count))
        for zone in space.zones:
            od = f"gpu{count}-od-{suffix[zone]}"
            ladder = [({"name": f"gpu{count}-spot-{suffix[zone]}", "capacity_type": "spot"}, {"fallback": od})] \
                if cand.spot else []
            for head, tail in [*ladder, ({"name": od}, {})]:
                pools.append({**head, "instance_types": [itype.name], "zones": [zone],
                              **({"min_pod_gpus": taint} if taint else {}), "max": size, **tail})
    data["pools"] = pools
    data["scale_down"] = {**(data.get("scale_down") or {}), "unneeded_time_min": cand.idle[0],
                          "unneeded_time_max": cand.idle[1]}
    return data
