"""PodTopologySpread's Filter, table-driven.

Cases ported (rewritten in Python, same clusters and expectations) from kube-scheduler's
pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go (TestSingleConstraint,
TestMultipleConstraints, the minDomains and node inclusion policy cases), plus what the planner adds:
a template node under test opens a domain, and pods placed in the pass count for the next.
"""

from __future__ import annotations

import pytest
from filter_builders import cluster, exists, has, node, pod, spread, verdicts

from scaler.core.model.objects import SelectorRequirement, Taint, Toleration
from scaler.core.scheduling.filters import new_node, reasons

SPREAD, LABEL = reasons.SPREAD, reasons.SPREAD_LABEL


def four_nodes() -> list:
    return [node("node-a", {"zone": "zone1", "node": "node-a"}), node("node-b", {"zone": "zone1", "node": "node-b"}),
            node("node-x", {"zone": "zone2", "node": "node-x"}), node("node-y", {"zone": "zone2", "node": "node-y"})]


def on(node_name: str, *names: str, **kw: object) -> list:
    return [pod(n, {"foo": ""}, node=node_name, **kw) for n in names]  # type: ignore[arg-type]


FOO = exists("foo")
CASES = [
    ("no existing pods", pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO)]), four_nodes(), [],
     {"node-a": None, "node-b": None, "node-x": None, "node-y": None}),
    ("no existing pods, incoming pod doesn't match itself",
     pod("p", {"foo": ""}, spread=[spread(1, "zone", exists("bar"))]), four_nodes(), [],
     {"node-a": None, "node-b": None, "node-x": None, "node-y": None}),
    ("existing pods in a different namespace do not count",
     pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO)]), four_nodes(),
     [*on("node-a", "p-a1", ns="ns1"), *on("node-a", "p-b1", ns="ns2"), *on("node-x", "p-x1"), *on("node-y", "p-y1")],
     {"node-a": None, "node-b": None, "node-x": SPREAD, "node-y": SPREAD}),
    ("pods spread across zones as 3/3, all nodes fit",
     pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO)]), four_nodes(),
     [*on("node-a", "p-a1", "p-a2"), *on("node-b", "p-b1"), *on("node-y", "p-y1", "p-y2", "p-y3")],
     {"node-a": None, "node-b": None, "node-x": None, "node-y": None}),
    ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
     pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO)]),
     [node("node-a", {"zone": "zone1", "node": "node-a"}), node("node-b", {"zon": "zone1", "node": "node-b"}),
      node("node-x", {"zone": "zone2", "node": "node-x"}), node("node-y", {"zone": "zone2", "node": "node-y"})],
     [*on("node-a", "p-a1"), *on("node-b", "p-b1"), *on("node-x", "p-x1"), *on("node-y", "p-y1")],
     {"node-a": None, "node-b": LABEL, "node-x": SPREAD, "node-y": SPREAD}),
    ("pod cannot be scheduled as all nodes don't have label 'rack'",
     pod("p", {"foo": ""}, spread=[spread(1, "rack", FOO)]),
     [node("node-a", {"zone": "zone1", "node": "node-a"}), node("node-x", {"zone": "zone2", "node": "node-x"})], [],
     {"node-a": LABEL, "node-x": LABEL}),
    ("pods spread across nodes as 2/1/0/3, only node-x fits",
     pod("p", {"foo": ""}, spread=[spread(1, "node", FOO)]), four_nodes(),
     [*on("node-a", "p-a1", "p-a2"), *on("node-b", "p-b1"), *on("node-y", "p-y1", "p-y2", "p-y3")],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": None, "node-y": SPREAD}),
    ("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
     pod("p", {"foo": ""}, spread=[spread(2, "node", FOO)]), four_nodes(),
     [*on("node-a", "p-a1", "p-a2"), *on("node-b", "p-b1"), *on("node-y", "p-y1", "p-y2", "p-y3")],
     {"node-a": SPREAD, "node-b": None, "node-x": None, "node-y": SPREAD}),
    ("pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
     pod("p", {"bar": ""}, spread=[spread(1, "node", FOO)]), four_nodes(),
     [*on("node-a", "p-a1", "p-a2"), *on("node-b", "p-b1"), *on("node-y", "p-y1", "p-y2", "p-y3")],
     {"node-a": SPREAD, "node-b": None, "node-x": None, "node-y": SPREAD}),
    ("incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
     pod("p", {"foo": ""}, spread=[spread(1, "node", FOO)],
         node_affinity=((SelectorRequirement("node", "In", ("node-a", "node-y")),),)),
     four_nodes(), [*on("node-a", "p-a1", "p-a2"), *on("node-b", "p-b1"), *on("node-y", "p-y1", "p-y2", "p-y3")],
     # node-b and node-x fail NodeAffinity in the scheduler; this filter alone lets them through
     {"node-a": None, "node-b": None, "node-x": None, "node-y": SPREAD}),
    ("terminating Pods should be excluded",
     pod("p", {"foo": ""}, spread=[spread(1, "node", FOO)]),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
     [*on("node-a", "p-a", terminating=True), *on("node-b", "p-b")],
     {"node-a": None, "node-b": SPREAD}),
    # TestMultipleConstraints
    ("two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
     pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO), spread(1, "node", FOO)]), four_nodes(),
     [*on("node-a", "p-a1", "p-a2"), *on("node-b", "p-b1"), *on("node-y", "p-y1", "p-y2", "p-y3")],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": None, "node-y": SPREAD}),
    ("two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
     pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO), spread(1, "node", FOO)]), four_nodes(),
     [*on("node-a", "p-a1", "p-a2"), *on("node-b", "p-b1"), *on("node-y", "p-y1", "p-y2", "p-y3", "p-y4")],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": SPREAD, "node-y": SPREAD}),
    ("two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
     pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO), spread(1, "node", FOO)]),
     [node("node-a", {"zone": "zone1", "node": "node-a"}), node("node-b", {"zone": "zone1", "node": "node-b"}),
      node("node-x", {"zone": "zone2"}), node("node-y", {"zone": "zone2", "node": "node-y"})],
     [*on("node-a", "p-a1"), *on("node-y", "p-y1")],
     {"node-a": SPREAD, "node-b": None, "node-x": LABEL, "node-y": SPREAD}),
    # minDomains: fewer eligible domains than minDomains -> the global minimum is 0
    ("pods spread across zones as 2/1, maxSkew 1, minDomains 3: no zone fits as only 2 zones exist",
     pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO, min_domains=3)]), four_nodes(),
     [*on("node-a", "p-a1"), *on("node-b", "p-b1"), *on("node-x", "p-x1")],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": SPREAD, "node-y": SPREAD}),
    ("pods spread across zones as 1/0, maxSkew 2, minDomains 3: zone2 fits, zone1 too (1+1-0 <= 2)",
     pod("p", {"foo": ""}, spread=[spread(2, "zone", FOO, min_domains=3)]), four_nodes(), [*on("node-a", "p-a1")],
     {"node-a": None, "node-b": None, "node-x": None, "node-y": None}),
    ("pods spread across zones as 2/2, minDomains 2 is met: the minimum is 2 and every zone fits",
     pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO, min_domains=2)]), four_nodes(),
     [*on("node-a", "p-a1", "p-a2"), *on("node-x", "p-x1", "p-x2")],
     {"node-a": None, "node-b": None, "node-x": None, "node-y": None}),
]


