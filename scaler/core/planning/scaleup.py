"""Scale-up planner: place pending pods on existing, coming and in-flight capacity, then on new nodes.

On existing and coming nodes the pods go as kube-scheduler will bind them: in its queue order, each
where the scoring profile its `schedulerName` names would put it (`queue_order`). What is left is
packed first-fit decreasing onto booting and new nodes (`packing`), new nodes chosen by the
expander (`expander`: price, spot first, caps, backoff, unavailable offerings, fallback). Gangs are
all or nothing. Pure.
"""

from __future__ import annotations

import bisect
import contextlib
from dataclasses import dataclass, field

from scaler.core.model.objects import Node, Pod
from scaler.core.model.podgroup import HELD_WITHOUT_GROUP, gang_key, group_of
from scaler.core.model.workload import is_daemonset
from scaler.core.planning.advance import Advanced
from scaler.core.planning.constrained import Filtered
from scaler.core.planning.context import PlanningContext
from scaler.core.planning.decisions import Outcome, PodVerdict, ScaleUp
from scaler.core.planning.expander import SlotOption
from scaler.core.planning.packing import Packer, Placement, PodClass
from scaler.core.planning.place import Placer
from scaler.core.planning.queue_order import Chooser, place_in_queue_order
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.trial import Trial


@dataclass(slots=True)
class NewNode:
    """A node the plan asks for, with the pods it was packed for (used by explain and tests)."""

    pool: str
    zone: str
    template: Node
    pods: list[Pod] = field(default_factory=list)



@dataclass(slots=True)
class ScaleUpResult:
    scale_ups: list[ScaleUp]
    verdicts: dict[str, PodVerdict]
    new_nodes: list[NewNode]
    placed_on: dict[str, str]  # pod key -> existing / coming node name
    packer: Packer
    notes: list[str] = field(default_factory=list)
    filtered: Filtered | None = None  # kube-scheduler's other filters, as the pass left them (drain check)
    quotas: dict[str, str] = field(default_factory=dict)  # quota -> why it stopped a pool this pass


@dataclass(slots=True)
class _Gangs:
    """Who is in which gang, each gang's minimum and members already bound, and the pods held back."""

    of: dict[str, str] = field(default_factory=dict)  # pod key -> gang key
    minimum: dict[str, int] = field(default_factory=dict)  # gang key -> minCount / minMember
    running: dict[str, int] = field(default_factory=dict)  # gang key -> active members on the nodes
    held: dict[str, str] = field(default_factory=dict)  # pod key -> why its scheduler holds it back


def _gangs(snapshot: Snapshot, label: str, min_annotation: str, bound: dict[str, int]) -> _Gangs:
    """The pending pods' gangs (scaler.core.model.podgroup), of `bound` (the active pods on the nodes per
    gang, `capacity.Usage.gangs`). A pod whose Workload or Volcano PodGroup is missing is held back, as its
    scheduler holds it; a group without a gang policy leaves its pods single; a coscheduling label without
    its PodGroup is read as before (all the label's pending pods, or the min-member annotation's count)."""
    out = _Gangs()
    groups = snapshot.pod_groups
    for pod in snapshot.pending:
        ref = group_of(pod, label)
        if ref is None:
            continue
        api, name = ref
        gid = gang_key(api, pod.namespace, name)
        group = groups.get(gid)
        if group is None and api in HELD_WITHOUT_GROUP:
            out.held[pod.key] = (f"its PodGroup {pod.namespace}/{name} ({api}) does not exist: the scheduler "
                                 "holds the pod back until it does; nothing is bought for it")
            continue
        if group is not None and group.min_count is None:
            continue  # no gang policy: a single pod
        out.of[pod.key] = gid
        if group is not None:
            out.minimum[gid] = group.min_count or 0
            continue
        raw = pod.annotations.get(min_annotation)
        if raw is not None:
            with contextlib.suppress(ValueError):
                out.minimum[gid] = max(out.minimum.get(gid, 0), int(raw))
    gangs = set(out.of.values())
    out.running = {gid: n for gid, n in bound.items() if gid in gangs}
    return out


