"""Scale-up planner: place pending pods on existing, coming and in-flight capacity, then on new nodes.

On existing and coming nodes the pods go as kube-scheduler will bind them: in its queue order, each
where the scoring profile its `schedulerName` names would put it (`_Chooser`). What is left is packed
first-fit decreasing onto booting and new nodes.

Pure. The hot path works on equivalence classes, never on pods x nodes:

- a *pod class* is the pods with the same requests, selector / affinity, tolerations, priority,
  scheduler and gang: they are interchangeable, so the planner places counts, not pods;
- a *group* is the nodes whose labels (restricted to the keys any pod looks at), taints and
  unschedulable flag are equal: the static predicates are evaluated once per (pod statics, group)
  and cached;
- a group keeps an upper bound of the free resources of its nodes, so a class that cannot fit skips
  the whole group without looking at its nodes.

The same Packer re-places evicted pods for the scale-down planner.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from scaler.core import keys, predicates, scoring
from scaler.core.config import ScalerConfig
from scaler.core.model import Node, Pod, SelectorTerm, Taint, Toleration
from scaler.core.pool import Pool
from scaler.core.snapshot import Outcome, PodVerdict, ScaleUp, Snapshot
from scaler.core.state import Advanced, fmt_time, node_pool

# Taints a booting node carries until the kubelet / cloud controller is done: not a reason to
# think the node will never take the pod. (Kept here: the scheduler, not gpuburst, owns them.)
STARTUP_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.cloudprovider.kubernetes.io/uninitialized"})
TERMINATED = predicates.TERMINATED_PHASES
MAX_IN_FLIGHT_BINS = 1000  # per pool: beyond that many booting nodes the detail stops mattering

BinKind = Literal["existing", "coming", "in-flight", "new"]
_UNSCHED_TAINT = Taint(keys.TAINT_UNSCHEDULABLE, "", "NoSchedule")


class Bin:
    """A node's free capacity as a resource vector: a real node, a booting one, or a template."""

    __slots__ = ("alloc", "free", "group", "kind", "name", "node", "pool", "removed", "touched", "version", "zone")

    def __init__(self, free: list[int], kind: BinKind, name: str, pool: str | None, zone: str | None,
                 group: Group, node: Node, alloc: list[int] | None = None) -> None:
        self.free = free
        self.alloc = alloc  # allocatable of an existing / coming node (what the scheduler scores)
        self.version = 0  # bumped whenever `free` changes: a score computed earlier is stale
        self.kind = kind
        self.name = name
        self.pool = pool
        self.zone = zone
        self.group = group
        self.node = node
        self.removed = False  # chosen for removal by the scale-down planner
        self.touched = False  # received pods in this pass


class Group:
    """Nodes the static predicates cannot tell apart."""

    __slots__ = ("bins", "bound", "label_id", "node", "start", "taint_id", "unsched")

    def __init__(self, label_id: int, taint_id: int, unsched: bool, node: Node) -> None:
        self.label_id = label_id
        self.taint_id = taint_id
        self.unsched = unsched
        self.node = node  # a representative: its labels and taints are the group's
        self.bins: list[Bin] = []
        self.bound: list[int] | None = None  # elementwise max of free over bins, None = unknown
        self.start = 0  # bins before this one are too full for any pod of the pass


class PodClass:
    """Interchangeable pods."""

    __slots__ = ("gang", "gpus", "nz", "pods", "priority", "rep", "sort_key", "static_id")

    def __init__(self, rep: Pod, nz: tuple[tuple[int, int], ...], static_id: int, gang: str | None) -> None:
        self.rep = rep
        self.nz = nz  # (resource index, amount) of the non-zero requests
        self.static_id = static_id
        self.gang = gang
        self.pods: list[Pod] = []
        self.gpus = 0
        self.priority = rep.priority
        self.sort_key: tuple[float, ...] = ()


@dataclass(slots=True)
class Slot:
    """A (pool, zone) a scale-up can open nodes in, with its template node."""

    pool: Pool
    zone: str
    group: Group
    empty: list[int]  # free resources of a new node (allocatable minus the pool's DaemonSets)
    price: float
    spot: bool
    shape: int = 0  # slots with equal `empty` share a shape


@dataclass(slots=True)
class Candidate:
    slot: Slot
    per_node: int  # pods of the class an empty template takes
    waste_terms: tuple[tuple[int, int], ...] = ()  # (free on an empty node, request) of gpu, cpu, memory


@dataclass(slots=True)
class NewNode:
    """A node the plan asks for, with the pods it was packed for (used by explain and tests)."""

    pool: str
    zone: str
    template: Node
    pods: list[Pod] = field(default_factory=list)


Placement = list[tuple[Bin, int]]


def _dominant(nz: Iterable[tuple[int, int]], scale: Sequence[int]) -> float:
    return max((a / scale[i] for i, a in nz if scale[i] > 0), default=0.0)


def _fit_count(free: list[int], nz: tuple[tuple[int, int], ...], limit: int) -> int:
    k = limit
    for i, a in nz:
        q = free[i] // a
        if q < k:
            if q <= 0:
                return 0
            k = q
    return k