@pytest.mark.parametrize(("incoming", "nodes", "existing", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter(incoming, nodes, existing, want) -> None:
    assert verdicts(cluster(nodes, existing), incoming) == want


def test_node_affinity_policy_ignore_counts_nodes_the_pod_cannot_use() -> None:
    """nodeAffinityPolicy: Honor (default) leaves zone3's nodes out when the pod's selector excludes
    them; Ignore counts zone3 as an empty domain, so the minimum drops to 0."""
    nodes = [node("a", {"zone": "z1", "tier": "gpu"}), node("b", {"zone": "z2", "tier": "gpu"}),
             node("c", {"zone": "z3", "tier": "cpu"})]
    existing = [*on("a", "p1"), *on("b", "p2")]
    honor = pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO)], node_selector={"tier": "gpu"})
    ignore = pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO, affinity_policy="Ignore")],
                 node_selector={"tier": "gpu"})
    c = cluster(nodes, existing)
    assert verdicts(c, honor, nodes[:2]) == {"a": None, "b": None}
    assert verdicts(c, ignore, nodes[:2]) == {"a": SPREAD, "b": SPREAD}


def test_node_taints_policy_honor_leaves_out_tainted_nodes() -> None:
    """nodeTaintsPolicy: Ignore (default) counts a tainted, empty zone; Honor leaves it out unless tolerated."""
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"}),
             node("c", {"zone": "z3"}, [Taint("dedicated", "infra", "NoSchedule")])]
    existing = [*on("a", "p1"), *on("b", "p2")]
    c = cluster(nodes, existing)
    ignore = pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO)])
    honor = pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO, taints_policy="Honor")])
    tolerant = pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO, taints_policy="Honor")],
                   tolerations=[Toleration("dedicated", "Exists")])
    assert verdicts(c, ignore, nodes[:2]) == {"a": SPREAD, "b": SPREAD}
    assert verdicts(c, honor, nodes[:2]) == {"a": None, "b": None}
    assert verdicts(c, tolerant, nodes[:2]) == {"a": SPREAD, "b": SPREAD}


def test_match_label_keys_narrow_the_count_to_the_pods_revision() -> None:
    """matchLabelKeys (merged into the selector by the converter): the old revision's pods do not count."""
    from scaler.kube.convert import pod_from_json

    raw = {"metadata": {"name": "p", "labels": {"app": "web", "pod-template-hash": "v2"}},
           "spec": {"containers": [], "topologySpreadConstraints": [
               {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]}]}}
    incoming = pod_from_json(raw)
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"})]
    old = [pod(f"old{i}", {"app": "web", "pod-template-hash": "v1"}, node="a") for i in range(3)]
    assert verdicts(cluster(nodes, old), incoming) == {"a": None, "b": None}
    new = [pod("new0", {"app": "web", "pod-template-hash": "v2"}, node="a")]
    assert verdicts(cluster([node("a", {"zone": "z1"}), node("b", {"zone": "z2"})], [*old, *new]), incoming) == {
        "a": SPREAD, "b": None}


