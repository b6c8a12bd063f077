"""How long an unneeded node of a pool is kept before it is removed, chosen each pass from what the pool saw.

Pure. A ski-rental rule on the pool's own history. Keeping an idle node costs its price for as long as it is
kept; removing it and needing the capacity back costs a *re-buy*: the new node is paid while it boots, and
for a node of several GPUs `rebuy_weight` boots more for each GPU beyond the first (the jobs that want such
nodes wait on them with the rest of the fleet they hold: on the Philly trace, 30 s instead of 240 s on the
8-GPU pool cost 2,786 GPU-hours more for only 87 more launches). A removal pays only when the capacity
stays unneeded for longer than that.

The history (`IdleHistory` in the State, per pool) holds the recent *gaps*: how long after a node became
unneeded its capacity was needed again, either by the node itself (busy again) or, for a removed node, by a
later scale-up of its pool or a pod it could have held starting on a bigger, pricier pool's node instead (the
latest removal first; infinite when none came within the maximum time).
Each pass the pool keeps its unneeded nodes for the time T that would have cost least over those gaps (a
gap d costs d when d <= T, T + re-buy when longer), bounded by `unneeded_time_min` / `_max`; with no
history yet, T is the re-buy (the classic 2-competitive break-even). `timings.unneeded_time`, when set,
overrides it for every pool. Cost per pass: at most `scale_down.idle_history`^2 steps per pool.
"""

from __future__ import annotations

import math
from dataclasses import replace

from scaler.core.config.pool import Pool
from scaler.core.config.settings import ScaleDownSettings
from scaler.core.model.workload import gpu_devices, node_pool, to_evict
from scaler.core.planning.context import PlanningContext
from scaler.core.planning.decisions import ScaleUp
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import IdleHistory, State
from scaler.core.scheduling import scoring


def rebuy_seconds(pool: Pool, ctx: PlanningContext) -> float:
    """What removing a node and booting one back costs, in seconds of that node's price."""
    t = ctx.timings
    if not pool.gpus:
        return t.cpu_boot
    return t.gpu_boot * (1 + ctx.scale_down.rebuy_weight * (pool.gpus - 1))


def choose(gaps: tuple[float, ...], rebuy: float, low: float, high: float, step: float) -> float:
    """The keep time in [low, high] that would have cost least over `gaps` (ties: the shorter); `rebuy`
    with no gaps. A candidate is a gap plus one pass (a node is seen busy again at a pass, not at once)."""
    if not gaps:
        return min(max(rebuy, low), high)
    candidates = sorted({low, high, *(min(max(d + step, low), high) for d in gaps if math.isfinite(d))})
    best, best_cost = low, math.inf
    for keep in candidates:
        cost = sum(d if d + step <= keep else keep + rebuy for d in gaps)
        if cost < best_cost - 1e-9:
            best, best_cost = keep, cost
    return best


def _remember(history: IdleHistory, gap: float, kept: int) -> IdleHistory:
    """The history with `gap` added, the latest `kept` gaps (`scale_down.idle_history`) only."""
    return replace(history, gaps=(*history.gaps, gap)[-kept:])


def observe(state: State, now: float, sd: ScaleDownSettings, scale_ups: list[ScaleUp],
            busy_again: list[tuple[str, float]]) -> None:
    """Fold this pass into the history: nodes busy again (pool, unneeded-since), scale-ups that ask back
    removed capacity (latest removal first), removals never asked back within the maximum time."""
    high, kept = sd.unneeded_time_max, sd.idle_history
    for pool, since in busy_again:
        state.idle[pool] = _remember(state.idle.get(pool, IdleHistory()), now - since, kept)
    for up in scale_ups:
        h = state.idle.get(up.pool)
        if h is not None and h.removed:
            state.idle[up.pool] = _ask_back(h, now, up.count, kept)
    for pool, history in list(state.idle.items()):
        expired = sum(1 for s in history.removed if now - s > high)
        if expired:
            h = replace(history, removed=tuple(s for s in history.removed if now - s <= high))
            for _ in range(expired):
                h = _remember(h, math.inf, kept)
            state.idle[pool] = h


def _ask_back(history: IdleHistory, now: float, count: int, kept: int) -> IdleHistory:
    """The latest `count` removals asked back now: a pool that had kept its idle nodes longer would have reused
    those."""
    if count <= 0 or not history.removed:
        return history
    asked, rest = history.removed[-count:], history.removed[:-count]
    h = replace(history, removed=rest)
    for since in asked:
        h = _remember(h, now - since, kept)
    return h