class Packer:
    """Bins, groups and pod classes of one pass, with transactions for all-or-nothing placement."""

    def __init__(self, resources: Sequence[str], ref_keys: Iterable[str]) -> None:
        self.resources = list(resources)
        self.index = {r: i for i, r in enumerate(self.resources)}
        self.ref_keys = tuple(sorted(set(ref_keys)))
        self.groups: dict[tuple[object, ...], Group] = {}
        self.real_groups: list[Group] = []
        self.bins: list[Bin] = []
        self.by_node: dict[str, Bin] = {}
        self._label_ids: dict[tuple[str | None, ...], int] = {}
        self._taint_ids: dict[tuple[Taint, ...], int] = {}
        self._sel_ids: dict[tuple[object, ...], int] = {}
        self._sel_reps: list[Pod] = []
        self._tol_ids: dict[tuple[Toleration, ...], int] = {}
        self._tols: list[tuple[Toleration, ...]] = []
        self._static_ids: dict[tuple[int, int], int] = {}
        self._statics: list[tuple[int, int]] = []
        self._sel_cache: dict[tuple[int, int], bool] = {}
        self._taint_cache: dict[tuple[int, int], str | None] = {}
        self._unsched_cache: dict[int, bool] = {}
        self._eligible: dict[int, list[Group]] = {}
        self._classes: dict[tuple[object, ...], PodClass] = {}
        self._journal: list[tuple[Bin, list[int] | None]] | None = None
        self.changed: list[Bin] = []  # existing / coming bins whose free changed, in order (for _Chooser)
        # (profile, request) -> bin -> (version, resource score): classes that differ only in their
        # statics share the per-node part of their scores.
        self.scores: dict[tuple[str, tuple[tuple[int, int], ...]], dict[int, tuple[int, int]]] = {}
        self.in_flight_groups: list[Group] = []  # booting nodes of multi-zone pools (zone unknown)
        # (resource, amount) every pod of the pass requests at least: a bin with less is dead.
        self.dead: tuple[tuple[int, int], ...] = ()

    def set_min_request(self, pods: Iterable[Pod]) -> None:
        """Declare every pod this pass will place (pending and evictable): bins that cannot take the
        smallest of them on some resource they all request are skipped from then on."""
        low: dict[str, int] | None = None
        for pod in pods:
            req = pod.requests
            if low is None:
                low = {r: v for r, v in req.items() if v > 0}
                continue
            for r in list(low):
                v = req.get(r, 0)
                if v <= 0:
                    del low[r]
                elif v < low[r]:
                    low[r] = v
            if not low:
                break
        self.dead = tuple((self.index[r], v) for r, v in (low or {}).items())

    # --- vectors ---------------------------------------------------------------------------
    def vec(self, res: Mapping[str, int]) -> list[int]:
        out = [0] * len(self.resources)
        for name, value in res.items():
            out[self.index[name]] += value
        return out

    # --- groups ------------------------------------------------------------------------------
    def _group_key(self, node: Node, taints: tuple[Taint, ...]) -> tuple[int, int, bool]:
        sig = tuple(node.labels.get(k) for k in self.ref_keys)
        label_id = self._label_ids.setdefault(sig, len(self._label_ids))
        taint_id = self._taint_ids.setdefault(taints, len(self._taint_ids))
        return label_id, taint_id, node.unschedulable

    def group_for(self, node: Node, taints: tuple[Taint, ...], own: object = None) -> Group:
        """The group of a node; `own` gives templates a group of their own."""
        label_id, taint_id, unsched = self._group_key(node, taints)
        key: tuple[object, ...] = (label_id, taint_id, unsched, own)
        group = self.groups.get(key)
        if group is None:
            rep = node if taints == node.taints else Node(node.name, node.labels, taints, node.allocatable,
                                                          node.unschedulable)
            group = Group(label_id, taint_id, unsched, rep)
            self.groups[key] = group
            if own is None:
                self.real_groups.append(group)
        return group

    def add_bin(self, node: Node, free: list[int], kind: BinKind, group: Group, pool: str | None,
                zone: str | None, alloc: list[int] | None = None) -> Bin:
        b = Bin(free, kind, node.name, pool, zone, group, node, alloc)
        group.bins.append(b)
        if group.bound is not None:
            group.bound = list(map(max, group.bound, free))
        self.bins.append(b)
        if kind in ("existing", "coming"):
            self.by_node[node.name] = b
        return b

    # --- pod classes and static predicates ------------------------------------------------
    def static_id(self, pod: Pod) -> int:
        sel_key = (tuple(sorted(pod.node_selector.items())), pod.required_affinity)
        sel_id = self._sel_ids.get(sel_key)
        if sel_id is None:
            sel_id = self._sel_ids[sel_key] = len(self._sel_reps)
            self._sel_reps.append(pod)
        tol_id = self._tol_ids.get(pod.tolerations)
        if tol_id is None:
            tol_id = self._tol_ids[pod.tolerations] = len(self._tols)
            self._tols.append(pod.tolerations)
        pair = (sel_id, tol_id)
        sid = self._static_ids.get(pair)
        if sid is None:
            sid = self._static_ids[pair] = len(self._statics)
            self._statics.append(pair)
        return sid

    def classify(self, pods: Iterable[Pod], gang_of: Mapping[str, str] | None = None) -> list[PodClass]:
        """Pods into classes (a class never mixes gangs); classes in first-seen order."""
        out: list[PodClass] = []
        seen: dict[tuple[object, ...], PodClass] = {}
        for pod in pods:
            gang = gang_of.get(pod.key) if gang_of else None
            req_key = tuple(sorted(pod.requests.items()))
            sid = self.static_id(pod)
            key = (req_key, sid, pod.priority, pod.scheduler_name, gang)
            cls = seen.get(key)
            if cls is None:
                nz = tuple(sorted((self.index[n], v) for n, v in pod.requests.items() if v > 0))
                cls = seen[key] = PodClass(pod, nz, sid, gang)
                gpu = self.index.get(keys.RES_GPU)
                cls.gpus = pod.requests.get(keys.RES_GPU, 0) if gpu is not None else 0
                out.append(cls)
            cls.pods.append(pod)
        return out

    def static_reason(self, static_id: int, group: Group) -> str | None:
        """predicates.static_reason for any pod of the statics and any node of the group, cached."""
        sel_id, tol_id = self._statics[static_id]
        if group.unsched:
            ok = self._unsched_cache.get(tol_id)
            if ok is None:
                ok = self._unsched_cache[tol_id] = any(
                    predicates.toleration_matches(t, _UNSCHED_TAINT) for t in self._tols[tol_id])
            if not ok:
                return predicates.REASON_UNSCHEDULABLE
        sk = (sel_id, group.label_id)
        match = self._sel_cache.get(sk)
        if match is None:
            match = self._sel_cache[sk] = predicates.matches_node_affinity(self._sel_reps[sel_id], group.node.labels)
        if not match:
            return predicates.REASON_SELECTOR
        tk = (tol_id, group.taint_id)
        if tk in self._taint_cache:
            return self._taint_cache[tk]
        taint = predicates.untolerated_taint(self._tols[tol_id], group.node.taints)
        reason = None if taint is None else predicates.taint_reason(taint)
        self._taint_cache[tk] = reason
        return reason

    def eligible_real(self, static_id: int) -> list[Group]:
        groups = self._eligible.get(static_id)
        if groups is None:
            groups = [g for g in self.real_groups if self.static_reason(static_id, g) is None]
            self._eligible[static_id] = groups
        return groups

    # --- placement ---------------------------------------------------------------------------
    def fill(self, cls: PodClass, groups: Iterable[Group], n: int, kinds: frozenset[str], out: Placement) -> int:
        """First-fit up to n pods of the class into the groups' bins; returns how many were placed."""
        placed = 0
        nz = cls.nz
        journal = self._journal
        dead = self.dead
        for group in groups:
            bound = group.bound
            if bound is not None and any(bound[i] < a for i, a in nz):
                continue
            bins = group.bins
            start = group.start
            if dead:  # skip the leading bins too full for any pod of this pass (FFD fills them first)
                while start < len(bins) and any(bins[start].free[i] < m for i, m in dead):
                    start += 1
                group.start = start
            for j in range(start, len(bins)):
                b = bins[j]
                free = b.free
                k = n - placed
                for i, a in nz:  # _fit_count, inlined: this loop is the planner's hottest
                    q = free[i] // a
                    if q < k:
                        k = q
                        if k <= 0:
                            break
                if k <= 0 or b.removed or b.kind not in kinds:
                    continue
                if journal is not None:
                    journal.append((b, list(free)))
                for i, a in nz:
                    free[i] -= a * k
                if b.alloc is not None:
                    b.version += 1
                    self.changed.append(b)
                out.append((b, k))
                placed += k
                if placed >= n:
                    return placed
            self.tighten(group)  # the whole group was looked at and could not take the rest
        return placed

    def tighten(self, group: Group) -> None:
        """Recompute the group's bound from its live bins (after finding it cannot take a class)."""
        live = [b.free for b in group.bins[group.start:] if not b.removed]
        group.bound = [max(col) for col in zip(*live, strict=True)] if live else [0] * len(self.resources)

    def begin(self) -> None:
        self._journal = []

    def commit(self) -> None:
        self._journal = None

    def rollback(self) -> None:
        """Undo every placement and opened bin since begin()."""
        journal = self._journal or []
        self._journal = None
        for b, old in reversed(journal):
            if old is None:  # an opened bin
                b.group.bins.remove(b)
                self.bins.remove(b)
            else:
                b.free[:] = old
                if b.alloc is not None:
                    b.version += 1
                    self.changed.append(b)
            b.group.bound = None
            b.group.start = 0

    def open_bin(self, slot: Slot, name: str) -> Bin:
        node = slot.group.node
        b = self.add_bin(node, list(slot.empty), "new", slot.group, slot.pool.name, slot.zone)
        b.name = name
        if self._journal is not None:
            self._journal.append((b, None))
        return b