def test_a_template_in_a_zone_without_nodes_opens_a_domain() -> None:
    """As cluster-autoscaler adds the template to the snapshot: zone3 has no node yet, so its template
    counts as a domain with no pods (minimum 0); the full zones cannot take a third pod each."""
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"})]
    c = cluster(nodes, [*on("a", "p1"), *on("b", "p2")])
    incoming = pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO)])
    tmpl3 = node("tmpl-z3", {"zone": "z3"}, template=True)
    tmpl1 = node("tmpl-z1", {"zone": "z1"}, template=True)
    assert verdicts(c, incoming, [*nodes, tmpl1, tmpl3]) == {"a": None, "b": None, "tmpl-z1": None, "tmpl-z3": None}
    c.place(pod("p3", {"foo": ""}), "a")
    assert verdicts(c, incoming, [*nodes, tmpl1, tmpl3]) == {
        "a": SPREAD, "b": None, "tmpl-z1": SPREAD, "tmpl-z3": None}


def test_planned_pods_count_for_the_next_pod() -> None:
    """A spread of 6 over 3 zones: the pass places pods one by one onto new nodes, and each placement
    moves the skew, so the six pods end up 2/2/2 and not all in the cheapest zone."""
    existing_full = [node(f"full-{z}", {"zone": z}) for z in ("z1", "z2", "z3")]
    c = cluster(existing_full)
    templates = {z: node(f"tmpl-{z}", {"zone": z, "node": f"tmpl-{z}"}, template=True) for z in ("z1", "z2", "z3")}
    placed: dict[str, int] = {}
    for i in range(6):
        p = pod(f"web-{i}", {"app": "web"}, spread=[spread(1, "zone", has("app", "web"))])
        check = c.check(p)
        zone = next(z for z in ("z1", "z2", "z3") if check.reason(templates[z]) is None)  # cheapest first
        name = f"new-{zone}-{placed.get(zone, 0)}"
        c.add_node(new_node(templates[zone], name))
        c.place(p, name)
        placed[zone] = placed.get(zone, 0) + 1
    assert placed == {"z1": 2, "z2": 2, "z3": 2}


def test_hostname_spread_needs_one_new_node_per_pod() -> None:
    """With other (full) nodes in the cluster, each is an empty hostname domain: the minimum stays 0,
    so a new node takes one replica only."""
    c = cluster([node(f"full-{i}", {"kubernetes.io/hostname": f"full-{i}"}) for i in range(3)])
    tmpl = node("tmpl", {"kubernetes.io/hostname": "tmpl"}, template=True)
    constraint = spread(1, "kubernetes.io/hostname", has("app", "s"))
    c.add_node(new_node(tmpl, "new-0"))
    c.place(pod("s-0", {"app": "s"}, spread=[constraint]), "new-0")
    check = c.check(pod("s-1", {"app": "s"}, spread=[constraint]))
    assert check.reason(c.nodes["new-0"]) == SPREAD  # 1 + 1 - 0 > 1
    assert check.reason(tmpl) is None


def test_hostname_spread_alone_on_one_node_is_allowed() -> None:
    """The scheduler counts only the nodes that exist: the single node is the only domain, its count is
    the minimum, so a second replica fits there (skew 1)."""
    c = cluster([])
    tmpl = node("tmpl", {"kubernetes.io/hostname": "tmpl"}, template=True)
    constraint = spread(1, "kubernetes.io/hostname", has("app", "s"))
    c.add_node(new_node(tmpl, "new-0"))
    c.place(pod("s-0", {"app": "s"}, spread=[constraint]), "new-0")
    assert c.check(pod("s-1", {"app": "s"}, spread=[constraint])).reason(c.nodes["new-0"]) is None


def test_domains_follow_nodes_leaving_and_coming_back() -> None:
    """The drain simulation removes a node and may put it back: the domains follow, in bulk or not."""
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"}), node("c", {"zone": "z3"})]
    c = cluster(nodes, [*on("a", "p1"), *on("b", "p2")])
    incoming = pod("p", {"foo": ""}, spread=[spread(1, "zone", FOO)])
    assert verdicts(c, incoming, nodes[:2]) == {"a": SPREAD, "b": SPREAD}  # z3 is empty: minimum 0
    pods_c = c.remove_node("c")
    assert verdicts(c, incoming, nodes[:2]) == {"a": None, "b": None}  # z1 / z2 only: minimum 1
    c.add_node(nodes[2], pods_c)
    assert verdicts(c, incoming, nodes[:2]) == {"a": SPREAD, "b": SPREAD}
