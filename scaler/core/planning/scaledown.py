"""Scale-down planner: which nodes to drain and remove, proven safe with the predicates.

Pure. A node is *unneeded* while its requests stay under the utilization threshold (GPU nodes:
requested / allocatable GPUs; DRA nodes: GPUs its pods' allocated ResourceClaims hold / the pool's
GPUs; others: the larger of the cpu and memory shares, DaemonSets and mirror pods not counted).
After its pool's unneeded time (`timings.unneeded_time`, or chosen each pass from the pool's idle
periods: `idle_time`) it is removed if every pod on it may be evicted and fits on the remaining nodes
(re-placed on the room the scale-up left, `room.Room`, so nothing is double-booked), within the pool's min,
the PDBs and the per-pass budget. Empty nodes go first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.core.config.pool import Pool
from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod, PodDisruptionBudget
from scaler.core.model.workload import TERMINATED_PHASES, gpu_devices, node_pool, to_evict
from scaler.core.planning.advance import Advanced, may_still_boot, outside_pools
from scaler.core.planning.context import PlanningContext
from scaler.core.planning.decisions import ScaleDown, ScaleUp
from scaler.core.planning.dra_use import DraUse
from scaler.core.planning.drainable import Drainable, drainable
from scaler.core.planning.homes import Homes, cheaper_home
from scaler.core.planning.idle_time import keep_times, observe, removed, taken_elsewhere
from scaler.core.planning.memo import Memo
from scaler.core.planning.packing import Bin
from scaler.core.planning.room import Room
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import Held

_EXISTING = frozenset({"existing"})


NOTE_EXAMPLES = 5


def utilization(node: Node, pool: Pool | None, dra: DraUse | None = None) -> float:
    """The busiest share of the node: GPUs when it has any, else cpu or memory.

    A shared GPU (time-slicing replicas, MIG slices) counts as used while any of its devices is, and
    the device plugin may hand a node's busy devices out on different GPUs: `used` devices keep up
    to `used` GPUs busy. A DRA pool's node publishes its GPUs as devices, not allocatable: the GPUs
    its pods' allocated claims hold are the used ones (`dra`; a shared claim once). (Read for every node of
    the cluster each pass: one walk over its pods.)
    """
    pods = node.pods
    if pool is not None and pool.dra and pool.gpus:
        used = dra.gpus_in_use(pods) if dra is not None else 0
        return min(used, pool.gpus) / pool.gpus
    devices = gpu_devices(node.allocatable)
    if devices > 0:
        gpus = pool.gpus if pool is not None and pool.gpus else devices
        used = 0
        for p in pods:
            if p.phase not in TERMINATED_PHASES:  # active(p) and gpu_devices(p.requests), inlined
                for k, v in p.requests.items():
                    if k == keys.RES_GPU or k.startswith(keys.MIG_RESOURCE_PREFIX):
                        used += v
        return min(used, gpus) / gpus
    cpu = memory = 0
    for p in to_evict(pods):
        requests = p.requests
        cpu += requests.get(keys.RES_CPU, 0)
        memory += requests.get(keys.RES_MEMORY, 0)
    share = 0.0
    alloc = node.allocatable
    for used, of in ((cpu, alloc.get(keys.RES_CPU, 0)), (memory, alloc.get(keys.RES_MEMORY, 0))):
        if of > 0:
            share = max(share, used / of)
    return share


def _pdbs_of(pod: Pod, pdbs: list[PodDisruptionBudget]) -> list[int]:
    return [i for i, b in enumerate(pdbs) if b.namespace == pod.namespace
            and all(pod.labels.get(k) == v for k, v in b.selector.items())]


def _broken(node: Node, now: float, provision_timeout: float) -> bool:
    """NotReady, with a known creation time older than the provision timeout."""
    return not node.ready and not may_still_boot(node, now, provision_timeout)


@dataclass(slots=True)
class ScaleDownResult:
    scale_downs: list[ScaleDown] = field(default_factory=list)
    unneeded: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    moves: dict[str, str] = field(default_factory=dict)  # evicted pod key -> the node it was re-placed on


def _hold(snapshot: Snapshot, backoff_max: float, adv: Advanced) -> set[str]:
    """Nodes not to drain again yet: their last drain was given up because PodDisruptionBudgets refused
    its evictions. They stay schedulable until the long backoff ends, or one of those budgets allows
    more disruptions than it did then (so a budget that never frees does not make the node flap)."""
    now = snapshot.now
    state = adv.state
    allowed = {f"{b.namespace}/{b.name}": b.disruptions_allowed for b in snapshot.pdbs}
    by_name = {n.name: n for n in snapshot.nodes}
    for name, refused in snapshot.acted.abandoned.items():
        node = by_name.get(name)
        if node is None:
            continue
        budgets = {f"{snapshot.pdbs[i].namespace}/{snapshot.pdbs[i].name}"
                   for p in node.pods if p.key in refused for i in _pdbs_of(p, snapshot.pdbs)}
        state.held[name] = Held(now + backoff_max, tuple(sorted((k, allowed[k]) for k in budgets)))
    for name, h in list(state.held.items()):
        if h.until <= now or name not in by_name or any(allowed.get(k, 0) > a for k, a in h.allowed):
            del state.held[name]
    return set(state.held)


@dataclass(slots=True)
class Removable:
    """An unneeded node that may be removed this pass."""

    order: tuple[int, int, float, str]  # ours being disrupted first, then empty, then least used
    node: Node
    pool: Pool
    util: float  # -1: NotReady since it was created
    since: float  # unneeded since (a NotReady node: since it was created)


def plan_scale_down(snapshot: Snapshot, ctx: PlanningContext, adv: Advanced, scale_ups: list[ScaleUp],
                    room: Room) -> ScaleDownResult:
    """Update `adv.state.unneeded_since` and choose the nodes to remove this pass: the candidates, each
    tried in turn (its pods re-placed on the other nodes: `room`, as this pass's scale-ups left them), each
    decision with its reason."""
    out = ScaleDownResult()
    if not ctx.scale_down.enabled:
        adv.state.unneeded_since, adv.state.unneeded_until = {}, {}
        return out
    candidates = _candidates(snapshot, ctx, adv, scale_ups, room, out)
    if not snapshot.fresh:
        out.notes.append("scale-down skipped: the cluster snapshot is not fresh")
        return out
    trial = _Removals(snapshot, ctx, adv, scale_ups, room)
    kept: list[str] = []  # unneeded nodes that stay, and why
    for c in sorted(candidates, key=lambda c: c.order):
        if len(out.scale_downs) >= trial.budget or trial.attempts <= 0:
            break
        decision = trial.try_remove(c, out.moves)
        if isinstance(decision, ScaleDown):
            out.scale_downs.append(decision)
            if c.util >= 0:  # an idle period ended by removal: does the pool ask the capacity back soon?
                removed(adv.state, c.pool.name, c.since, snapshot.now)
        elif decision:
            kept.append(f"{c.node.name}: {decision}")
    if kept:  # one note, not one per node: a big idle cluster would flood the log every pass
        more = f"; and {len(kept) - NOTE_EXAMPLES} more" if len(kept) > NOTE_EXAMPLES else ""
        out.notes.append(f"{len(kept)} unneeded node(s) kept: " + "; ".join(kept[:NOTE_EXAMPLES]) + more)
    return out


def _candidates(snapshot: Snapshot, ctx: PlanningContext, adv: Advanced, scale_ups: list[ScaleUp], room: Room,
                out: ScaleDownResult) -> list[Removable]:
    """The unneeded nodes (recorded in `out.unneeded` and the state) whose pool's unneeded time is up; the
    nodes busy again and this pass's scale-ups go into the pools' idle history first."""
    now = snapshot.now
    since_before = adv.state.unneeded_since
    busy_again: list[tuple[str, float]] = []
    keep = keep_times(adv.state, ctx, [o.pool for o in snapshot.pools.values()])
    # held after a refused drain, or not an instance of its pool any more
    held = _hold(snapshot, ctx.timings.backoff_max, adv) | outside_pools(snapshot)
    threshold = ctx.scale_down.utilization_threshold
    fixed, most = ctx.timings.unneeded_time is not None, ctx.scale_down.unneeded_time_max
    found: list[Removable] = []
    dra = DraUse(snapshot.dra)
    for node in snapshot.nodes:
        name = node_pool(node)
        obs = snapshot.pools.get(name) if name else None
        if obs is None:
            continue  # not a pool of ours
        if node.name in adv.state.drains or node.name in adv.gone or node.name in adv.leaving or node.name in held:
            continue  # being drained already, its instance is gone, or its budgets refused a drain
        b = room.bin(node.name)
        if b is None and _broken(node, now, ctx.timings.provision_timeout) and not to_evict(node.pods):
            # Registered, never (or no longer) ready for longer than a node takes to boot, and
            # nothing on it to lose: a paid-for node that will not take pods.
            out.unneeded[node.name] = since_before.get(node.name, now)
            found.append(Removable((0, 0, 0.0, node.name), node, obs.pool, -1.0, node.created_at))
            continue
        if b is None or b.kind != "existing" or b.touched:
            if b is not None and b.touched and node.name in since_before:
                busy_again.append((obs.pool.name, since_before[node.name]))
            continue  # booting, or about to take a pending pod
        disrupting = any(t.key == keys.TAINT_DISRUPTING for t in node.taints)
        if node.unschedulable and not disrupting:
            continue  # cordoned by someone else: theirs to decide
        util = _utilization(node, obs.pool, dra, adv.memo)
        if util >= threshold and not disrupting:
            if node.name in since_before:
                busy_again.append((obs.pool.name, since_before[node.name]))
            continue
        since = out.unneeded[node.name] = since_before.get(node.name, now)
        empty = not to_evict(node.pods)
        until = adv.state.unneeded_until[node.name] = since + _wait(keep[obs.pool.name], empty, fixed, most)
        if disrupting or now >= until:
            found.append(Removable((0 if disrupting else 1, 0 if empty else 1, util, node.name), node, obs.pool,
                                   util, since))
    adv.state.unneeded_since = dict(out.unneeded)
    adv.state.unneeded_until = {n: t for n, t in adv.state.unneeded_until.items() if n in out.unneeded}
    observe(adv.state, now, ctx.scale_down, scale_ups, busy_again)
    taken_elsewhere(adv.state, snapshot, ctx)
    return found


def _utilization(node: Node, pool: Pool, dra: DraUse, memo: Memo | None) -> float:
    """`utilization`, kept in the memo for a node the observer gives a version (all it reads: the node and its
    pods, which the version stands for, and its pool's GPUs; a DRA pool's claims are not kept)."""
    if memo is None or not node.version or pool.dra:
        return utilization(node, pool, dra)
    key = ("utilization", node.name, node.version, pool.name, pool.gpus)
    util = memo.find(key)
    if util is None:
        util = utilization(node, pool, dra)
        memo.put(key, util)
    return util  # type: ignore[no-any-return]


def _wait(keep: float, empty: bool, fixed: bool, most: float) -> float:
    """How long an unneeded node waits: the adaptive time for an empty one, `most` (`unneeded_time_max`) for one
    with pods to move (their restart, the work since their last checkpoint, is a cost the rule cannot see: on a
    short timer consolidation evicts them over and over), a `fixed` (`timings.unneeded_time`) one for every node."""
    return keep if empty or fixed else max(keep, most)


class _Removals:
    """This pass's removals so far: the budget, each pool's room above its min, the PDBs' disruptions
    left, and the cluster as the scale-up left it (`others`: the room on the other nodes), which a removal
    changes."""

    def __init__(self, snapshot: Snapshot, ctx: PlanningContext, adv: Advanced, scale_ups: list[ScaleUp],
                 others: Room) -> None:
        self.snapshot, self.ctx, self.adv = snapshot, ctx, adv
        self.others = others
        self.scaled_up = {s.pool for s in scale_ups}
        self.budget = max(1, int(ctx.scale_down.budget_fraction * len(snapshot.nodes)))
        self.attempts = max(4 * self.budget, 20)
        self.room = {n: min(adv.desired.get(n, o.desired), adv.registered.get(n, 0)) - o.pool.min_size
                     for n, o in snapshot.pools.items()}
        for drain in adv.state.drains.values():  # a drain in progress counts against the pool's min
            if not drain.notice:
                self.room[drain.pool] = self.room.get(drain.pool, 0) - 1
        self.allowed = [b.disruptions_allowed for b in snapshot.pdbs]
        self.homes = Homes.kept(adv.memo, ctx, adv, snapshot.now)

    def try_remove(self, c: Removable, moves: dict[str, str]) -> ScaleDown | str | None:
        """The ScaleDown for the candidate, or why it stays (None: not this pass, nothing to say)."""
        node, pool, pdbs = c.node, c.pool, self.snapshot.pdbs
        b = self.others.bin(node.name)
        if pool.name in self.scaled_up or self.room.get(pool.name, 0) <= 0 or (b is not None and b.touched):
            return None
        drain = drainable(node, self.adv.memo)
        if drain.blocker is not None:
            return drain.blocker
        evict = drain.evict
        need: dict[int, int] = {}
        for pod in evict if pdbs else ():
            for i in _pdbs_of(pod, pdbs):
                need[i] = need.get(i, 0) + 1
        short = [pdbs[i] for i, n in need.items() if n > self.allowed[i]]
        if short:
            return f"PodDisruptionBudget {short[0].namespace}/{short[0].name} allows no more disruptions"
        consolidation: str | None = None
        if evict:
            assert b is not None  # only broken nodes have no bin, and they have nothing to evict
            self.attempts -= 1
            moved, consolidation = self._move(b, drain, pool, moves)
            if not moved:
                return consolidation
        elif b is not None:
            self.others.remove(b)
        for i, n in need.items():
            self.allowed[i] -= n
        self.room[pool.name] -= 1
        sd = self.ctx.scale_down
        what = "NotReady since created" if c.util < 0 else "empty (only DaemonSets)" if not evict else \
            f"utilization {c.util:.2f} under {sd.utilization_threshold:.2f}"
        if consolidation:
            what = f"{what}; {consolidation}"
        return ScaleDown(pool.name, node.name, node.provider_id, tuple(p.key for p in evict),
                         f"{what} for {self.snapshot.now - c.since:.0f}s")

    def _move(self, b: Bin, drain: Drainable, pool: Pool, moves: dict[str, str]) -> tuple[bool, str | None]:
        """Re-place the node's pods on the other nodes (kept on success: the targets are taken): (True,
        None) when they all fit; (True, why) when new nodes of cheaper pools would hold them for less
        (consolidation); (False, why the node stays) otherwise."""
        others, evict = self.others, drain.evict
        if others.move(b, drain, moves):
            return True, None
        consolidation = None
        if self.ctx.scale_down.consolidate and others.constrained:
            def admits(pod: Pod, template: Node) -> bool:
                return others.admits_without(pod, template, b.name)

            consolidation = cheaper_home(evict, pool, self.ctx, self.adv, self.snapshot.now, admits, self.homes)
        elif self.ctx.scale_down.consolidate:  # the answer for the same pods, pool and Homes is the last one
            home = drain.home
            if home is None or home[0] is not self.homes or home[1] != pool.name:
                home = drain.home = (self.homes, pool.name, cheaper_home(evict, pool, self.ctx, self.adv,
                                                                          self.snapshot.now, None, self.homes))
            consolidation = home[2]
        if consolidation is None:
            b.removed = False
            return False, "its pods do not fit on the other nodes"
        return True, consolidation
