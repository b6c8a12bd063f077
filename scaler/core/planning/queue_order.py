"""Existing and coming nodes as kube-scheduler will fill them: pods in its queue order (priority, then
creation time), each where the scoring profile its `schedulerName` names would bind it. Pure."""

from __future__ import annotations

import heapq
import operator
from collections.abc import Callable, Sequence

from scaler.core.model.objects import Pod
from scaler.core.planning.constrained import Filtered, append_one
from scaler.core.planning.packing import Bin, Group, Packer, Placement, PodClass, Scores
from scaler.core.scheduling import scoring
from scaler.core.scheduling.filters import PodCheck


class Chooser:
    """Where the scheduler profile a class's pods name (`schedulerName`, see `scaler.core.scheduling.scoring`)
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
        # the memo's key for the nodes' resource scores (see _parts)
        self.memo_key = ("resource-score", self.profile.name, tuple(sorted(self.request.items())),
                         tuple(r for r, _ in self.score_idx))
        self.names = tuple(r for r, _ in self.score_idx)
        # a node's (allocatable, free) of the resources scored as one flat tuple (picked from alloc + free): one
        # object a node a pass instead of three, each young until the collector's next sweep after the pass
        n = len(packer.resources)
        idx = [i for _, i in self.score_idx]
        both = [*idx, *(n + i for i in idx)]
        self.pick: Callable[[list[int]], Sequence[int]] = lambda v: tuple(v[i] for i in both)
        if len(both) > 1:
            self.pick = operator.itemgetter(*both)
        eligible = packer.eligible_real(cls.static_id)
        self.groups = {id(g) for g in eligible}
        self.heap: list[tuple[int, str, int, int, Bin]] = []
        self.cache = packer.scores.setdefault((self.profile.name, cls.nz), {})
        self.seq = 0
        self.dead = False
        roomy: list[tuple[Group, list[Bin]]] = []  # the groups with a node that takes the class, its nodes
        nz = cls.nz
        for g in eligible:
            bound = g.bound
            if (bound is not None and any(bound[i] < a for i, a in nz)) or not packer.any_room(g, nz):
                continue  # no node of the group takes the class
            bins = [b for b in packer.roomy(g, nz) if not b.removed]  # (a real group's bins have alloc)
            if bins:
                bins = [b for b in bins if not b.fresh]  # matched with the nodes coming (`capacity.is_fresh`)
                if bins:
                    roomy.append((g, bins))
            else:  # no node of the group takes the class
                packer.tighten(g)
                g.sky = None
        self.norm_nodes = [g.node for g, _ in roomy]
        values = scoring.static_scores(cls.rep, self.norm_nodes, self.profile)
        self.static = {id(g): v for (g, _), v in zip(roomy, values, strict=True)}
        self.heap = self._entries(roomy)
        heapq.heapify(self.heap)  # one O(n) build: every entry's key is unique (the sequence number)
        self.synced = len(packer.changed)

    def _entries(self, roomy: list[tuple[Group, list[Bin]]]) -> list[tuple[int, str, int, int, Bin]]:
        """`_entry` of every node found, group by group (inlined: up to 100,000 nodes a pass)."""
        out = []
        cache, pick, seq = self.cache, self.pick, self.seq
        parts, before = self._parts()
        names = self.names
        k = len(names)
        for g, bins in roomy:
            static = self.static[id(g)]
            for b in bins:
                cached = cache.get(id(b))
                if cached is not None and cached[0] == b.version:
                    part = cached[1]
                else:
                    assert b.alloc is not None
                    key = pick(b.alloc + b.free)
                    known = parts.get(key)
                    if known is None:
                        known = before.get(key)
                        if known is None:  # (the key: allocatable then free of the names; zip stops at names)
                            known = scoring.resource_score(self.request, dict(zip(names, key, strict=False)),
                                                           dict(zip(names, key[k:], strict=True)), self.profile)
                        parts[key] = known
                    part = known
                    cache[id(b)] = (b.version, part)
                seq += 1
                out.append((-(static + part), b.name, seq, b.version, b))
        self.seq = seq
        return out

    def _parts(self) -> tuple[Scores, Scores]:
        """The nodes' resource scores for the class's request and profile (scoring.resource_score) by the
        node's (allocatable, free) of the resources scored: this pass's, and the last pass's (the memo's)."""
        packer = self.packer
        found = packer.parts.get(self.memo_key)
        if found is None:
            memo = packer.memo
            before = {} if memo is None else memo.find(self.memo_key) or {}
            found = packer.parts[self.memo_key] = ({}, before)
            if memo is not None:
                memo.put(self.memo_key, found[0])
        return found

    def _open(self, b: Bin) -> bool:
        """A real (existing or coming) node, not being removed nor fresh, with room for one more pod."""
        if b.removed or b.alloc is None or b.fresh:
            return False
        free = b.free
        return all(free[i] >= a for i, a in self.cls.nz)

    def _push(self, b: Bin) -> None:
        heapq.heappush(self.heap, self._entry(b))

    def _entry(self, b: Bin) -> tuple[int, str, int, int, Bin]:
        gid = id(b.group)
        if gid not in self.static:  # a group that had no room when the class was first placed
            self.static[gid] = scoring.static_scores(self.cls.rep, [*self.norm_nodes, b.group.node], self.profile)[-1]
        return self._entries([(b.group, [b])])[0]

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

    def take_checked(self, pods: Sequence[Pod], filtered: Filtered, out: Placement) -> list[Pod]:
        """Place the pods one by one, each on the best-scoring node with room that kube-scheduler's
        other filters admit for it (`scaler.core.planning.constrained`); returns the pods left, in order."""
        packer = self.packer
        changed = packer.changed
        for b in changed[self.synced:]:
            if id(b.group) in self.groups and self._open(b):
                self._push(b)
        self.synced = len(changed)
        heap = self.heap
        left: list[Pod] = []
        # Bins refused for pods of `settled` (PodCheck.settled_key): set aside, not asked again for the
        # next pods of the same key; back in the heap when the key changes and at the end.
        settled: tuple[int, ...] | None = None
        aside: list[tuple[int, str, int, int, Bin]] = []
        for pod in pods:
            refused: list[tuple[int, str, int, int, Bin]] = []
            target: Bin | None = None
            check = None  # computed when a node with room turns up: most pods of a full cluster have none
            first = None  # (a pod with claims has one already: still valid, nothing was placed since)
            if pod.resource_claims:
                first = filtered.check(pod)
                if first.pod_reason is None and first.dra is not None and first.dra.prioritized:
                    target = self._prioritized(first)
                    if target is None:
                        left.append(pod)
                    else:
                        self._commit(pod, target, filtered, out)
                    continue
            while heap:
                entry = heap[0]
                b = entry[4]
                if entry[3] != b.version or not self._open(b):
                    heapq.heappop(heap)
                    continue
                if check is None:
                    check = first if first is not None else filtered.check(pod)
                    if check.pod_reason is not None:
                        break
                    key = check.settled_key()
                    if key != settled:
                        settled = key
                        for e in aside:
                            heapq.heappush(heap, e)
                        aside = []
                        continue
                heapq.heappop(heap)
                if check.reason(b.node) is None:
                    target = b
                    break
                refused.append(entry)
            if settled is not None and check is not None and check.pod_reason is None:
                aside.extend(refused)
            else:
                for entry in refused:
                    heapq.heappush(heap, entry)
            if target is None:
                left.append(pod)
                continue
            self._commit(pod, target, filtered, out)
        for entry in aside:
            heapq.heappush(heap, entry)
        self.synced = len(changed)
        return left

    def _commit(self, pod: Pod, target: Bin, filtered: Filtered, out: Placement) -> None:
        filtered.take(target, self.cls.nz)
        append_one(out, target)
        filtered.record(pod, target)
        if self._open(target):
            self._push(target)

    def _prioritized(self, check: PodCheck) -> Bin | None:
        """The node for a pod whose claims have firstAvailable requests: kube-scheduler adds DynamicResources'
        score (which subrequest each node allocates, normalised over the nodes that pass the filters), so every
        node with room is asked, not only the best by the other scores. The chosen node leaves the heap."""
        assert check.dra is not None
        heap = self.heap
        entries: list[tuple[int, str, int, int, Bin]] = []
        while heap:
            entry = heapq.heappop(heap)
            b = entry[4]
            if entry[3] == b.version and self._open(b):
                entries.append(entry)
        fits = [e for e in entries if check.reason(e[4].node) is None]
        dra = scoring.priority_scores([check.dra.priority_score(e[4].node) for e in fits], self.profile)
        best = min(zip(fits, dra, strict=True), key=lambda ed: (ed[0][0] - ed[1], ed[0][1]), default=None)
        for e in entries:
            if best is None or e is not best[0]:
                heapq.heappush(heap, e)
        return best[0][4] if best is not None else None



def place_in_queue_order(packer: Packer, classes: Sequence[PodClass],
                         choosers: dict[int, Chooser] | None = None,
                         filtered: Filtered | None = None) -> dict[int, Placement]:
    """Existing and coming nodes, as the scheduler will fill them: pods in its queue order (priority,
    then creation time), each where the profile it names would bind it. Returns the placement per
    class (by id); each class's pods are put in queue order first, and a constrained class's pods
    that found a node before those that did not (`scaler.core.planning.constrained`). `choosers` (by
    `PodClass.origin`) carries the choosers of classes split into runs over from one run to the next."""
    runs: list[tuple[int, float, int, int]] = []
    for ci, c in enumerate(classes):
        c.pods.sort(key=lambda p: p.created_at)
        runs.extend((-c.priority, p.created_at, tie_break(c), ci) for p in c.pods)
    runs.sort()
    out: dict[int, Placement] = {id(c): [] for c in classes}
    choosers = {} if choosers is None else choosers
    active = filtered is not None and filtered.active
    cursor = [0] * len(classes)  # pods of each class handed out so far
    left: dict[int, list[Pod]] = {}  # constrained classes: pods that found no node
    i = 0
    while i < len(runs):
        ci = runs[i][3]
        j = i + 1
        while j < len(runs) and runs[j][3] == ci:
            j += 1
        cls = classes[ci]
        chooser = choosers.get(id(cls.origin or cls))
        if chooser is None:
            chooser = choosers[id(cls.origin or cls)] = Chooser(packer, cls.origin or cls)
        start, cursor[ci] = cursor[ci], cursor[ci] + j - i
        if active and filtered is not None and filtered.is_constrained(cls):
            left.setdefault(ci, []).extend(chooser.take_checked(cls.pods[start:cursor[ci]], filtered, out[id(cls)]))
        elif not chooser.dead:
            placement = out[id(cls)]
            before = len(placement), placement[-1][1] if placement else 0
            placed = chooser.take(j - i, placement)
            if active and filtered is not None and placed:
                filtered.record_placement(cls.pods[start:start + placed], _since(placement, before))
        i = j
    for ci, rest in left.items():  # placed pods first: the placement hands pods out in class order
        cls = classes[ci]
        keep = {id(p) for p in rest}
        cls.pods[:] = [p for p in cls.pods if id(p) not in keep] + rest
    return out


def tie_break(cls: PodClass) -> int:
    """Pods of one priority created in the same second: kube-scheduler orders them by the time each entered
    its queue, finer than the API's second-precision creationTimestamp, so their real order is unknown.
    The larger pods (GPUs) go first: first-fit decreasing, the order that needs the fewest nodes, so a
    scale-up never buys a node for a big pod on the bet that a small one took the room it will get. The
    race that remains (the scheduler binds a small pod first and it takes room planned for a big one) costs
    a pass: the pod left pending is planned again."""
    return -cls.gpus


def _since(placement: Placement, before: tuple[int, int]) -> Placement:
    """The entries a take() added to a placement (it may have grown the last entry's count)."""
    n, last_k = before
    if n and placement[n - 1][1] > last_k:
        b, k = placement[n - 1]
        return [(b, k - last_k), *placement[n:]]
    return placement[n:]
