"""PodTopologySpread, hard constraints (`whenUnsatisfiable: DoNotSchedule`), as kube-scheduler filters.

PreFilter: for each constraint, the pods its selector matches in the incoming pod's namespace (not
terminating) are counted per topology domain, over the *eligible* nodes only: nodes carrying every
topology key of the pod's constraints that pass the constraint's inclusion policies
(`nodeAffinityPolicy: Honor`, the default, keeps nodes matching the pod's nodeSelector / required node
affinity; `nodeTaintsPolicy: Honor` keeps nodes whose NoSchedule / NoExecute taints the pod
tolerates; the default Ignore keeps all). The global minimum is the smallest count over the eligible
domains, 0 when there are fewer domains than `minDomains`.

Filter: a node without a constraint's topology key fails ("(missing required label)"); otherwise
matching pods in its domain + 1 if the pod matches its own selector - the minimum must not exceed
`maxSkew`. A node the planner is testing that is not placed yet (a template) counts as one more
eligible node with no pods, as cluster-autoscaler adds a template node to the scheduler's snapshot.
"""

from __future__ import annotations

from collections.abc import Callable

from scaler.core.model.keys import LABEL_HOSTNAME
from scaler.core.model.objects import Node, Pod, SpreadConstraint
from scaler.core.scheduling.filters import reasons
from scaler.core.scheduling.filters.index import Eligible, Matcher, Placed
from scaler.core.scheduling.filters.labels import selector_matches
from scaler.core.scheduling.predicates import matches_node_affinity, untolerated_taint


class _Item:
    __slots__ = ("constraint", "eligible", "minimum", "n_domains", "per_domain", "self_match")

    def __init__(self, constraint: SpreadConstraint, eligible: Eligible, per_domain: dict[str, int],
                 minimum: int | None, self_match: int) -> None:
        self.constraint = constraint
        self.eligible = eligible
        self.n_domains = eligible.n_domains(constraint.topology_key)
        self.per_domain = per_domain
        self.minimum = minimum  # None: no eligible domain (the scheduler's MaxInt32: every node passes)
        self.self_match = self_match


def _eligibility(pod: Pod, c: SpreadConstraint, topo_keys: tuple[str, ...]
                 ) -> tuple[object, Callable[[Node], bool], bool]:
    honor_affinity = c.node_affinity_policy == "Honor"
    honor_taints = c.node_taints_policy == "Honor"
    key = ("spread", topo_keys,
           (tuple(sorted(pod.node_selector.items())), pod.required_affinity) if honor_affinity else None,
           pod.tolerations if honor_taints else None)

    # Nodes with the same values of the keys the pod's node affinity reads (and the same taints, when
    # honoured) are judged alike: a memo keyed by those, so that 2,000 nodes cost a few tests.
    aff_keys = tuple(sorted({*pod.node_selector, *(r.key for t in pod.required_affinity for r in t if not r.field)}))
    per_node = any(r.field for t in pod.required_affinity for r in t)
    memo: dict[tuple[object, ...], bool] = {}

    def judge(node: Node) -> bool:
        labels = node.labels
        if honor_affinity and not matches_node_affinity(pod, labels, node.name):
            return False
        return not (honor_taints and untolerated_taint(pod.tolerations, node.taints) is not None)

    def test(node: Node) -> bool:
        labels = node.labels
        for k in topo_keys:
            if k not in labels:
                return False
        if per_node:
            return judge(node)
        sig = (tuple(labels.get(k) for k in aff_keys) if honor_affinity else None,
               node.taints if honor_taints else None)
        hit = memo.get(sig)
        if hit is None:
            hit = memo[sig] = judge(node)
        return hit

    return key, test, per_node or LABEL_HOSTNAME in aff_keys


class SpreadCheck:
    """The PreFilter state of one pod; `reason(node)` is the Filter."""

    __slots__ = ("items", "placed")

    def __init__(self, placed: Placed, pod: Pod) -> None:
        self.placed = placed
        self.items: list[_Item] = []
        topo_keys = tuple(sorted({c.topology_key for c in pod.spread}))
        for c in pod.spread:
            key, test, per_node = _eligibility(pod, c, topo_keys)
            eligible = placed.eligible(key, topo_keys, test, per_node)
            matcher: Matcher = (((frozenset((pod.namespace,)), None, c.selector),), True)
            per_domain: dict[str, int] = {}
            tk = c.topology_key
            nodes = placed.nodes
            sigs = placed.sigs
            for name, n in placed.counts(matcher).items():
                node = nodes[name]
                sig = sigs.get(name)
                if tk in node.labels and eligible.admits(node, placed.signature(node) if sig is None else sig):
                    v = node.labels[tk]
                    per_domain[v] = per_domain.get(v, 0) + n
            n_domains = eligible.n_domains(tk)
            minimum: int | None
            if n_domains == 0:
                minimum = None
            elif len(per_domain) < n_domains:
                minimum = 0
            else:
                minimum = min(per_domain.values())
            self.items.append(_Item(c, eligible, per_domain, minimum,
                                    1 if selector_matches(c.selector, pod.labels) else 0))

    def reason(self, node: Node) -> str | None:
        labels = node.labels
        placed = node.name in self.placed.nodes
        for it in self.items:
            c = it.constraint
            value = labels.get(c.topology_key)
            if value is None:
                return reasons.SPREAD_LABEL
            minimum = it.minimum
            n_domains = it.n_domains
            if not placed and not it.eligible.has_domain(c.topology_key, value, self.placed) \
                    and it.eligible.test(node):
                n_domains += 1  # the template under test opens a domain with no pods
                minimum = 0
            if n_domains < c.min_domains:
                minimum = 0
            if minimum is None:
                continue
            if it.per_domain.get(value, 0) + it.self_match - minimum > c.max_skew:
                return reasons.SPREAD
        return None