class _Chooser:
    """Where the scheduler profile a class's pods name (`schedulerName`, see `scaler.core.scoring`)
    would bind them among the existing and coming nodes, one pod at a time, as kube-scheduler does:
    the best total score, ties to the first node name.

    A heap of (score, name) over the nodes with room. Placing a pod changes only that node's score for
    the class, so it is re-scored and pushed back; nodes other classes filled since are re-scored from
    the packer's change log, and entries of an older version are dropped when they surface.
    TaintToleration and NodeAffinity are normalised over the nodes that had room when the class was
    first placed (the scheduler normalises over the nodes that pass its filters at each pod)."""

    def __init__(self, packer: Packer, cls: PodClass) -> None:
        self.packer = packer
        self.cls = cls
        self.profile = scoring.for_scheduler(cls.rep.scheduler_name)
        self.request = cls.rep.requests
        wanted = {r for r, _ in self.profile.fit_resources} | set(self.profile.balanced_resources)
        self.score_idx = [(r, packer.index[r]) for r in sorted(wanted) if r in packer.index]
        self.groups = {id(g) for g in packer.eligible_real(cls.static_id)}
        self.heap: list[tuple[int, str, int, int, Bin]] = []
        self.cache = packer.scores.setdefault((self.profile.name, cls.nz), {})
        self.seq = 0
        self.dead = False
        found: list[Bin] = []
        nz = cls.nz
        for g in packer.eligible_real(cls.static_id):
            bound = g.bound
            if bound is not None and any(bound[i] < a for i, a in nz):
                continue
            before = len(found)
            for b in g.bins[g.start:]:  # _open, inlined: this loop runs once per class and node
                if b.removed or b.alloc is None:
                    continue
                free = b.free
                for i, a in nz:
                    if free[i] < a:
                        break
                else:
                    found.append(b)
            if len(found) == before:  # no node of the group takes the class
                packer.tighten(g)
        seen: dict[int, Group] = {id(b.group): b.group for b in found}
        self.norm_nodes = [g.node for g in seen.values()]
        values = scoring.static_scores(cls.rep, self.norm_nodes, self.profile)
        self.static = {gid: v for gid, v in zip(seen, values, strict=True)}
        for b in found:
            self._push(b)
        self.synced = len(packer.changed)

    def _open(self, b: Bin) -> bool:
        """A real (existing or coming) node, not being removed, with room for one more pod."""
        if b.removed or b.alloc is None:
            return False
        free = b.free
        return all(free[i] >= a for i, a in self.cls.nz)

    def _push(self, b: Bin) -> None:
        gid = id(b.group)
        static = self.static.get(gid)
        if static is None:  # a group that had no room when the class was first placed
            static = scoring.static_scores(self.cls.rep, [*self.norm_nodes, b.group.node], self.profile)[-1]
            self.static[gid] = static
        cached = self.cache.get(id(b))
        if cached is not None and cached[0] == b.version:
            score = static + cached[1]
        else:
            assert b.alloc is not None
            alloc = {r: b.alloc[i] for r, i in self.score_idx}
            free = {r: b.free[i] for r, i in self.score_idx}
            part = scoring.resource_score(self.request, alloc, free, self.profile)
            self.cache[id(b)] = (b.version, part)
            score = static + part
        self.seq += 1
        heapq.heappush(self.heap, (-score, b.name, self.seq, b.version, b))

    def take(self, n: int, out: Placement) -> int:
        """Place up to n pods of the class; returns how many found a node."""
        packer = self.packer
        changed = packer.changed
        for b in changed[self.synced:]:
            if id(b.group) in self.groups and self._open(b):
                self._push(b)
        heap = self.heap
        nz = self.cls.nz
        journal = packer._journal
        placed = 0
        while placed < n and heap:
            b = heap[0][4]
            if heap[0][3] != b.version or not self._open(b):
                heapq.heappop(heap)
                continue
            heapq.heappop(heap)
            if journal is not None:
                journal.append((b, list(b.free)))
            for i, a in nz:
                b.free[i] -= a
            b.version += 1
            changed.append(b)
            if out and out[-1][0] is b:
                out[-1] = (b, out[-1][1] + 1)
            else:
                out.append((b, 1))
            placed += 1
            if self._open(b):
                self._push(b)
        self.synced = len(changed)
        if placed < n:
            self.dead = True  # nothing frees capacity while a pass places pods (bar a rolled-back gang)
        return placed