def _verdicts(cls: PodClass, placement: Placement, reasons: dict[str, str], rest: Outcome, rest_reason: str | None,
              verdicts: dict[str, PodVerdict], new_pods: dict[int, list[Pod]], placed_on: dict[str, str]) -> None:
    """One verdict per pod. The pods of a class share one reasons mapping: read it, do not change it."""
    pods = iter(cls.pods)
    own: dict[str | None, dict[str, str]] = {}  # without the pool the pod lands in (it hit its max later)
    for b, k in placement:
        kind, pool = b.kind, b.pool
        if pool in reasons:
            if pool not in own:
                own[pool] = {p: r for p, r in reasons.items() if p != pool}
            mine_reasons = own[pool]
        else:
            mine_reasons = reasons
        if kind == "new":
            mine = new_pods.setdefault(id(b), [])
            for _ in range(k):
                pod = next(pods)
                key = pod.key
                verdicts[key] = PodVerdict(key, "scale-up", pool, None, mine_reasons)
                mine.append(pod)
        elif kind == "in-flight":
            for _ in range(k):
                key = next(pods).key
                verdicts[key] = PodVerdict(key, "fits-in-flight", pool, None, mine_reasons)
        else:
            outcome: Outcome = "fits-existing" if kind == "existing" else "fits-in-flight"
            b.touched = True
            name = b.name
            for _ in range(k):
                key = next(pods).key  # (made once: a pass gives a verdict to each of, at xl, 15,000 pods)
                verdicts[key] = PodVerdict(key, outcome, pool, name, mine_reasons)
                placed_on[key] = name
    why = {**reasons, "*": rest_reason} if rest_reason else reasons
    for pod in pods:
        key = pod.key
        verdicts[key] = PodVerdict(key, rest, None, None, why)


def _queue_key(members: list[PodClass]) -> tuple[float, float]:
    """Where a gang stands in the scheduler's queue: its highest priority, then its first member's creation."""
    return (-max(c.priority for c in members), min(p.created_at for c in members for p in c.pods))


def _segments(singles: list[PodClass], gang_keys: list[tuple[float, float]],
              info: dict[int, tuple[list[SlotOption], dict[str, str]]]) -> list[list[PodClass]]:
    """The single pods queued before the first gang, between it and the second, ..., after the last: a
    class whose pods fall into several runs is split (the parts share its candidates and reasons)."""
    out: list[list[PodClass]] = [[] for _ in range(len(gang_keys) + 1)]
    for c in singles:
        parts: dict[int, list[Pod]] = {}
        for p in c.pods:
            parts.setdefault(bisect.bisect_right(gang_keys, (-c.priority, p.created_at)), []).append(p)
        for i, pods in parts.items():
            out[i].append(_part(c, pods, info) if len(parts) > 1 else c)
    return out


def _part(c: PodClass, pods: list[Pod], info: dict[int, tuple[list[SlotOption], dict[str, str]]]) -> PodClass:
    """Some of a class's pods as a class of their own (single pods), sharing its candidates and reasons."""
    part = PodClass(c.rep, c.nz, c.static_id, None)
    part.pods, part.gpus, part.origin = pods, c.gpus, c
    info[id(part)] = info[id(c)]
    return part


