"""Bin packing for the planners: bins (nodes' free resources), node groups, pod classes, the Packer.

Pure. The hot path works on equivalence classes, never on pods x nodes:

- a *pod class* is the pods with the same requests, selector / affinity, tolerations, priority,
  scheduler and gang: they are interchangeable, so the planner places counts, not pods;
- a *group* is the nodes whose labels (restricted to the keys any pod looks at), taints and
  unschedulable flag are equal: the static predicates are evaluated once per (pod statics, group)
  and cached;
- a group keeps an upper bound of the free resources of its nodes, so a class that cannot fit skips
  the whole group without looking at its nodes.

The scale-up planner fills existing, coming, in-flight and new nodes with it; the scale-down planner
re-places evicted pods with the same Packer, so nothing is double-booked. First what it works on: bins
(nodes' free resources as vectors), node groups, pod classes, the slots new nodes open in, and the vector
helpers the planners share; then the Packer.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from scaler.core.config.pool import Pool
from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod, Taint, Toleration
from scaler.core.model.selectors import ANY_NODE_NAME
from scaler.core.planning.memo import Memo
from scaler.core.scheduling import predicates

BinKind = Literal["existing", "coming", "in-flight", "new"]
FRESH = "fresh"  # in the kinds a placement may use: the fresh bins too, whatever their kind (Bin.fresh)
_UNSCHED_TAINT = Taint(keys.TAINT_UNSCHEDULABLE, "", "NoSchedule")


@dataclass(slots=True, eq=False)
class Bin:
    """A node's free capacity as a resource vector: a real node, a booting one, or a template."""

    free: list[int]
    kind: BinKind
    name: str
    pool: str | None
    zone: str | None
    group: Group
    node: Node
    alloc: list[int] | None = None  # allocatable of an existing / coming node (what the scheduler scores)
    version: int = 0  # bumped whenever `free` changes: a score computed earlier is stale
    removed: bool = False  # chosen for removal by the scale-down planner
    touched: bool = False  # received pods in this pass
    # a node that came up and is still empty: matched against with the nodes still coming, not bet on in the
    # scheduler's queue order (`capacity.is_fresh`)
    fresh: bool = False


class Group:
    """Nodes the static predicates cannot tell apart."""

    __slots__ = ("bins", "bound", "epoch", "label_id", "node", "real", "sky", "start", "taint_id", "unsched")

    def __init__(self, label_id: int, taint_id: int, unsched: bool, node: Node) -> None:
        self.label_id = label_id
        self.taint_id = taint_id
        self.unsched = unsched
        self.node = node  # a representative: its labels and taints are the group's
        self.bins: list[Bin] = []
        self.bound: list[int] | None = None  # elementwise max of free over bins, None = unknown
        self.start = 0  # bins before this one are too full for any pod of the pass
        self.real = False  # existing and coming nodes only
        self.epoch = 0  # bumped when a bin is added or gets room back (a rollback)
        # A real group's skyline (`skyline`) when last computed (a cover of its bins' free), None = unknown
        self.sky: list[tuple[int, ...]] | None = None


class PodClass:
    """Interchangeable pods."""

    __slots__ = ("gang", "gpus", "nz", "origin", "pods", "priority", "rep", "sort_key", "static_id")

    def __init__(self, rep: Pod, nz: tuple[tuple[int, int], ...], static_id: int, gang: str | None) -> None:
        self.rep = rep
        self.nz = nz  # (resource index, amount) of the non-zero requests
        self.static_id = static_id
        self.gang = gang
        self.pods: list[Pod] = []
        self.gpus = 0
        self.priority = rep.priority
        self.sort_key: tuple[float, ...] = ()
        self.origin: PodClass | None = None  # the class this one is a part of (split by queue position)


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
    devices: int = 0  # DRA devices a new node publishes (its keys.RES_DRA_DEVICES once opened; `empty` has none)