# --- the planner ---------------------------------------------------------------------------------
@dataclass(slots=True)
class ScaleUpResult:
    scale_ups: list[ScaleUp]
    verdicts: dict[str, PodVerdict]
    new_nodes: list[NewNode]
    placed_on: dict[str, str]  # pod key -> existing / coming node name
    packer: Packer
    notes: list[str] = field(default_factory=list)


def _resource_names(snapshot: Snapshot, templates: Iterable[Mapping[str, int]]) -> list[str]:
    names: set[str] = set()
    for pod in snapshot.pending:
        names.update(pod.requests)
    for node in snapshot.nodes:
        names.update(node.allocatable)
        for pod in node.pods:
            names.update(pod.requests)
    for res in templates:
        names.update(res)
    first = [keys.RES_GPU, keys.RES_CPU, keys.RES_MEMORY, keys.RES_PODS]
    return [r for r in first if r in names] + sorted(names - set(first))


def _affinity_keys(terms: tuple[SelectorTerm, ...]) -> Iterable[str]:
    for term in terms:
        for req in term:
            yield req.key


def referenced_keys(pods: Iterable[Pod]) -> set[str]:
    out: set[str] = set()
    seen: set[int] = set()
    for pod in pods:
        out.update(pod.node_selector)
        if pod.required_affinity and id(pod.required_affinity) not in seen:
            seen.add(id(pod.required_affinity))
            out.update(_affinity_keys(pod.required_affinity))
        if pod.preferred_affinity and id(pod.preferred_affinity) not in seen:  # scored, so grouped by
            seen.add(id(pod.preferred_affinity))
            out.update(_affinity_keys(tuple(p.term for p in pod.preferred_affinity)))
    return out


def is_coming(node: Node, pool: Pool | None, now: float, config: ScalerConfig) -> bool:
    """A registered node that will take pods soon: not ready yet, or a GPU node whose device plugin
    has not published its GPUs yet. Only within the provision timeout of its creation."""
    if pool is None:
        return False
    young = node.created_at <= 0 or now - node.created_at < config.timings.provision_timeout
    if not young:
        return False
    if not node.ready:
        return True
    return pool.gpus > 0 and node.allocatable.get(keys.RES_GPU, 0) <= 0