def plan_scale_up(snapshot: Snapshot, ctx: PlanningContext, adv: Advanced) -> ScaleUpResult:
    planner = Placer(snapshot, ctx, adv)
    packer = planner.packer
    verdicts: dict[str, PodVerdict] = {}
    placed_on: dict[str, str] = {}
    new_pods: dict[int, list[Pod]] = {}
    gangs = _gangs(snapshot, ctx.gang_label, ctx.gang_min_annotation, planner.usage.gangs)
    pending = []
    for pod in snapshot.pending:
        if is_daemonset(pod):
            verdicts[pod.key] = PodVerdict(pod.key, "unschedulable", reasons={
                "*": "a DaemonSet pod is placed by its controller on its own node, not by a scale-up"})
        elif pod.key in gangs.held:
            verdicts[pod.key] = PodVerdict(pod.key, "waiting", reasons={"*": gangs.held[pod.key]})
        else:
            pending.append(pod)
    filtered = planner.filtered
    classes = packer.classify(pending, gangs.of, filtered.class_key if filtered.active else None)
    info = {id(c): planner.expander.candidates(c) for c in classes}
    members: dict[str, list[PodClass]] = {}
    singles: list[PodClass] = []
    for c in classes:
        if c.gang is None:
            singles.append(c)
        else:
            members.setdefault(c.gang, []).append(c)
    # Gangs and single pods in kube-scheduler's queue order (priority, then creation time): the single
    # pods queued before a gang are placed before it, so it does not take the node coming for them.
    ordered = sorted(members.items(), key=lambda kv: _queue_key(kv[1]))
    segments = _segments(singles, [_queue_key(m) for _, m in ordered], info)
    choosers: dict[int, Chooser] = {}
    out = _Verdicts(verdicts, new_pods, placed_on)
    for i, run in enumerate(segments):
        _place_singles(planner, run, choosers, info, out)
        if i < len(ordered):
            gid, classes_of = ordered[i]
            beyond = _place_gang(planner, gid, classes_of, info, gangs.minimum.get(gid), gangs.running.get(gid, 0),
                                 out)
            _place_singles(planner, beyond, choosers, info, out)
    _own_reasons(planner, verdicts)
    new_nodes = _new_nodes(packer, new_pods)
    return ScaleUpResult(_scale_ups(new_nodes, adv), verdicts, new_nodes, placed_on, packer, notes=out.notes,
                         filtered=filtered, quotas=dict(planner.caps.exhausted))


@dataclass(slots=True)
class _Verdicts:
    """Where the verdicts go: per pod, the pods packed on each new node, the pods placed on real nodes."""

    verdicts: dict[str, PodVerdict]
    new_pods: dict[int, list[Pod]]
    placed_on: dict[str, str]
    notes: list[str] = field(default_factory=list)  # one per gang that found no room, saying why

    def add(self, cls: PodClass, placement: Placement, reasons: dict[str, str], rest: Outcome,
            rest_reason: str | None) -> None:
        _verdicts(cls, placement, reasons, rest, rest_reason, self.verdicts, self.new_pods, self.placed_on)


def _place_singles(planner: Placer, run: list[PodClass], choosers: dict[int, Chooser],
                   info: dict[int, tuple[list[SlotOption], dict[str, str]]], out: _Verdicts) -> None:
    """Single pods: on existing and coming nodes in queue order, then the rest on new nodes."""
    on_existing = place_in_queue_order(planner.packer, run, choosers, planner.filtered)
    # Largest first; among pods alike, those fewer pools take first (a pod that fits any zone after the
    # ones pinned to one), so the pods left over are matched to the nodes coming, not just poured into them.
    run.sort(key=lambda c: (*planner.expander.sort_key(c), len(info[id(c)][0])))
    for c in run:
        cands, reasons = info[id(c)]
        placement = planner.place(c, cands, reasons, on_existing[id(c)])
        rest: Outcome = "waiting" if cands else "unschedulable"
        out.add(c, placement, reasons, rest, None if cands else "fits no pool's template")


def _place_gang(planner: Placer, gid: str, members: list[PodClass],
                info: dict[int, tuple[list[SlotOption], dict[str, str]]], minimum: int | None, running: int,
                out: _Verdicts) -> list[PodClass]:
    """Room for the gang's minimum together, or for none of it: the members the minimum still needs (beyond
    those bound) are placed in a Trial kept only when every one found room. Returns the members beyond the
    minimum, to be planned as single pods after it (none when the gang found no room: they wait with it)."""
    pending_n = sum(len(c.pods) for c in members)
    need = minimum if minimum is not None else pending_n + running
    if pending_n + running < need:
        for c in members:
            out.add(c, [], info[id(c)][1], "waiting", f"gang {gid}: {pending_n + running} of {need} members exist")
        return []
    first, beyond = _split(members, max(0, need - running), info)
    with Trial(planner) as trial:
        planner.caps.gang = True
        placements = [planner.place(c, *info[id(c)]) for c in first]
        planner.caps.gang = False
        got = sum(k for p in placements for _, k in p)
        wanted = sum(len(c.pods) for c in first)
        if got == wanted:
            trial.keep()
    if trial.kept:
        for c, p in zip(first, placements, strict=True):
            out.add(c, p, info[id(c)][1], "waiting", None)
        return beyond
    why = f"gang {gid}: room for {got} of the {wanted} members it needs together; all or none"
    out.notes.append(f"{why}: nothing bought for it ({_limit(first, info)})")
    for c in [*first, *beyond]:
        no_home = not info[id(c)][0] and not planner.packer.eligible_real(c.static_id)
        out.add(c, [], info[id(c)][1], "unschedulable" if no_home else "waiting", why)
    return []


