"""The placer: puts a pod class on existing and coming nodes, then booting ones and nodes opened this
pass, then new nodes of the slots the expander picks. It owns one pass's capacity (the Packer), the
filters' view of the cluster, the caps and the nodes it opened, and rolls them back together inside a
`trial.Trial` (a gang, all or none). Pure."""

from __future__ import annotations

from scaler.core.model import keys
from scaler.core.model.objects import Pod
from scaler.core.model.workload import is_daemonset
from scaler.core.planning.advance import Advanced
from scaler.core.planning.capacity import build_packer, dra_state, usage
from scaler.core.planning.caps import Caps
from scaler.core.planning.constrained import Filtered, append_one
from scaler.core.planning.context import PlanningContext
from scaler.core.planning.expander import Expander, SlotOption
from scaler.core.planning.packing import FRESH, Bin, Group, Placement, PodClass, Slot
from scaler.core.planning.queue_order import Chooser
from scaler.core.planning.snapshot import Snapshot
from scaler.core.scheduling.filters import PodCheck


class Placer:
    def __init__(self, snapshot: Snapshot, ctx: PlanningContext, adv: Advanced) -> None:
        self.usage = usage(snapshot.nodes, ctx.gang_label, adv.memo)
        self.packer, slots = build_packer(snapshot, ctx, adv, self.usage)
        pending = [p for p in snapshot.pending if not is_daemonset(p)]
        self.filtered = Filtered(self.packer, snapshot.nodes, pending, snapshot.storage, snapshot.namespaces,
                                 dra_state(snapshot, self.packer), on_nodes=self.usage.filtered)
        self.caps = Caps(snapshot, ctx, adv)
        self.expander = Expander(self.packer, slots, self.caps, ctx.expander, snapshot.now)
        self.refused_everywhere: set[str] = set()  # pods kube-scheduler's filters keep off every pool
        self.pod_reasons: dict[str, dict[str, str]] = {}  # pod -> pool -> the filters' refusal
        self.in_flight_groups = self.packer.in_flight_groups
        self.fresh_groups = list({id(b.group): b.group for b in self.packer.bins if b.fresh}.values())
        self.opened: dict[tuple[str, str], int] = {}
        self._opened_saved: dict[tuple[str, str], int] = {}
        self.template_kinds = frozenset({"in-flight", "new", FRESH})

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

    def place(self, cls: PodClass, cands: list[SlotOption], reasons: dict[str, str],
              existing: Placement | None = None) -> Placement:
        """Existing and coming nodes (`existing` when already placed in queue order), then booting
        ones and nodes opened this pass, then new nodes."""
        filtered = self.filtered
        if filtered.active and filtered.is_constrained(cls):
            return self._place_checked(cls, cands, reasons, existing)
        counted = filtered.active and filtered.constrained(cls.rep)  # plain claims, by the count
        out = self._place(cls, self._with_devices(cls, cands, reasons) if counted else cands, reasons, existing)
        if filtered.active:
            done = sum(k for _, k in existing) if existing else 0
            filtered.record_placement(cls.pods[done:], out[len(existing) if existing else 0:])
        return out

    def _with_devices(self, cls: PodClass, cands: list[SlotOption], reasons: dict[str, str]) -> list[SlotOption]:
        """The slots as a class of plain claims sees them: a new node holds as many as its template's DRA
        devices allow (the expander leaves them uncounted, for the filter to word why a pool is too small)."""
        need = dict(cls.nz)[self.packer.index[keys.RES_DRA_DEVICES]]
        out = []
        for c in cands:
            k = min(c.per_node, c.slot.devices // need)
            if k > 0:
                out.append(SlotOption(c.slot, k, c.waste_terms))
            else:
                reasons.setdefault(c.slot.pool.name, f"cannot allocate the pod's ResourceClaims: {need} device(s) "
                                                     f"needed, {c.slot.devices} on the pool's nodes")
        if cands and not out:  # no pool's node would take it: no scale-up helps
            self.refused_everywhere.update(p.key for p in cls.pods)
        return out

    def _place_checked(self, cls: PodClass, cands: list[SlotOption], reasons: dict[str, str],
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
        if not left:  # every pod found an existing or coming node
            return out
        groups = [c.slot.group for c in cands] + self._coming(cls)
        excluded: set[int] = set()
        unplaced: list[Pod] = []
        ranked = sorted(cands, key=lambda c: self.expander.score(c, cls, 1))  # one pod a node at a time
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

            def admits(c: SlotOption, check: PodCheck = check, verdicts: dict[int, str | None] = verdicts) -> bool:
                key = id(c.slot)
                if key not in verdicts:
                    verdicts[key] = check.reason(c.slot.group.node)
                return verdicts[key] is None

            target = None
            while target is None:
                pick = self.expander.pick(cls, ranked, 1, excluded, reasons, admits=admits,
                                          presorted=not self.caps.warm)  # warm instances used up re-rank
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

    def _coming(self, cls: PodClass) -> list[Group]:
        """The groups of booting nodes (a multi-zone pool's, in their zones) and of fresh ones (`capacity.is_fresh`)
        the class may go to, after its slots' groups (which hold their pools' booting nodes)."""
        return [g for g in (*self.in_flight_groups, *self.fresh_groups)
                if self.packer.static_reason(cls.static_id, g) is None]

    def _capped(self, slot: Slot, reasons: dict[str, str], excluded: set[int]) -> bool:
        """A cap (the pool's max, the cluster's limits) forbids one more node of the slot: say why, skip it."""
        why = self.caps.limit(slot)
        if why is None:
            return False
        reasons.setdefault(slot.pool.name, why)
        excluded.add(id(slot))
        return True

    def _open(self, c: SlotOption) -> Bin:
        key = (c.slot.pool.name, c.slot.zone)
        i = self.opened.get(key, 0)
        self.opened[key] = i + 1
        b = self.packer.open_bin(c.slot, f"new-{c.slot.pool.name}-{c.slot.zone}-{i}")
        self.caps.take(c.slot)
        return b

    def _place(self, cls: PodClass, cands: list[SlotOption], reasons: dict[str, str],
               existing: Placement | None = None) -> Placement:
        n = len(cls.pods)
        out: Placement = []
        if existing is None:
            placed = Chooser(self.packer, cls).take(n, out)
        else:
            out.extend(existing)
            placed = sum(k for _, k in existing)
        if placed < n:
            groups = [c.slot.group for c in cands] + self._coming(cls)
            placed += self.packer.fill(cls, groups, n - placed, self.template_kinds, out)
        excluded: set[int] = set()
        while placed < n:
            c = self.expander.pick(cls, cands, n - placed, excluded, reasons)
            if c is None:
                break
            warm = self.caps.warm_left(c.slot.pool.name) > 0
            while placed < n:
                if self._capped(c.slot, reasons, excluded):
                    break
                if warm and self.caps.warm_left(c.slot.pool.name) <= 0:
                    break  # its warm instances are taken: the next node is a cold one, ranked again
                b = self._open(c)
                k = min(c.per_node, n - placed)
                for idx, a in cls.nz:
                    b.free[idx] -= a * k
                out.append((b, k))
                placed += k
        return out