def build_packer(snapshot: Snapshot, config: ScalerConfig, adv: Advanced) -> tuple[Packer, list[Slot]]:
    """Bins for existing, coming and in-flight nodes, and one template slot per (pool, zone)."""
    now = snapshot.now
    templates: dict[tuple[str, str], Node] = {}
    for name, obs in snapshot.pools.items():
        for zone in obs.pool.zones:
            templates[(name, zone)] = obs.pool.template_node(zone, config.region)
    running = [p for n in snapshot.nodes for p in n.pods if p.owner_kind != "DaemonSet"]
    packer = Packer(
        _resource_names(snapshot, [t.allocatable for t in templates.values()]),
        referenced_keys([*snapshot.pending, *running]),
    )
    packer.set_min_request([*snapshot.pending, *running])
    for node in snapshot.nodes:
        pname = node_pool(node)
        seen = snapshot.pools.get(pname) if pname else None
        pool = seen.pool if seen else None
        taints = node.taints
        if is_coming(node, pool, now, config):
            assert pool is not None
            kind: BinKind = "coming"
            alloc = dict(node.allocatable)
            if pool.gpus and alloc.get(keys.RES_GPU, 0) <= 0:
                alloc = pool.allocatable()
            taints = tuple(t for t in taints if t.key not in STARTUP_TAINTS)
        elif node.ready:
            kind, alloc = "existing", node.allocatable
        else:
            continue  # NotReady for long: no capacity, not ours to guess about
        free = packer.vec(alloc)
        vec_alloc = list(free)
        for pod in node.pods:
            if pod.phase not in TERMINATED:
                for r, v in pod.requests.items():
                    free[packer.index[r]] -= v
        group = packer.group_for(node, taints)
        packer.add_bin(node, free, kind, group, pname, node.labels.get(keys.LABEL_ZONE), vec_alloc)
    slots: list[Slot] = []
    shapes: dict[tuple[int, ...], int] = {}
    for name, obs in snapshot.pools.items():
        pool = obs.pool
        price = config.price(pool)
        for zone in pool.zones:
            tmpl = templates[(name, zone)]
            group = packer.group_for(tmpl, tmpl.taints, own=("slot", name, zone))
            empty = packer.vec(predicates.free_resources(tmpl))
            shape = shapes.setdefault(tuple(empty), len(shapes))
            slots.append(Slot(pool, zone, group, empty, price, pool.capacity_type == "spot", shape))
        count = min(adv.in_flight(name), MAX_IN_FLIGHT_BINS)
        if not count:
            continue
        pool_slots = {s.zone: s for s in slots if s.pool.name == name}
        # Booting nodes go in the zone they were asked in; those of unknown zone (a multi-zone pool
        # after a restart) get a template without a zone label: a pod that needs a zone does not
        # count on them.
        single = pool.zones[0] if len(pool.zones) == 1 else None
        by_zone: list[tuple[str | None, int]] = []
        for rec in adv.state.in_flight.get(name, []):
            by_zone.append((rec.zone if rec.zone in pool_slots else single, rec.count))
        known = sum(n for _, n in by_zone)
        if known < count:
            by_zone.append((single, count - known))
        i = 0
        for where, asked in by_zone:
            n = min(asked, count - i)
            if n <= 0:
                break
            if where is not None:
                group, empty = pool_slots[where].group, pool_slots[where].empty
            else:
                group = _zoneless_group(packer, name, templates[(name, pool.zones[0])])
                empty = packer.vec(predicates.free_resources(group.node))
            for _ in range(n):
                b = packer.add_bin(group.node, list(empty), "in-flight", group, name, where)
                b.name = f"in-flight-{name}-{i}"
                i += 1
    return packer, slots


def _zoneless_group(packer: Packer, pool: str, tmpl: Node) -> Group:
    key = ("in-flight", pool)
    for g in packer.in_flight_groups:
        if g.node.name == f"in-flight-{pool}":
            return g
    labels = {k: v for k, v in tmpl.labels.items() if k != keys.LABEL_ZONE}
    node = Node(f"in-flight-{pool}", labels, tmpl.taints, tmpl.allocatable, pool=pool, pods=tmpl.pods,
                is_template=True)
    group = packer.group_for(node, node.taints, own=key)
    packer.in_flight_groups.append(group)
    return group