Placement = list[tuple[Bin, int]]
Scores = dict[Sequence[int], int]  # allocatable then free of the resources a profile scores -> the score


def dominant(nz: Iterable[tuple[int, int]], scale: Sequence[int]) -> float:
    return max((a / scale[i] for i, a in nz if scale[i] > 0), default=0.0)


def skyline(vectors: Iterable[Sequence[int]]) -> list[tuple[int, ...]]:
    """The vectors no other one covers (>= in every resource): some vector has room for a request iff one
    of these has. A group of similar nodes has a few dozen, against hundreds of nodes."""
    out: list[tuple[int, ...]] = []
    last: tuple[int, ...] = ()  # the one that covered (or was) the vector before: likely to cover this one
    for v in sorted(map(tuple, vectors), reverse=True):  # one that covers v sorts before it
        if last and all(map(operator.ge, last, v)):
            continue
        for o in out:
            if all(map(operator.ge, o, v)):
                last = o
                break  # covered
        else:
            out.append(v)
            last = v
    return out


def with_room(bins: Iterable[Bin], nz: tuple[tuple[int, int], ...]) -> list[Bin]:
    """The bins with room for one pod of the request, in order (unrolled for up to 5 resources, a class of
    DRA claims counting its devices and untainted ones beside cpu, memory and pods: a pass asks this of
    ~100k bins)."""
    if len(nz) == 5:
        (i, a), (j, b), (k, c), (m, d), (n, e) = nz
        return [x for x in bins if (f := x.free)[i] >= a and f[j] >= b and f[k] >= c and f[m] >= d and f[n] >= e]
    if len(nz) == 4:
        (i, a), (j, b), (k, c), (m, d) = nz
        return [x for x in bins if (f := x.free)[i] >= a and f[j] >= b and f[k] >= c and f[m] >= d]
    if len(nz) == 3:
        (i, a), (j, b), (k, c) = nz
        return [x for x in bins if (f := x.free)[i] >= a and f[j] >= b and f[k] >= c]
    if len(nz) == 2:
        (i, a), (j, b) = nz
        return [x for x in bins if (f := x.free)[i] >= a and f[j] >= b]
    if len(nz) == 1:
        ((i, a),) = nz
        return [x for x in bins if x.free[i] >= a]
    return [x for x in bins if all(x.free[i] >= a for i, a in nz)]


