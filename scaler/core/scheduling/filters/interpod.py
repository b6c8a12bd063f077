"""InterPodAffinity, required terms, both directions, as kube-scheduler filters.

PreFilter, over every placed pod:
- affinity: the topology pairs (key, value) of the nodes holding pods that match *all* the incoming
  pod's affinity terms;
- anti-affinity: per term, the pairs of the nodes holding pods that match it;
- existing anti-affinity: the pairs of the nodes holding pods whose required anti-affinity has a term
  matching the incoming pod (its namespace's labels for namespaceSelector).

Filter, in the scheduler's order: the node must carry every affinity term's topology key and sit in
a pair that has matching pods (unless no pod anywhere matches and the pod matches its own terms: the
first pod of a group that wants to be together); no anti-affinity term's pair of the node may hold a
matching pod; no label pair of the node may be blocked by an existing pod's anti-affinity.
"""

from __future__ import annotations

from scaler.core.model.objects import Node, Pod, PodAffinityTerm
from scaler.core.scheduling.filters import reasons
from scaler.core.scheduling.filters.index import Matcher, Placed, part_of
from scaler.core.scheduling.filters.labels import affinity_term_matches


def _pairs(placed: Placed, counts: dict[str, int], topology_key: str, out: set[tuple[str, str]]) -> None:
    nodes = placed.nodes
    for name in counts:
        v = nodes[name].labels.get(topology_key)
        if v is not None:
            out.add((topology_key, v))


def existing_anti_pairs(placed: Placed, pod: Pod) -> set[tuple[str, str]]:
    """The (key, value) pairs where a placed pod's required anti-affinity keeps this pod out."""
    out: set[tuple[str, str]] = set()
    if not placed.anti:
        return out
    ns_labels = placed.ns_labels(pod.namespace)
    for sig, t in placed.anti_candidates(pod):
        on = placed.anti.get(sig)
        if on and affinity_term_matches(t, pod, ns_labels):
            _pairs(placed, on, t.topology_key, out)
    return out


def blocked_by_existing(placed: Placed, pod: Pod) -> bool:
    """Some placed (or expected) pod's anti-affinity matches the pod: its placement is checked per node."""
    candidates = placed.anti_candidates(pod)
    if not candidates:
        return False
    ns_labels = placed.ns_labels(pod.namespace)
    return any(affinity_term_matches(t, pod, ns_labels) for _, t in candidates)


class AffinityCheck:
    """The PreFilter state of one pod; `reason(node)` is the Filter."""

    __slots__ = ("affinity", "anti", "anti_pairs", "existing", "pairs", "self_ok")

    def __init__(self, placed: Placed, pod: Pod) -> None:
        self.affinity: tuple[PodAffinityTerm, ...] = pod.pod_affinity
        self.pairs: set[tuple[str, str]] = set()
        self.self_ok = False
        if self.affinity:
            matcher: Matcher = (tuple(part_of(t) for t in self.affinity), False)
            counts = placed.counts(matcher)
            for t in self.affinity:
                _pairs(placed, counts, t.topology_key, self.pairs)
            ns_labels = placed.ns_labels(pod.namespace)
            self.self_ok = all(affinity_term_matches(t, pod, ns_labels) for t in self.affinity)
        self.anti = pod.pod_anti_affinity
        self.anti_pairs: set[tuple[str, str]] = set()
        for t in self.anti:
            _pairs(placed, placed.counts(((part_of(t),), False)), t.topology_key, self.anti_pairs)
        self.existing = existing_anti_pairs(placed, pod)

    def reason(self, node: Node) -> str | None:
        labels = node.labels
        if self.affinity:
            exist = True
            for t in self.affinity:
                v = labels.get(t.topology_key)
                if v is None:
                    return reasons.AFFINITY
                if (t.topology_key, v) not in self.pairs:
                    exist = False
            if not exist and not (not self.pairs and self.self_ok):
                return reasons.AFFINITY
        if self.anti_pairs:
            for t in self.anti:
                v = labels.get(t.topology_key)
                if v is not None and (t.topology_key, v) in self.anti_pairs:
                    return reasons.ANTI_AFFINITY
        for k, v in self.existing:
            if labels.get(k) == v:
                return reasons.EXISTING_ANTI_AFFINITY
        return None