class _Caps:
    """Pool room and the cluster limits, as counters that a transaction can restore."""

    def __init__(self, snapshot: Snapshot, config: ScalerConfig, adv: Advanced) -> None:
        self.config = config
        self.now = snapshot.now
        self.state = adv.state
        lim = config.limits
        self.room = {n: max(0, o.pool.max_size - adv.desired.get(n, o.desired)) for n, o in snapshot.pools.items()}
        self.max_size = {n: o.pool.max_size for n, o in snapshot.pools.items()}
        unmanaged = sum(1 for node in snapshot.nodes if node_pool(node) not in snapshot.pools)
        self.nodes = unmanaged + sum(adv.desired.values())
        self.gpus = sum(n.allocatable.get(keys.RES_GPU, 0) for n in snapshot.nodes
                        if node_pool(n) not in snapshot.pools)
        self.gpus += sum(adv.desired.get(n, 0) * o.pool.gpus for n, o in snapshot.pools.items())
        self.cost = sum(adv.desired.get(n, 0) * config.price(o.pool) for n, o in snapshot.pools.items())
        self.added: dict[str, int] = {}
        self.this_pass = 0
        self.limits = lim
        # A gang's nodes are asked for together: the per-pass cap (a rate limit) would starve a gang
        # larger than it forever, so it counts them but does not stop them. Pool max and limits do.
        self.gang = False

    def save(self) -> tuple[dict[str, int], int, int, float, int]:
        return dict(self.added), self.nodes, self.gpus, self.cost, self.this_pass

    def restore(self, saved: tuple[dict[str, int], int, int, float, int]) -> None:
        self.added, self.nodes, self.gpus, self.cost, self.this_pass = dict(saved[0]), *saved[1:]

    def availability(self, slot: Slot) -> str | None:
        """Why the pool / zone cannot launch now (the fallback takes over), or None."""
        name = slot.pool.name
        b = self.state.backoff.get(name)
        if b is not None and b.until > self.now:
            return f"backoff until {fmt_time(b.until)}"
        until = self.state.unavailable.get((name, slot.zone))
        if until is not None and until > self.now:
            what = "spot" if slot.spot else "capacity"
            return f"{what} unavailable in {slot.zone} until {fmt_time(until)}"
        return None

    def limit(self, slot: Slot) -> str | None:
        """Why one more node of the slot would break the pool max or a cluster limit, or None."""
        name = slot.pool.name
        if self.added.get(name, 0) >= self.room.get(name, 0):
            return f"pool at max ({self.max_size[name]})"
        lim = self.limits
        if self.this_pass >= lim.max_nodes_per_pass and not self.gang:
            return f"max_nodes_per_pass ({lim.max_nodes_per_pass}) reached"
        if lim.max_nodes is not None and self.nodes + 1 > lim.max_nodes:
            return f"cluster limit max_nodes reached ({lim.max_nodes})"
        if lim.max_gpus is not None and slot.pool.gpus and self.gpus + slot.pool.gpus > lim.max_gpus:
            return f"cluster limit max_gpus reached ({lim.max_gpus})"
        if lim.max_cost_per_hour is not None and self.cost + slot.price > lim.max_cost_per_hour + 1e-9:
            return f"cluster limit max_cost_per_hour reached ({lim.max_cost_per_hour:g})"
        return None

    def take(self, slot: Slot) -> None:
        name = slot.pool.name
        self.added[name] = self.added.get(name, 0) + 1
        self.this_pass += 1
        self.nodes += 1
        self.gpus += slot.pool.gpus
        self.cost += slot.price