def taken_elsewhere(state: State, snapshot: Snapshot, ctx: PlanningContext) -> None:
    """Removed capacity asked back by pods that started since on a node of a bigger, pricier pool that takes them
    too (no min-GPUs taint keeps them off): a pod the removed node could have held pins a node that would otherwise
    have emptied (PHILLY-A on pools without taints: 2- to 4-GPU pods on half-used 8-GPU nodes). While the pool still
    has an empty unneeded node, only pods whose scheduler profile packs (MostAllocated) count: it scores a
    half-used bigger node above the empty one, so the pool's removals left the next pods with less room of their
    own (not counting them kept PHILLY-A's untainted binpack run 0.4 % above the fixed 600 s timer); a spreading
    profile would have taken the empty node, so its pod went elsewhere anyway. One pass over the nodes' pods, only
    while some pool has a removal not yet asked back; then the few pods that started since, once per such pool."""
    waiting = [n for n, h in state.idle.items() if h.removed and n in snapshot.pools]
    if not waiting:
        return
    ours = [(snapshot.pools[name].pool, node) for node in snapshot.nodes
            if (name := node_pool(node)) is not None and name in snapshot.pools]
    idle = {pool.name for pool, node in ours if node.name in state.unneeded_since and not to_evict(node.pods)}
    oldest = min(state.idle[name].seen for name in waiting)
    # The GPU pods that started since the oldest look: (their pool, GPUs, created, packs), usually a handful.
    started = [(pool, g, p.created_at, scoring.for_scheduler(p.scheduler_name).fit_strategy == "MostAllocated")
               for pool, node in ours for p in node.pods
               if p.created_at > oldest and (g := gpu_devices(p.requests)) > 0]
    now = snapshot.now
    for name in waiting:
        h, pool = state.idle[name], snapshot.pools[name].pool
        asked = 0 if not pool.gpus else sum(
            g for other, g, created, packs in started
            if created > h.seen and (packs or name not in idle)
            and max(pool.min_pod_gpus, 1) <= g <= pool.gpus < other.gpus
            and ctx.price(other) > ctx.price(pool))
        state.idle[name] = replace(_ask_back(h, now, -(-asked // pool.gpus) if asked else 0,
                                             ctx.scale_down.idle_history), seen=now)


def removed(state: State, pool: str, since: float, now: float) -> None:
    """A node of `pool`, unneeded since `since`, removed `now`."""
    h = state.idle.get(pool, IdleHistory())
    state.idle[pool] = replace(h, removed=(*h.removed, since), seen=h.seen if h.removed else now)


def keep_times(state: State, ctx: PlanningContext, pools: list[Pool]) -> dict[str, float]:
    """Each pool's unneeded time this pass (recorded in `state.unneeded_time`). Prepaid pools: the maximum
    (an idle node there costs nothing)."""
    fixed = ctx.timings.unneeded_time
    sd = ctx.scale_down
    out = {}
    for pool in pools:
        if fixed is not None:
            out[pool.name] = fixed
        elif ctx.price(pool) <= 0:
            out[pool.name] = sd.unneeded_time_max
        else:
            h = state.idle.get(pool.name, IdleHistory())
            out[pool.name] = choose(h.gaps, rebuy_seconds(pool, ctx), sd.unneeded_time_min,
                                    sd.unneeded_time_max, ctx.timings.scan_interval)
    state.unneeded_time = out
    return out


def explain(state: State, ctx: PlanningContext, pool: Pool) -> str:
    """One line: the pool's unneeded time and why."""
    keep = state.unneeded_time.get(pool.name)
    if keep is None:
        return f"{pool.name}: no unneeded time chosen yet"
    if ctx.timings.unneeded_time is not None:
        return f"{pool.name}: unneeded nodes removed after {keep:.0f}s (timings.unneeded_time)"
    h = state.idle.get(pool.name, IdleHistory())
    rebuy = (f"re-buying a node costs {rebuy_seconds(pool, ctx):.0f}s of its price; a node with pods to move "
             f"waits {max(keep, ctx.scale_down.unneeded_time_max):.0f}s")
    if not h.gaps:
        return f"{pool.name}: unneeded nodes removed after {keep:.0f}s (adaptive: {rebuy}; no idle periods seen yet)"
    back = sorted(d for d in h.gaps if math.isfinite(d))
    seen = f"{len(h.gaps)} recent idle periods, {len(h.gaps) - len(back)} never needed again"
    if back:
        seen += f", the others after {back[len(back) // 2]:.0f}s (median)"
    return f"{pool.name}: unneeded nodes removed after {keep:.0f}s (adaptive: {rebuy}; {seen})"
