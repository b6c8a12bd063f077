"""The expander: which pool and zone new nodes come from, within the caps, with backoff, unavailable
offerings and the fallback chain. It chooses; `place.Placer` places. Pure."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

from scaler.core.model import keys
from scaler.core.planning.caps import Caps
from scaler.core.planning.packing import Packer, PodClass, Slot, dominant, fit_count
from scaler.core.scheduling import predicates


@dataclass(slots=True)
class SlotOption:
    slot: Slot
    per_node: int  # pods of the class an empty template takes
    waste_terms: tuple[tuple[int, int], ...] = ()  # (free on an empty node, request) of gpu, cpu, memory


class Expander:
    """Which pool and zone new nodes come from: per pod class, the template slots it fits (and why the
    other pools cannot take it), ranked by price per pod, spot first, then waste; `pick` applies the caps
    and hands a pool that cannot launch now to its fallback."""

    def __init__(self, packer: Packer, slots: list[Slot], caps: Caps, policy: str = "price", now: float = 0.0) -> None:
        self.packer = packer
        self.caps = caps
        self.policy = policy  # ScalerConfig.expander
        self.now = now
        self.by_pool: dict[str, list[Slot]] = {}
        for s in slots:
            self.by_pool.setdefault(s.pool.name, []).append(s)
        self.scale = [max((s.empty[i] for s in slots), default=0) for i in range(len(packer.resources))]
        self._static_cache: dict[int, tuple[dict[str, str], list[tuple[str, list[Slot]]]]] = {}
        self._cand_cache: dict[tuple[int, tuple[tuple[int, int], ...]], tuple[list[SlotOption], dict[str, str]]] = {}
        gpu_cpu_mem = [packer.index.get(r) for r in (keys.RES_GPU, keys.RES_CPU, keys.RES_MEMORY)]
        self._waste_idx = [i for i in gpu_cpu_mem if i is not None]

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

    def candidates(self, cls: PodClass) -> tuple[list[SlotOption], dict[str, str]]:
        """The template slots the class fits (with pods per node) and, per other pool, why not."""
        key = (cls.static_id, cls.nz)
        cached = self._cand_cache.get(key)
        if cached is None:
            static_reasons, allowed = self._static_pools(cls.static_id)
            reasons = dict(static_reasons)
            cands: list[SlotOption] = []
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
                        cands.append(SlotOption(slot, shape[0], shape[1]))
                if len(cands) == before:
                    empty = dict(zip(self.packer.resources, ok[0].empty, strict=True))
                    reasons[name] = predicates.resource_reason(cls.rep.requests, empty) or "Insufficient resources"
            cached = self._cand_cache[key] = (cands, reasons)
        return cached[0], dict(cached[1])

    def score(self, c: SlotOption, cls: PodClass, n: int) -> tuple[int, float, int, float, str, str]:
        """Rank: a pool with a warm instance left first (Ready in timings.warm_start instead of a boot: the pods
        wait less, the user declared the warm pool for that), then price per pod, spot, waste."""
        m = max(1, min(c.per_node, n))
        terms = c.waste_terms
        waste = sum((e - m * u) / e for e, u in terms) / len(terms) if terms else 0.0
        cold = 0 if self.caps.warm and self.caps.warm_left(c.slot.pool.name) > 0 else 1
        if self.policy == "price":
            return cold, c.slot.price / m, 0 if c.slot.spot else 1, waste, c.slot.pool.name, c.slot.zone
        # cluster-autoscaler's expanders ignore price: a draw per pod and pass (deterministic, so a run replays).
        draw = zlib.crc32(f"{c.slot.pool.name}/{c.slot.zone}/{cls.rep.key}/{self.now:g}".encode())
        first = round(waste, 6) if self.policy == "least-waste" else 0.0
        return cold, first, draw, 0.0, c.slot.pool.name, c.slot.zone

    def pick(self, cls: PodClass, cands: list[SlotOption], n: int, excluded: set[int], reasons: dict[str, str],
              only: str | None = None, seen: set[str] | None = None,
              admits: Callable[[SlotOption], bool] | None = None, presorted: bool = False) -> SlotOption | None:
        """The best-ranked slot that may open a node now: the one fallback-and-limits rule.

        A slot at a cap (pool max, cluster limits, per-pass rate) is skipped for the next in rank. A slot
        that cannot launch now (backoff, offering unavailable) hands over to its pool's declared
        fallback first, along the chain, before the other pools. `admits`: the pod's other filters on
        the slot's template, asked lazily in rank order (`cands` already ranked when `presorted`)."""
        seen = set() if seen is None else seen
        mine = (c for c in cands if id(c.slot) not in excluded and only in (None, c.slot.pool.name))
        ranked = list(mine) if presorted else sorted(mine, key=lambda c: self.score(c, cls, n))
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
                found = self.pick(cls, cands, n, excluded, reasons, fallback, seen, admits, presorted)
                if found is not None:
                    return found
        return None

    def sort_key(self, cls: PodClass) -> tuple[float, ...]:
        return (-cls.priority, -cls.gpus, -dominant(cls.nz, self.scale))

