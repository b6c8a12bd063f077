"""The expander: which pool and zone new nodes come from, within the caps, with backoff, unavailable
offerings and the fallback chain. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.objects import Pod
from scaler.core.model.workload import is_daemonset
from scaler.core.planning.advance import Advanced
from scaler.core.planning.capacity import build_packer, dra_state
from scaler.core.planning.caps import Caps
from scaler.core.planning.constrained import Filtered, append_one
from scaler.core.planning.packing import Bin, Placement, PodClass, Slot, dominant, fit_count
from scaler.core.planning.queue_order import Chooser
from scaler.core.planning.snapshot import Snapshot
from scaler.core.scheduling import predicates
from scaler.core.scheduling.filters import PodCheck


@dataclass(slots=True)
class Candidate:
    slot: Slot
    per_node: int  # pods of the class an empty template takes
    waste_terms: tuple[tuple[int, int], ...] = ()  # (free on an empty node, request) of gpu, cpu, memory


class Expander:
    """One pass's capacity (the Packer), caps and template slots, and where each pod class goes."""

    def __init__(self, snapshot: Snapshot, config: ScalerConfig, adv: Advanced) -> None:
        self.snapshot = snapshot
        self.config = config
        self.adv = adv
        self.packer, self.slots = build_packer(snapshot, config, adv)
        pending = [p for p in snapshot.pending if not is_daemonset(p)]
        self.filtered = Filtered(self.packer, snapshot.nodes, pending, snapshot.storage, snapshot.namespaces,
                                 dra_state(snapshot, self.packer))
        self.refused_everywhere: set[str] = set()  # pods kube-scheduler's filters keep off every pool
        self.pod_reasons: dict[str, dict[str, str]] = {}  # pod -> pool -> the filters' refusal
        self.caps = Caps(snapshot, config, adv)
        self.by_pool: dict[str, list[Slot]] = {}
        for s in self.slots:
            self.by_pool.setdefault(s.pool.name, []).append(s)
        self.in_flight_groups = self.packer.in_flight_groups
        self.opened: dict[tuple[str, str], int] = {}
        self._opened_saved: dict[tuple[str, str], int] = {}
        self.scale = [max((s.empty[i] for s in self.slots), default=0) for i in range(len(self.packer.resources))]
        self.template_kinds = frozenset({"in-flight", "new"})
        self._static_cache: dict[int, tuple[dict[str, str], list[tuple[str, list[Slot]]]]] = {}
        self._cand_cache: dict[tuple[int, tuple[tuple[int, int], ...]], tuple[list[Candidate], dict[str, str]]] = {}
        gpu_cpu_mem = [self.packer.index.get(r) for r in (keys.RES_GPU, keys.RES_CPU, keys.RES_MEMORY)]
        self._waste_idx = [i for i in gpu_cpu_mem if i is not None]

    # --- Tentative (scaler.core.planning.trial): the packer, the filters, the caps, the opened nodes -----
    def begin(self) -> None:
        self._opened_saved = dict(self.opened)
        for part in (self.packer, self.filtered, self.caps):
            part.begin()

    def commit(self) -> None:
        for part in (self.packer, self.filtered, self.caps):
            part.commit()

    def rollback(self) -> None:
        for part in (self.packer, self.filtered, self.caps):
            part.rollback()
        self.opened = self._opened_saved

    # --- per class: which pools could ever take it, and why the others cannot ----------------
    def _static_pools(self, static_id: int) -> tuple[dict[str, str], list[tuple[str, list[Slot]]]]:
        """Why the statics rule out whole pools, and the slots of the other pools they allow."""
        cached = self._static_cache.get(static_id)
        if cached is None:
            reasons: dict[str, str] = {}
            allowed: list[tuple[str, list[Slot]]] = []
            for name, slots in self.by_pool.items():
                ok = [s for s in slots if self.packer.static_reason(static_id, s.group) is None]
                if ok:
                    allowed.append((name, ok))
                    continue
                slot = slots[0]
                why = self.packer.static_reason(static_id, slot.group) or ""
                if why == predicates.REASON_SELECTOR and not slot.zone and any(
                        self.packer.matches_labels(static_id, {**slot.group.node.labels, keys.LABEL_ZONE: z})
                        for z in slot.pool.zones):
                    why = self.packer.taint_reason(static_id, slot.group) or (
                        f"the pod needs a zone and the pool spans {', '.join(slot.pool.zones)}: the cloud picks the "
                        "zone of a new node, so it cannot promise one")
                reasons[name] = why
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
                        k = fit_count(slot.empty, cls.nz, 1 << 30)
                        terms = tuple((slot.empty[i], used.get(i, 0)) for i in self._waste_idx if slot.empty[i] > 0)
                        shape = shapes[slot.shape] = (k, terms)
                    if shape[0] > 0:
                        cands.append(Candidate(slot, shape[0], shape[1]))
                if len(cands) == before:
                    empty = dict(zip(self.packer.resources, ok[0].empty, strict=True))
                    reasons[name] = predicates.resource_reason(cls.rep.requests, empty) or "Insufficient resources"
            cached = self._cand_cache[key] = (cands, reasons)
        return cached[0], dict(cached[1])

    def _score(self, c: Candidate, cls: PodClass, n: int) -> tuple[float, int, float, str, str]:
        m = max(1, min(c.per_node, n))
        terms = c.waste_terms
        waste = sum((e - m * u) / e for e, u in terms) / len(terms) if terms else 0.0
        return c.slot.price / m, 0 if c.slot.spot else 1, waste, c.slot.pool.name, c.slot.zone

    def _pick(self, cls: PodClass, cands: list[Candidate], n: int, excluded: set[int], reasons: dict[str, str],
              only: str | None = None, seen: set[str] | None = None,
              admits: Callable[[Candidate], bool] | None = None, presorted: bool = False) -> Candidate | None:
        """The best-ranked slot that may open a node now: the one fallback-and-limits rule.

        A slot at a cap (pool max, cluster limits, per-pass rate) is skipped for the next in rank. A slot
        that cannot launch now (backoff, offering unavailable) hands over to its pool's declared
        fallback first, along the chain, before the other pools. `admits`: the pod's other filters on
        the slot's template, asked lazily in rank order (`cands` already ranked when `presorted`)."""
        seen = set() if seen is None else seen
        mine = (c for c in cands if id(c.slot) not in excluded and only in (None, c.slot.pool.name))
        ranked = list(mine) if presorted else sorted(mine, key=lambda c: self._score(c, cls, n))
        for c in ranked:
            if admits is not None and not admits(c):
                continue
            name = c.slot.pool.name
            unavailable = self.caps.availability(c.slot)
            why = unavailable or self.caps.limit(c.slot)
            if why is None:
                return c
            reasons.setdefault(name, why)
            excluded.add(id(c.slot))
            fallback = c.slot.pool.fallback
            if unavailable and fallback is not None and fallback not in seen:
                seen.update((name, fallback))
                found = self._pick(cls, cands, n, excluded, reasons, fallback, seen, admits, presorted)
                if found is not None:
                    return found
        return None

    def place(self, cls: PodClass, cands: list[Candidate], reasons: dict[str, str],
              existing: Placement | None = None) -> Placement:
        """Existing and coming nodes (`existing` when already placed in queue order), then booting
        ones and nodes opened this pass, then new nodes."""
        filtered = self.filtered
        if filtered.active and filtered.is_constrained(cls):
            return self._place_checked(cls, cands, reasons, existing)
        out = self._place(cls, cands, reasons, existing)
        if filtered.active:
            done = sum(k for _, k in existing) if existing else 0
            filtered.record_placement(cls.pods[done:], out[len(existing) if existing else 0:])
        return out

    def _place_checked(self, cls: PodClass, cands: list[Candidate], reasons: dict[str, str],
                       existing: Placement | None) -> Placement:
        """A constrained class (`scaler.core.planning.constrained`), one pod at a time: existing and coming
        nodes (in queue order, already done when `existing` is given), booting nodes and those opened
        this pass, then a new node of the best slot whose template the pod's filters admit. The pods
        placed come first in `cls.pods` afterwards."""
        filtered = self.filtered
        out: Placement = []
        if existing is None:
            left = Chooser(self.packer, cls).take_checked(cls.pods, filtered, out)
        else:
            out.extend(existing)
            left = cls.pods[sum(k for _, k in existing):]
        groups = [c.slot.group for c in cands] + [
            g for g in self.in_flight_groups if self.packer.static_reason(cls.static_id, g) is None]
        excluded: set[int] = set()
        unplaced: list[Pod] = []
        ranked = sorted(cands, key=lambda c: self._score(c, cls, 1))  # one pod a node at a time
        for pod in left:
            check = filtered.check(pod)
            if check.pod_reason is not None:
                self.pod_reasons[pod.key] = {"*": check.pod_reason}
                self.refused_everywhere.add(pod.key)
                unplaced.append(pod)
                continue
            target = filtered.first_fit(check, cls.nz, groups, self.template_kinds)  # booting, opened
            if target is not None:
                filtered.take(target, cls.nz)
                append_one(out, target)
                filtered.record(pod, target)
                continue
            verdicts: dict[int, str | None] = {}

            def admits(c: Candidate, check: PodCheck = check, verdicts: dict[int, str | None] = verdicts) -> bool:
                key = id(c.slot)
                if key not in verdicts:
                    verdicts[key] = check.reason(c.slot.group.node)
                return verdicts[key] is None

            target = None
            while target is None:
                pick = self._pick(cls, ranked, 1, excluded, reasons, admits=admits, presorted=True)
                if pick is None:
                    break
                if self._capped(pick.slot, reasons, excluded):
                    continue
                target = self._open(pick)
            if target is None:
                for c in ranked:  # every pool's answer, for the pod's reasons
                    admits(c)
            # why not the pools the filters refused (in every zone that was asked): this pod's own
            by_id = {id(c.slot): c.slot.pool.name for c in ranked}
            passed = {by_id[k] for k, why in verdicts.items() if why is None}
            mine = {by_id[k]: why for k, why in verdicts.items() if why is not None and by_id[k] not in passed}
            if mine:
                self.pod_reasons[pod.key] = mine
            if target is None:
                if all(why is not None for why in verdicts.values()):
                    self.refused_everywhere.add(pod.key)  # no pool's node would take it: no scale-up helps
                unplaced.append(pod)
                continue
            filtered.take(target, cls.nz)
            append_one(out, target)
            filtered.record(pod, target)
        if unplaced:
            keep = {id(p) for p in unplaced}
            cls.pods[:] = [p for p in cls.pods if id(p) not in keep] + unplaced
        return out

    def _capped(self, slot: Slot, reasons: dict[str, str], excluded: set[int]) -> bool:
        """A cap (the pool's max, the cluster's limits) forbids one more node of the slot: say why, skip it."""
        why = self.caps.limit(slot)
        if why is None:
            return False
        reasons.setdefault(slot.pool.name, why)
        excluded.add(id(slot))
        return True

    def _open(self, c: Candidate) -> Bin:
        key = (c.slot.pool.name, c.slot.zone)
        i = self.opened.get(key, 0)
        self.opened[key] = i + 1
        b = self.packer.open_bin(c.slot, f"new-{c.slot.pool.name}-{c.slot.zone}-{i}")
        self.caps.take(c.slot)
        return b

    def _place(self, cls: PodClass, cands: list[Candidate], reasons: dict[str, str],
               existing: Placement | None = None) -> Placement:
        n = len(cls.pods)
        out: Placement = []
        if existing is None:
            placed = Chooser(self.packer, cls).take(n, out)
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
                if self._capped(c.slot, reasons, excluded):
                    break
                b = self._open(c)
                k = min(c.per_node, n - placed)
                for idx, a in cls.nz:
                    b.free[idx] -= a * k
                out.append((b, k))
                placed += k
        return out

    def sort_key(self, cls: PodClass) -> tuple[float, ...]:
        return (-cls.priority, -cls.gpus, -dominant(cls.nz, self.scale))

