"""Scale-down planner: which nodes to drain and remove, proven safe with the predicates.

Pure. A node is *unneeded* while its requests stay under the utilization threshold (GPU nodes:
requested / allocatable GPUs; others: the larger of the cpu and memory shares, DaemonSets and mirror
pods not counted). After `unneeded_time` it is removed if every pod on it may be evicted and fits on
the remaining nodes (re-placed with the same Packer as the scale-up, so nothing is double-booked),
within the pool's min, the PDBs and the per-pass budget. Empty nodes go first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from scaler.core import keys
from scaler.core.config import ScalerConfig
from scaler.core.constrained import Filtered
from scaler.core.model import Node, Pod, PodDisruptionBudget
from scaler.core.packing import Placement
from scaler.core.pool import Pool
from scaler.core.predicates import TERMINATED_PHASES, fits
from scaler.core.scaleup import ScaleUpResult
from scaler.core.snapshot import Held, ScaleDown, Snapshot
from scaler.core.state import Advanced, may_still_boot, node_pool, outside_pools

_EXISTING = frozenset({"existing"})
NOTE_EXAMPLES = 5


def is_mirror(pod: Pod) -> bool:
    return keys.ANNOTATION_MIRROR_POD in pod.annotations or pod.owner_kind == "Node"


def blocker(pod: Pod) -> str | None:
    """Why this pod forbids removing its node, or None. DaemonSet and mirror pods never block."""
    if pod.phase in TERMINATED_PHASES or is_mirror(pod):
        return None
    ann = pod.annotations
    if ann.get(keys.ANNOTATION_SAFE_TO_EVICT, "").lower() == "false":
        return f"pod {pod.key} has {keys.ANNOTATION_SAFE_TO_EVICT}=false"
    if ann.get(keys.ANNOTATION_KARPENTER_DO_NOT_DISRUPT, "").lower() == "true":
        return f"pod {pod.key} has {keys.ANNOTATION_KARPENTER_DO_NOT_DISRUPT}=true"
    if ann.get(keys.ANNOTATION_OPENAI_DO_NOT_DRAIN, "").lower() == "true":
        return f"pod {pod.key} has {keys.ANNOTATION_OPENAI_DO_NOT_DRAIN}=true"
    if pod.owner_kind is None and ann.get(keys.ANNOTATION_SAFE_TO_EVICT, "").lower() != "true":
        return f"pod {pod.key} has no controller"
    return None


def to_evict(pods: Iterable[Pod]) -> list[Pod]:
    """The pods a drain evicts: everything running except DaemonSet and mirror pods."""
    return [p for p in pods if p.phase not in TERMINATED_PHASES and p.owner_kind != "DaemonSet" and not is_mirror(p)]


def gpu_devices(resources: Mapping[str, int]) -> int:
    """GPU devices in a resource vector: whole GPUs, time-sliced replicas or MIG slices alike."""
    return sum(v for k, v in resources.items() if k == keys.RES_GPU or k.startswith(keys.MIG_RESOURCE_PREFIX))


def utilization(node: Node, pool: Pool | None) -> float:
    """The busiest share of the node: GPUs when it has any, else cpu or memory.

    A shared GPU (time-slicing replicas, MIG slices) counts as used while any of its devices is, and
    the device plugin may hand a node's busy devices out on different GPUs: `used` devices keep up
    to `used` GPUs busy.
    """
    counted = to_evict(node.pods)
    devices = gpu_devices(node.allocatable)
    if devices > 0:
        gpus = pool.gpus if pool is not None and pool.gpus else devices
        used = sum(gpu_devices(p.requests) for p in node.pods if p.phase not in TERMINATED_PHASES)
        return min(used, gpus) / gpus
    share = 0.0
    for res in (keys.RES_CPU, keys.RES_MEMORY):
        alloc = node.allocatable.get(res, 0)
        if alloc > 0:
            share = max(share, sum(p.requests.get(res, 0) for p in counted) / alloc)
    return share


def _pdbs_of(pod: Pod, pdbs: list[PodDisruptionBudget]) -> list[int]:
    return [i for i, b in enumerate(pdbs) if b.namespace == pod.namespace
            and all(pod.labels.get(k) == v for k, v in b.selector.items())]


def _broken(node: Node, now: float, config: ScalerConfig) -> bool:
    """NotReady, with a known creation time older than the provision timeout."""
    return not node.ready and not may_still_boot(node, now, config)


@dataclass(slots=True)
class ScaleDownResult:
    scale_downs: list[ScaleDown] = field(default_factory=list)
    unneeded: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    moves: dict[str, str] = field(default_factory=dict)  # evicted pod key -> the node it was re-placed on


def cheaper_home(pods: list[Pod], pool: Pool, config: ScalerConfig, adv: Advanced, now: float,
                 admits: Callable[[Pod, Node], bool] | None = None) -> str | None:
    """Why the pods may leave their node for new nodes of cheaper pools, or None.

    Every pod must fit a template of a pool of smaller nodes (fewer GPUs; for CPU pools fewer vCPUs:
    a move to the same shape would only shift the hole) that is cheaper per hour than the node's
    pool, not in backoff and with an available zone; counting one new node per pod (an upper bound), the new
    nodes must cost less than the node they replace. Gang members never move alone. `admits`: the
    pod's other kube-scheduler filters on a template (a volume's zone, anti-affinity).
    """
    price = config.price(pool)
    if any(config.gang_label in p.labels for p in pods):
        return None
    smaller = [o for o in config.pools
               if (o.itype.gpus < pool.itype.gpus if pool.itype.gpus else o.itype.vcpu < pool.itype.vcpu)]
    templates: dict[str, list[Node]] = {}
    total, homes = 0.0, set()
    for pod in pods:
        best: tuple[float, str] | None = None
        for other in smaller:
            cost = config.price(other)
            if cost >= price or (best is not None and cost >= best[0]):
                continue
            backoff = adv.state.backoff.get(other.name)
            if backoff is not None and backoff.until > now:
                continue
            if other.name not in templates:
                templates[other.name] = [other.template_node(z) for z in other.zones
                                         if adv.state.unavailable.get((other.name, z), 0.0) <= now]
            if any(fits(pod, t) and (admits is None or admits(pod, t)) for t in templates[other.name]):
                best = (cost, other.name)
        if best is None:
            return None
        total += best[0]
        homes.add(best[1])
    if total >= price:
        return None
    return f"consolidation: its pods fit {', '.join(sorted(homes))} for ${total:.2f}/h instead of ${price:.2f}/h"


def _hold(snapshot: Snapshot, config: ScalerConfig, adv: Advanced) -> set[str]:
    """Nodes not to drain again yet: their last drain was given up because PodDisruptionBudgets refused
    its evictions. They stay schedulable until the long backoff ends, or one of those budgets allows
    more disruptions than it did then (so a budget that never frees does not make the node flap)."""
    now = snapshot.now
    state = adv.state
    allowed = {f"{b.namespace}/{b.name}": b.disruptions_allowed for b in snapshot.pdbs}
    by_name = {n.name: n for n in snapshot.nodes}
    for name, refused in snapshot.abandoned.items():
        node = by_name.get(name)
        if node is None:
            continue
        budgets = {f"{snapshot.pdbs[i].namespace}/{snapshot.pdbs[i].name}"
                   for p in node.pods if p.key in refused for i in _pdbs_of(p, snapshot.pdbs)}
        state.held[name] = Held(now + config.timings.backoff_max, tuple(sorted((k, allowed[k]) for k in budgets)))
    for name, h in list(state.held.items()):
        if h.until <= now or name not in by_name or any(allowed.get(k, 0) > a for k, a in h.allowed):
            del state.held[name]
    return set(state.held)


def plan_scale_down(snapshot: Snapshot, config: ScalerConfig, adv: Advanced, up: ScaleUpResult) -> ScaleDownResult:
    """Update `adv.state.unneeded_since` and choose the nodes to remove this pass."""
    now = snapshot.now
    sd = config.scale_down
    out = ScaleDownResult()
    packer = up.packer
    filtered = up.filtered if up.filtered is not None else Filtered(packer, (), ())
    if not sd.enabled:
        adv.state.unneeded_since = {}
        return out
    since_before = adv.state.unneeded_since
    held = _hold(snapshot, config, adv) | outside_pools(snapshot)  # or not an instance of its pool any more
    candidates: list[tuple[tuple[int, int, float, str], Node, Pool, float, float]] = []
    for node in snapshot.nodes:
        name = node_pool(node)
        obs = snapshot.pools.get(name) if name else None
        if obs is None:
            continue  # not a pool of ours
        if node.name in snapshot.draining or node.name in adv.gone or node.name in held:
            continue  # being drained already, its instance is gone, or its budgets refused a drain
        b = packer.by_node.get(node.name)
        if b is None and _broken(node, now, config) and not to_evict(node.pods):
            # Registered, never (or no longer) ready for longer than a node takes to boot, and
            # nothing on it to lose: a paid-for node that will not take pods.
            since = since_before.get(node.name, now)
            out.unneeded[node.name] = since
            candidates.append(((0, 0, 0.0, node.name), node, obs.pool, -1.0, node.created_at))
            continue
        if b is None or b.kind != "existing" or b.touched:
            continue  # booting, or about to take a pending pod
        disrupting = any(t.key == keys.TAINT_DISRUPTING for t in node.taints)
        if node.unschedulable and not disrupting:
            continue  # cordoned by someone else: theirs to decide
        util = utilization(node, obs.pool)
        if util >= sd.utilization_threshold and not disrupting:
            continue
        since = since_before.get(node.name, now)
        out.unneeded[node.name] = since
        if disrupting or now - since >= config.timings.unneeded_time:
            empty = not to_evict(node.pods)
            candidates.append(((0 if disrupting else 1, 0 if empty else 1, util, node.name), node, obs.pool, util,
                               since))
    adv.state.unneeded_since = dict(out.unneeded)
    if not snapshot.fresh:
        out.notes.append("scale-down skipped: the cluster snapshot is not fresh")
        return out
    scaled_up = {s.pool for s in up.scale_ups}
    budget = max(1, int(sd.budget_fraction * len(snapshot.nodes)))
    room = {n: min(adv.desired.get(n, o.desired), adv.registered.get(n, 0)) - o.pool.min_size
            for n, o in snapshot.pools.items()}
    for drain in snapshot.draining.values():  # a drain in progress counts against the pool's min
        if not drain.notice:
            room[drain.pool] = room.get(drain.pool, 0) - 1
    allowed = [b.disruptions_allowed for b in snapshot.pdbs]
    attempts = max(4 * budget, 20)
    candidates.sort(key=lambda c: c[0])
    kept: list[str] = []  # unneeded nodes that stay, and why
    for _, node, pool, util, since in candidates:
        if len(out.scale_downs) >= budget or attempts <= 0:
            break
        b = packer.by_node.get(node.name)
        if pool.name in scaled_up or room.get(pool.name, 0) <= 0 or (b is not None and b.touched):
            continue
        why = next((w for w in (blocker(p) for p in node.pods) if w), None)
        if why is not None:
            kept.append(f"{node.name}: {why}")
            continue
        evict = to_evict(node.pods)
        consolidation: str | None = None
        need: dict[int, int] = {}
        for pod in evict:
            for i in _pdbs_of(pod, snapshot.pdbs):
                need[i] = need.get(i, 0) + 1
        short = [snapshot.pdbs[i] for i, n in need.items() if n > allowed[i]]
        if short:
            kept.append(f"{node.name}: PodDisruptionBudget {short[0].namespace}/{short[0].name} allows no more "
                        "disruptions")
            continue
        if evict:
            assert b is not None  # only broken nodes have no bin, and they have nothing to evict
            attempts -= 1
            packer.begin()
            filtered.begin()
            b.removed = True
            filtered.remove(b)
            placement: Placement = []
            ok = True
            classes = packer.classify(evict, None, filtered.class_key if filtered.active else None)
            for cls in classes:
                n = len(cls.pods)
                groups = packer.eligible_real(cls.static_id)
                if filtered.active and filtered.is_constrained(cls):
                    # kube-scheduler's other filters decide where it may go (anti-affinity, volume zone, ...)
                    if filtered.fill(cls, groups, cls.pods, _EXISTING, placement):
                        ok = False
                        break
                    continue
                before = len(placement)
                if packer.fill(cls, groups, n, _EXISTING, placement) < n:
                    ok = False
                    break
                filtered.record_placement(cls.pods, placement[before:])
            if not ok:
                packer.rollback()
                filtered.rollback()
                b.group.bound = None  # it may have been tightened without this node
                if sd.consolidate:
                    def admits(pod: Pod, template: Node) -> bool:
                        return not filtered.constrained(pod) or filtered.check(pod).reason(template) is None

                    consolidation = cheaper_home(evict, pool, config, adv, now,
                                                 admits if filtered.active else None)
                if consolidation is None:
                    b.removed = False
                    kept.append(f"{node.name}: its pods do not fit on the other nodes")
                    continue
            else:
                packer.commit()
                filtered.commit()
                pods_by_class = iter(p for cls in classes for p in cls.pods)  # fill placed them in this order
                for target, k in placement:
                    target.touched = True
                    for _ in range(k):
                        out.moves[next(pods_by_class).key] = target.name
        elif b is not None:
            b.removed = True
            filtered.remove(b)
        for i, n in need.items():
            allowed[i] -= n
        room[pool.name] -= 1
        what = "NotReady since created" if util < 0 else "empty (only DaemonSets)" if not evict else \
            f"utilization {util:.2f} under {sd.utilization_threshold:.2f}"
        if evict and consolidation:
            what = f"{what}; {consolidation}"
        out.scale_downs.append(ScaleDown(pool.name, node.name, node.provider_id, tuple(p.key for p in evict),
                                         f"{what} for {now - since:.0f}s"))
    if kept:  # one note, not one per node: a big idle cluster would flood the log every pass
        more = f"; and {len(kept) - NOTE_EXAMPLES} more" if len(kept) > NOTE_EXAMPLES else ""
        out.notes.append(f"{len(kept)} unneeded node(s) kept: " + "; ".join(kept[:NOTE_EXAMPLES]) + more)
    return out