def _split(members: list[PodClass], k: int, info: dict[int, tuple[list[SlotOption], dict[str, str]]]
           ) -> tuple[list[PodClass], list[PodClass]]:
    """The first `k` members (in queue order: creation time) and the rest, as classes."""
    pods = sorted(((p.created_at, p.name, p, c) for c in members for p in c.pods), key=lambda t: t[:2])
    if k >= len(pods):
        return members, []
    first: dict[int, list[Pod]] = {}
    rest: dict[int, list[Pod]] = {}
    by_id = {id(c): c for c in members}
    for i, (_, _, p, c) in enumerate(pods):
        (first if i < k else rest).setdefault(id(c), []).append(p)

    def parts(chosen: dict[int, list[Pod]]) -> list[PodClass]:
        return [by_id[i] if len(ps) == len(by_id[i].pods) else _part(by_id[i], ps, info) for i, ps in chosen.items()]
    return parts(first), parts(rest)


def _limit(members: list[PodClass], info: dict[int, tuple[list[SlotOption], dict[str, str]]]) -> str:
    """What stops a gang, in the words of the pools' reasons (pool max, quota, limits, no template fits)."""
    reasons: dict[str, str] = {}
    for c in members:
        reasons.update(info[id(c)][1])
    return "; ".join(f"{pool}: {why}" for pool, why in sorted(reasons.items())) or "no pool holds it all"


def _own_reasons(planner: Placer, verdicts: dict[str, PodVerdict]) -> None:
    """A constrained pod's own refusals by kube-scheduler's filters; one the filters keep off every
    pool's template is unschedulable (no scale-up helps it)."""
    for key, mine in planner.pod_reasons.items():
        v = verdicts.get(key)
        if v is not None:
            v.reasons = {**v.reasons, **{p: r for p, r in mine.items() if p != v.pool}}
    for key in planner.refused_everywhere:
        v = verdicts.get(key)
        if v is not None and v.outcome == "waiting":
            v.outcome = "unschedulable"


def _new_nodes(packer: Packer, new_pods: dict[int, list[Pod]]) -> list[NewNode]:
    """The nodes asked for, with the pods packed on each (a new bin nothing was packed on is not asked for)."""
    out: list[NewNode] = []
    for b in packer.bins:
        pods = new_pods.get(id(b), []) if b.kind == "new" else []
        if pods:
            assert b.pool is not None and b.zone is not None
            out.append(NewNode(b.pool, b.zone, b.node, pods))
    return out


def _scale_ups(new_nodes: list[NewNode], adv: Advanced) -> list[ScaleUp]:
    """One ScaleUp per (pool, zone), with its pods and the pool's desired size after it."""
    pods: dict[tuple[str, str], list[str]] = {}
    for nn in new_nodes:
        pods.setdefault((nn.pool, nn.zone), []).extend(p.key for p in nn.pods)
    n_nodes: dict[tuple[str, str], int] = {}
    for nn in new_nodes:
        n_nodes[(nn.pool, nn.zone)] = n_nodes.get((nn.pool, nn.zone), 0) + 1
    out: list[ScaleUp] = []
    desired = dict(adv.desired)
    for (pool, zone), pod_keys in pods.items():
        n = n_nodes[(pool, zone)]
        desired[pool] = desired.get(pool, 0) + n
        out.append(ScaleUp(pool, zone, n, desired[pool], tuple(pod_keys)))
    return out