class _Planner:
    def __init__(self, snapshot: Snapshot, config: ScalerConfig, adv: Advanced) -> None:
        self.snapshot = snapshot
        self.config = config
        self.adv = adv
        self.packer, self.slots = build_packer(snapshot, config, adv)
        self.caps = _Caps(snapshot, config, adv)
        self.by_pool: dict[str, list[Slot]] = {}
        for s in self.slots:
            self.by_pool.setdefault(s.pool.name, []).append(s)
        self.in_flight_groups = self.packer.in_flight_groups
        self.slot_groups = [s.group for s in self.slots]
        self.opened: dict[tuple[str, str], int] = {}
        self.scale = [max((s.empty[i] for s in self.slots), default=0) for i in range(len(self.packer.resources))]
        self.template_kinds = frozenset({"in-flight", "new"})
        self._static_cache: dict[int, tuple[dict[str, str], list[tuple[str, list[Slot]]]]] = {}
        self._cand_cache: dict[tuple[int, tuple[tuple[int, int], ...]], tuple[list[Candidate], dict[str, str]]] = {}
        gpu_cpu_mem = [self.packer.index.get(r) for r in (keys.RES_GPU, keys.RES_CPU, keys.RES_MEMORY)]
        self._waste_idx = [i for i in gpu_cpu_mem if i is not None]

    # --- per class: which pools could ever take it, and why the others cannot ----------------
    def _static_pools(self, static_id: int) -> tuple[dict[str, str], list[tuple[str, list[Slot]]]]:
        """Why the statics rule out whole pools (the reason of the zone that got furthest), and the
        zones of the other pools they allow."""
        cached = self._static_cache.get(static_id)
        if cached is None:
            reasons: dict[str, str] = {}
            allowed: list[tuple[str, list[Slot]]] = []
            for name, slots in self.by_pool.items():
                ok: list[Slot] = []
                best: tuple[int, str] | None = None
                for slot in slots:
                    why = self.packer.static_reason(static_id, slot.group)
                    if why is None:
                        ok.append(slot)
                        continue
                    stage = 1 if why.startswith("node(s) had untolerated taint") else 0
                    if best is None or stage > best[0]:
                        best = (stage, why)
                if ok:
                    allowed.append((name, ok))
                elif best is not None:
                    reasons[name] = best[1]
            cached = self._static_cache[static_id] = (reasons, allowed)
        return cached

    def candidates(self, cls: PodClass) -> tuple[list[Candidate], dict[str, str]]:
        """The template slots the class fits (with pods per node) and, per other pool, why not."""
        key = (cls.static_id, cls.nz)
        cached = self._cand_cache.get(key)
        if cached is None:
            static_reasons, allowed = self._static_pools(cls.static_id)
            reasons = dict(static_reasons)
            cands: list[Candidate] = []
            used = dict(cls.nz)
            # Slots of the same instance type share the numbers: compute them once per shape.
            shapes: dict[int, tuple[int, tuple[tuple[int, int], ...]]] = {}
            for name, ok in allowed:
                before = len(cands)
                for slot in ok:
                    shape = shapes.get(slot.shape)
                    if shape is None:
                        k = _fit_count(slot.empty, cls.nz, 1 << 30)
                        terms = tuple((slot.empty[i], used.get(i, 0)) for i in self._waste_idx if slot.empty[i] > 0)
                        shape = shapes[slot.shape] = (k, terms)
                    if shape[0] > 0:
                        cands.append(Candidate(slot, shape[0], shape[1]))
                if len(cands) == before:
                    empty = ok[0].empty
                    short = [self.packer.resources[i] for i, a in cls.nz if empty[i] < a]
                    reasons[name] = ", ".join("Too many pods" if r == keys.RES_PODS else f"Insufficient {r}"
                                              for r in short)
            cached = self._cand_cache[key] = (cands, reasons)
        return cached[0], dict(cached[1])

    def _score(self, c: Candidate, cls: PodClass, n: int) -> tuple[float, int, float, str, str]:
        m = max(1, min(c.per_node, n))
        terms = c.waste_terms
        waste = sum((e - m * u) / e for e, u in terms) / len(terms) if terms else 0.0
        return c.slot.price / m, 0 if c.slot.spot else 1, waste, c.slot.pool.name, c.slot.zone

    def _pick(self, cls: PodClass, cands: list[Candidate], n: int, excluded: set[int],
              reasons: dict[str, str]) -> Candidate | None:
        ranked = sorted((c for c in cands if id(c.slot) not in excluded), key=lambda c: self._score(c, cls, n))
        for c in ranked:
            blocked = self.caps.availability(c.slot)
            if blocked is None:
                blocked = self.caps.limit(c.slot)
                if blocked is None:
                    return c
                reasons.setdefault(c.slot.pool.name, blocked)
                excluded.add(id(c.slot))
                continue
            reasons.setdefault(c.slot.pool.name, blocked)
            excluded.add(id(c.slot))
            fb = self._fallback(cls, cands, c.slot.pool, n, excluded, reasons, {c.slot.pool.name})
            if fb is not None:
                return fb
        return None

    def _fallback(self, cls: PodClass, cands: list[Candidate], pool: Pool, n: int, excluded: set[int],
                  reasons: dict[str, str], seen: set[str]) -> Candidate | None:
        """The declared fallback of a pool that cannot launch (following the chain)."""
        name = pool.fallback
        if name is None or name in seen:
            return None
        seen.add(name)
        mine = sorted((c for c in cands if c.slot.pool.name == name and id(c.slot) not in excluded),
                      key=lambda c: self._score(c, cls, n))
        for c in mine:
            blocked = self.caps.availability(c.slot) or self.caps.limit(c.slot)
            if blocked is None:
                return c
            reasons.setdefault(name, blocked)
        nxt = self.by_pool.get(name)
        return self._fallback(cls, cands, nxt[0].pool, n, excluded, reasons, seen) if nxt else None

    def place_in_queue_order(self, classes: Sequence[PodClass]) -> dict[int, Placement]:
        """Existing and coming nodes, as the scheduler will fill them: pods in its queue order
        (priority, then creation time), each where the profile it names would bind it. Returns the
        placement per class (by id); each class's pods are put in queue order first."""
        runs: list[tuple[int, float, int]] = []
        for ci, c in enumerate(classes):
            c.pods.sort(key=lambda p: p.created_at)
            runs.extend((-c.priority, p.created_at, ci) for p in c.pods)
        runs.sort()
        out: dict[int, Placement] = {id(c): [] for c in classes}
        choosers: dict[int, _Chooser] = {}
        i = 0
        while i < len(runs):
            ci = runs[i][2]
            j = i + 1
            while j < len(runs) and runs[j][2] == ci:
                j += 1
            chooser = choosers.get(ci)
            if chooser is None:
                chooser = choosers[ci] = _Chooser(self.packer, classes[ci])
            if not chooser.dead:
                chooser.take(j - i, out[id(classes[ci])])
            i = j
        return out

    def place(self, cls: PodClass, cands: list[Candidate], reasons: dict[str, str],
              existing: Placement | None = None) -> Placement:
        """Existing and coming nodes (`existing` when already placed in queue order), then booting
        ones and nodes opened this pass, then new nodes."""
        n = len(cls.pods)
        out: Placement = []
        if existing is None:
            placed = _Chooser(self.packer, cls).take(n, out)
        else:
            out.extend(existing)
            placed = sum(k for _, k in existing)
        if placed < n:
            groups = [c.slot.group for c in cands] + [
                g for g in self.in_flight_groups if self.packer.static_reason(cls.static_id, g) is None]
            placed += self.packer.fill(cls, groups, n - placed, self.template_kinds, out)
        excluded: set[int] = set()
        while placed < n:
            c = self._pick(cls, cands, n - placed, excluded, reasons)
            if c is None:
                break
            while placed < n:
                why = self.caps.limit(c.slot)
                if why is not None:
                    reasons.setdefault(c.slot.pool.name, why)
                    excluded.add(id(c.slot))
                    break
                key = (c.slot.pool.name, c.slot.zone)
                i = self.opened.get(key, 0)
                self.opened[key] = i + 1
                b = self.packer.open_bin(c.slot, f"new-{c.slot.pool.name}-{c.slot.zone}-{i}")
                self.caps.take(c.slot)
                k = min(c.per_node, n - placed)
                for idx, a in cls.nz:
                    b.free[idx] -= a * k
                out.append((b, k))
                placed += k
        return out

    def sort_key(self, cls: PodClass) -> tuple[float, ...]:
        return (-cls.priority, -cls.gpus, -_dominant(cls.nz, self.scale))