def fit_count(free: list[int], nz: tuple[tuple[int, int], ...], limit: int) -> int:
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
        self._by_sig: dict[tuple[object, ...], Group] = {}  # group_sig -> the group (real_group)
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
        self._journal: list[tuple[Bin, list[int] | None]] | None = None
        self._hints: dict[tuple[int, tuple[tuple[int, int], ...]], int] = {}  # (group, request) -> first bin
        # (group, request) -> (the group's epoch, its bins that had room for one pod then, in order)
        self._roomy: dict[tuple[int, tuple[tuple[int, int], ...]], tuple[int, list[Bin]]] = {}
        self.changed: list[Bin] = []  # existing / coming bins whose free changed, in order (for the Chooser)
        # (profile, request) -> bin -> (version, resource score): classes that differ only in their
        # statics share the per-node part of their scores.
        self.scores: dict[tuple[str, tuple[tuple[int, int], ...]], dict[int, tuple[int, int]]] = {}
        # Chooser.memo_key -> (allocatable, free) of the resources scored -> the resource score: this pass's,
        # the last pass's
        self.parts: dict[tuple[object, ...], tuple[Scores, Scores]] = {}
        self.in_flight_groups: list[Group] = []  # booting nodes of multi-zone pools (zone unknown)
        # (resource, amount) every pod of the pass requests at least: a bin with less is dead.
        self.dead: tuple[tuple[int, int], ...] = ()
        self.memo: Memo | None = None  # the last passes' results (the Snapshot's)
        # pod -> the DRA devices it takes at least (keys.RES_DRA_DEVICES, when the pass counts them)
        # and of those, the untainted ones (keys.RES_DRA_UNTAINTED)
        self.claim_counts: Callable[[Pod], tuple[int, int]] | None = None

    def set_min_request(self, requests: Iterable[Mapping[str, int]]) -> None:
        """Declare the requests of every pod this pass will place (pending and evictable): bins that cannot
        take the smallest of them on some resource they all request are skipped from then on."""
        low: dict[str, int] | None = None
        for req in requests:
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
        sig = tuple(map(node.labels.get, self.ref_keys))
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
                group.real = True
                self.real_groups.append(group)
        return group

    def group_sig(self, node: Node) -> tuple[object, ...]:
        """What `group_for(node, node.taints)` tells groups by, as values (`real_group`'s key)."""
        return (tuple(map(node.labels.get, self.ref_keys)), tuple((t.key, t.value, t.effect) for t in node.taints),
                node.unschedulable)

    def real_group(self, sig: tuple[object, ...], node: Node) -> Group:
        """`group_for(node, node.taints)`, by the node's `group_sig`."""
        group = self._by_sig.get(sig)
        if group is None:
            group = self._by_sig[sig] = self.group_for(node, node.taints)
        return group

    def add_bin(self, node: Node, free: list[int], kind: BinKind, group: Group, pool: str | None,
                zone: str | None, alloc: list[int] | None = None) -> Bin:
        b = Bin(free, kind, node.name, pool, zone, group, node, alloc)
        group.bins.append(b)
        group.sky = None
        group.epoch += 1
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

    def classify(self, pods: Iterable[Pod], gang_of: Mapping[str, str] | None = None,
                 extra: Callable[[Pod], object] | None = None) -> list[PodClass]:
        """Pods into classes (a class never mixes gangs); classes in first-seen order. `extra`: more of
        a pod that must be equal within a class (what kube-scheduler's other filters read)."""
        out: list[PodClass] = []
        seen: dict[tuple[object, ...], PodClass] = {}
        claim_counts, static_id, index = self.claim_counts, self.static_id, self.index
        for pod in pods:
            gang = gang_of.get(pod.key) if gang_of else None
            req_key = tuple(sorted(pod.requests.items()))
            devices, untainted = claim_counts(pod) if claim_counts is not None and pod.resource_claims else (0, 0)
            sid = static_id(pod)
            key = (req_key, devices, untainted, sid, pod.priority, pod.scheduler_name, gang,
                   extra(pod) if extra else None)
            cls = seen.get(key)
            if cls is None:
                req = ({**pod.requests, keys.RES_DRA_DEVICES: devices, keys.RES_DRA_UNTAINTED: untainted}
                       if devices else pod.requests)
                nz = tuple(sorted((index[n], v) for n, v in req.items() if v > 0))
                cls = seen[key] = PodClass(pod, nz, sid, gang)
                cls.gpus = pod.requests.get(keys.RES_GPU, 0) if keys.RES_GPU in index else 0
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
            rep = self._sel_reps[sel_id]  # matchFields (node names) are checked per node, by the filters
            name = ANY_NODE_NAME if predicates.has_field_affinity(rep) else None
            match = self._sel_cache[sk] = predicates.matches_node_affinity(rep, group.node.labels, name)
        if not match:
            return predicates.REASON_SELECTOR
        return self.taint_reason(static_id, group)

    def taint_reason(self, static_id: int, group: Group) -> str | None:
        """The TaintToleration part of static_reason, cached."""
        tol_id = self._statics[static_id][1]
        tk = (tol_id, group.taint_id)
        if tk in self._taint_cache:
            return self._taint_cache[tk]
        taint = predicates.untolerated_taint(self._tols[tol_id], group.node.taints)
        reason = None if taint is None else predicates.taint_reason(taint)
        self._taint_cache[tk] = reason
        return reason

    def matches_labels(self, static_id: int, labels: Mapping[str, str]) -> bool:
        """Whether the statics' node selector and required node affinity accept these labels."""
        return predicates.matches_node_affinity(self._sel_reps[self._statics[static_id][0]], labels)

    def eligible_real(self, static_id: int) -> list[Group]:
        groups = self._eligible.get(static_id)
        if groups is None:
            groups = [g for g in self.real_groups if self.static_reason(static_id, g) is None]
            self._eligible[static_id] = groups
        return groups

    # --- placement ---------------------------------------------------------------------------
    def roomy(self, group: Group, nz: tuple[tuple[int, int], ...]) -> list[Bin]:
        """The group's bins (removed ones too) with room for one pod of the request, in order. Bins only
        lose room while a pass places pods: those of the last answer for the request are the ones to
        look at again, until the group's epoch changes."""
        key = (id(group), nz)
        hit = self._roomy.get(key)
        out = with_room(group.bins[group.start:] if hit is None or hit[0] != group.epoch else hit[1], nz)
        self._roomy[key] = (group.epoch, out)
        return out

    def any_room(self, group: Group, nz: tuple[tuple[int, int], ...]) -> bool:
        """False when no bin of a real group (removed ones too) has room for one pod of the request. From
        the group's skyline: bins only lose room while a pass places pods, so it stays a cover of their
        free (it may say yes for a full group: the caller's scan then finds none and clears it)."""
        sky = group.sky
        if sky is None:
            sky = group.sky = skyline(b.free for b in group.bins)
        for free in sky:
            for i, a in nz:
                if free[i] < a:
                    break
            else:
                return True
        return False

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
            if group.real and not self.any_room(group, nz):
                continue  # as a scan of every bin would find (the bound stays as loose as it was)
            start = group.start
            if dead:  # skip the leading bins too full for any pod of this pass (FFD fills them first)
                while start < len(bins) and any(bins[start].free[i] < m for i, m in dead):
                    start += 1
                group.start = start
            # Bins only lose room while a pass places pods (a rollback forgets the hints): the bins
            # before the first that had room for this request still have none.
            hint_key = (id(group), nz)
            start = max(start, self._hints.get(hint_key, 0))
            first = len(bins)
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
                if k <= 0:
                    continue
                if j < first:
                    first = j
                    self._hints[hint_key] = j
                if b.removed or (b.kind not in kinds and not (b.fresh and FRESH in kinds)):
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
            if first == len(bins):
                self._hints[hint_key] = first
                group.sky = None  # it said there might be room: a fresh one will not
            if start == group.start:  # (with a hint, the scan was short and the bound can stay loose)
                self.tighten(group)  # the whole group was looked at and could not take the rest
        return placed

    def tighten(self, group: Group) -> None:
        """Recompute the group's bound from its live bins (after finding it cannot take a class)."""
        live = [b.free for b in group.bins[group.start:] if not b.removed]
        group.bound = [max(col) for col in zip(*live, strict=True)] if live else [0] * len(self.resources)

    def release(self) -> None:
        """The pass is done with the packer: its groups let go of their bins, so bins and groups (each
        naming the other) die by their reference counts, not in the cyclic collector's next sweep."""
        for group in self.groups.values():
            group.bins = []

    def begin(self) -> None:
        self._journal = []

    def commit(self) -> None:
        self._journal = None

    def rollback(self) -> None:
        """Undo every placement and opened bin since begin()."""
        journal = self._journal or []
        self._journal = None
        self._hints.clear()  # bins get their room back, opened ones go
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
            b.group.sky = None
            b.group.epoch += 1

    def open_bin(self, slot: Slot, name: str) -> Bin:
        node = slot.group.node
        free = list(slot.empty)
        dev = self.index.get(keys.RES_DRA_DEVICES)
        if dev is not None:
            free[dev] = free[self.index[keys.RES_DRA_UNTAINTED]] = slot.devices  # (a template's are untainted)
        b = self.add_bin(node, free, "new", slot.group, slot.pool.name, slot.zone)
        b.name = name
        if self._journal is not None:
            self._journal.append((b, None))
        return b
