"""The placement question scale-down asks of the pass's capacity: would a node's pods fit on the other
nodes, as kube-scheduler would place them there? Answered on the Packer and kube-scheduler's other filters
(`constrained.Filtered`) as the scale-up left them; a removal that is kept takes the room its pods are given,
so nothing is double-booked. `planner.plan` hands scale-down a `Room`; scale-down never sees the Packer.
Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scaler.core.model.objects import Node, Pod
from scaler.core.planning.constrained import Filtered
from scaler.core.planning.drainable import Drainable, FullKey, full_key
from scaler.core.planning.packing import Bin, Packer, Placement, PodClass
from scaler.core.planning.trial import Trial

_EXISTING = frozenset({"existing"})


class Room:
    def __init__(self, packer: Packer, filtered: Filtered | None) -> None:
        self.packer = packer
        self.filtered = filtered if filtered is not None else Filtered(packer, (), ())
        # Evicted pods' classes (`full_key`) that found no room on the other nodes: the one bin that may still
        # have some (the node then tried), or None. Bins only lose room while the candidates are tried (a
        # failed try gives back exactly what it took), and only the node tried comes back into play.
        self.full: dict[FullKey, Bin | None] = {}

    @property
    def constrained(self) -> bool:
        """Whether kube-scheduler's other filters (affinity, spread, volumes, ...) take part this pass."""
        return self.filtered.active

    def bin(self, node: str) -> Bin | None:
        """The node's bin: its room as the pass left it (None: a node the pass does not place on)."""
        return self.packer.by_node.get(node)

    def remove(self, b: Bin) -> None:
        """An empty node goes: no pod is placed there any more."""
        b.removed = True
        self.filtered.remove(b)

    def admits_without(self, pod: Pod, template: Node, node: str) -> bool:
        """Whether the filters admit the pod on a new node like `template` with `node` gone."""
        return not self.filtered.constrained(pod) or self.filtered.admits_without(pod, template, node)

    def move(self, b: Bin, drain: Drainable, moves: dict[str, str]) -> bool:
        """Re-place the node's evicted pods on the other nodes; when all fit, the room is taken, `moves` says
        where each pod goes, and the node's bin stays removed. Otherwise nothing changes but the bin's bound
        (it may have been tightened without this node), and the bin is left marked removed for the caller."""
        packer, filtered, evict = self.packer, self.filtered, drain.evict
        with Trial(packer, filtered) as trial:
            b.removed = True
            filtered.remove(b)
            placement: Placement = []
            classes: list[PodClass] = []
            class_keys: Sequence[FullKey] | None = drain.keys if not filtered.active else None
            if class_keys is None:  # the classes' keys as this pass classifies them (devices, constrained classes)
                classes = packer.classify(evict, None, filtered.class_key if filtered.active else None)
                class_keys = [self._key(cls) for cls in classes
                              if not (filtered.active and filtered.is_constrained(cls))]
            if not self._surely_full(class_keys):
                classes = classes or packer.classify(evict, None, None)
                if all(self._fill(cls, placement, b) for cls in classes):
                    trial.keep()
        if trial.kept:
            pods_by_class = iter(p for cls in classes for p in cls.pods)  # fill placed them in this order
            for target, k in placement:
                target.touched = True
                for _ in range(k):
                    moves[next(pods_by_class).key] = target.name
            return True
        b.group.bound = None  # it may have been tightened without this node
        return False

    def _fill(self, cls: PodClass, placement: Placement, tried: Bin) -> bool:
        """Place a class of evicted pods (of the bin tried) on existing nodes, as kube-scheduler would; False
        if one is left."""
        packer, filtered = self.packer, self.filtered
        groups = packer.eligible_real(cls.static_id)
        if filtered.active and filtered.is_constrained(cls):
            # kube-scheduler's other filters decide where it may go (anti-affinity, volume zone, ...)
            return not filtered.fill(cls, groups, cls.pods, _EXISTING, placement)
        before = len(placement)
        placed = packer.fill(cls, groups, len(cls.pods), _EXISTING, placement)
        if placed < len(cls.pods):
            if not placed and not before:  # not one pod on the nodes as they were: remember it
                key = self._key(cls)
                self.full[key] = None if key in self.full else tried  # (two different nodes tried: none has room)
            return False
        filtered.record_placement(cls.pods, placement[before:])
        return True

    def _key(self, cls: PodClass) -> FullKey:
        names = self.packer.resources
        return full_key(cls.rep, [(names[i], a) for i, a in cls.nz])

    def _surely_full(self, keys: Iterable[FullKey]) -> bool:
        """A class of the pods (of those keys: constrained classes are left out) has no room on the nodes, as
        an earlier try of this pass found, without one placement of this try (the pods' own node is out of
        play during it)."""
        full, index = self.full, self.packer.index
        for key in keys:
            if key not in full:
                continue
            b = full[key]
            if b is None or b.removed or any(b.free[index[r]] < a for r, a in key[3]):
                return True
        return False