def _gangs(snapshot: Snapshot, config: ScalerConfig) -> tuple[dict[str, str], dict[str, int], dict[str, int]]:
    """pod key -> gang id, gang -> minimum members, gang -> members already bound."""
    label = config.gang_label
    gang_of: dict[str, str] = {}
    minimum: dict[str, int] = {}
    for pod in snapshot.pending:
        g = pod.labels.get(label)
        if not g:
            continue
        gid = f"{pod.namespace}/{g}"
        gang_of[pod.key] = gid
        raw = pod.annotations.get(config.gang_min_annotation)
        if raw is not None:
            with contextlib.suppress(ValueError):
                minimum[gid] = max(minimum.get(gid, 0), int(raw))
    running: dict[str, int] = {}
    if gang_of:
        gangs = set(gang_of.values())
        for node in snapshot.nodes:
            for pod in node.pods:
                g = pod.labels.get(label)
                if g and pod.phase not in TERMINATED:
                    gid = f"{pod.namespace}/{g}"
                    if gid in gangs:
                        running[gid] = running.get(gid, 0) + 1
    return gang_of, minimum, running


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
                verdicts[pod.key] = PodVerdict(pod.key, "scale-up", pool, None, mine_reasons)
                mine.append(pod)
        elif kind == "in-flight":
            for _ in range(k):
                pod = next(pods)
                verdicts[pod.key] = PodVerdict(pod.key, "fits-in-flight", pool, None, mine_reasons)
        else:
            outcome: Outcome = "fits-existing" if kind == "existing" else "fits-in-flight"
            b.touched = True
            for _ in range(k):
                pod = next(pods)
                verdicts[pod.key] = PodVerdict(pod.key, outcome, pool, b.name, mine_reasons)
                placed_on[pod.key] = b.name
    why = {**reasons, "*": rest_reason} if rest_reason else reasons
    for pod in pods:
        verdicts[pod.key] = PodVerdict(pod.key, rest, None, None, why)


def plan_scale_up(snapshot: Snapshot, config: ScalerConfig, adv: Advanced) -> ScaleUpResult:
    planner = _Planner(snapshot, config, adv)
    packer = planner.packer
    verdicts: dict[str, PodVerdict] = {}
    placed_on: dict[str, str] = {}
    new_pods: dict[int, list[Pod]] = {}
    pending = []
    for pod in snapshot.pending:
        if pod.owner_kind == "DaemonSet":
            verdicts[pod.key] = PodVerdict(pod.key, "unschedulable", reasons={
                "*": "a DaemonSet pod is placed by its controller on its own node, not by a scale-up"})
        else:
            pending.append(pod)
    gang_of, minimum, running = _gangs(snapshot, config)
    classes = packer.classify(pending, gang_of)
    info = {id(c): planner.candidates(c) for c in classes}
    gangs: dict[str, list[PodClass]] = {}
    singles: list[PodClass] = []
    for c in classes:
        if c.gang is None:
            singles.append(c)
        else:
            gangs.setdefault(c.gang, []).append(c)

    def order(gang: list[PodClass]) -> tuple[float, ...]:
        return (-max(c.priority for c in gang), -sum(c.gpus * len(c.pods) for c in gang))

    for gid, members in sorted(gangs.items(), key=lambda kv: order(kv[1])):
        pending_n = sum(len(c.pods) for c in members)
        need = minimum.get(gid, pending_n + running.get(gid, 0))
        if pending_n + running.get(gid, 0) < need:
            msg = f"gang {gid}: {pending_n + running.get(gid, 0)} of {need} members exist"
            for c in members:
                _verdicts(c, [], info[id(c)][1], "waiting", msg, verdicts, new_pods, placed_on)
            continue
        saved = planner.caps.save()
        opened = dict(planner.opened)
        packer.begin()
        planner.caps.gang = True
        placements = [planner.place(c, *info[id(c)]) for c in members]
        planner.caps.gang = False
        got = sum(k for p in placements for _, k in p)
        if got == pending_n:
            packer.commit()
            for c, p in zip(members, placements, strict=True):
                _verdicts(c, p, info[id(c)][1], "waiting", None, verdicts, new_pods, placed_on)
            continue
        packer.rollback()
        planner.caps.restore(saved)
        planner.opened = opened
        for c in members:
            no_home = not info[id(c)][0] and not packer.eligible_real(c.static_id)
            outcome: Outcome = "unschedulable" if no_home else "waiting"
            msg = f"gang {gid}: room for {got} of {pending_n} pending members; all or none"
            _verdicts(c, [], info[id(c)][1], outcome, msg, verdicts, new_pods, placed_on)
    on_existing = planner.place_in_queue_order(singles)
    singles.sort(key=planner.sort_key)
    for c in singles:
        cands, reasons = info[id(c)]
        placement = planner.place(c, cands, reasons, on_existing[id(c)])
        rest: Outcome = "waiting" if cands else "unschedulable"
        rest_reason = None if cands else "fits no pool's template"
        _verdicts(c, placement, reasons, rest, rest_reason, verdicts, new_pods, placed_on)
    # The nodes asked for, per (pool, zone), with the pods packed on each.
    new_nodes: list[NewNode] = []
    counts: dict[tuple[str, str], list[str]] = {}
    for b in packer.bins:
        if b.kind != "new":
            continue
        pods = new_pods.get(id(b), [])
        if not pods:
            continue
        assert b.pool is not None and b.zone is not None
        new_nodes.append(NewNode(b.pool, b.zone, b.node, pods))
        counts.setdefault((b.pool, b.zone), []).extend(p.key for p in pods)
    n_nodes: dict[tuple[str, str], int] = {}
    for nn in new_nodes:
        n_nodes[(nn.pool, nn.zone)] = n_nodes.get((nn.pool, nn.zone), 0) + 1
    scale_ups: list[ScaleUp] = []
    running_desired = dict(adv.desired)
    for (pool, zone), pod_keys in counts.items():
        n = n_nodes[(pool, zone)]
        running_desired[pool] = running_desired.get(pool, 0) + n
        scale_ups.append(ScaleUp(pool, zone, n, running_desired[pool], tuple(pod_keys)))
    return ScaleUpResult(scale_ups, verdicts, new_nodes, placed_on, packer)
