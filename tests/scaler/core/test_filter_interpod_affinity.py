"""InterPodAffinity's Filter (required terms, both directions), table-driven.

Cases ported (rewritten in Python, same pods, nodes and expected reasons) from kube-scheduler's
pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go (TestRequiredAffinitySingleNode,
TestRequiredAffinityMultipleNodes, the namespaceSelector cases), plus the planner's use: replicas of a
StatefulSet with hostname anti-affinity placed in one pass need one node each.
"""

from __future__ import annotations

import pytest
from filter_builders import cluster, exists, has, node, pod, term, verdicts

from scaler.core.model.objects import LabelSelector, SelectorRequirement
from scaler.core.scheduling.filters import new_node, reasons

AFF, ANTI, EXISTING = reasons.AFFINITY, reasons.ANTI_AFFINITY, reasons.EXISTING_ANTI_AFFINITY
SEC = {"service": "securityscan"}
SEC2 = {"security": "S1"}
IN_SEC = has("service", "securityscan", "value2")
IN_AV = has("service", "antivirusscan", "value2")


def machine1() -> list:
    return [node("machine1", {"region": "r1", "zone": "z11"})]


SINGLE = [
    ("no required pod affinity, no existing pods", pod("p"), [], None),
    ("satisfies PodAffinity using In that matches the existing pod",
     pod("p", SEC2, affinity=[term(IN_SEC, "region")]), [pod("e", SEC, node="machine1")], None),
    ("satisfies PodAffinity using NotIn in labelSelector that matches the existing pod",
     pod("p", SEC2, affinity=[term(LabelSelector((SelectorRequirement("service", "NotIn", ("securityscan3",
                                                                                              "value3")),)),
                                   "region")]),
     [pod("e", SEC, node="machine1")], None),
    ("does not satisfy PodAffinity because of a different namespace",
     pod("p", SEC2, affinity=[term(IN_SEC, "region", namespaces=("DiffNameSpace",))]),
     [pod("e", SEC, node="machine1", ns="ns")], AFF),
    ("doesn't satisfy PodAffinity because of an unmatching labelSelector",
     pod("p", SEC, affinity=[term(IN_AV, "region")]), [pod("e", SEC, node="machine1")], AFF),
    ("satisfies PodAffinity with different label operators in multiple terms",
     pod("p", SEC2, affinity=[
         term(LabelSelector((SelectorRequirement("service", "Exists"),
                             SelectorRequirement("wrongkey", "DoesNotExist"))), "region"),
         term(LabelSelector((SelectorRequirement("service", "In", ("securityscan",)),
                             SelectorRequirement("service", "NotIn", ("WrongValue",)))), "region")]),
     [pod("e", SEC, node="machine1")], None),
    ("matchExpressions are ANDed: one item does not match",
     pod("p", SEC2, affinity=[
         term(LabelSelector((SelectorRequirement("service", "Exists"),
                             SelectorRequirement("wrongkey", "DoesNotExist"))), "region"),
         term(LabelSelector((SelectorRequirement("service", "In", ("securityscan2",)),
                             SelectorRequirement("service", "NotIn", ("WrongValue",)))), "region")]),
     [pod("e", SEC, node="machine1")], AFF),
    ("satisfies PodAffinity and PodAntiAffinity with the existing pod",
     pod("p", SEC2, affinity=[term(IN_SEC, "region")], anti=[term(IN_AV, "node")]),
     [pod("e", SEC, node="machine1")], None),
    ("satisfies PodAffinity, PodAntiAffinity and the existing pod's anti-affinity",
     pod("p", SEC2, affinity=[term(IN_SEC, "region")], anti=[term(IN_AV, "node")]),
     [pod("e", SEC, node="machine1", anti=[term(IN_AV, "node")])], None),
    ("satisfies PodAffinity but not PodAntiAffinity with the existing pod",
     pod("p", SEC2, affinity=[term(IN_SEC, "region")], anti=[term(IN_SEC, "zone")]),
     [pod("e", SEC, node="machine1")], ANTI),
    ("satisfies PodAffinity and PodAntiAffinity but not the existing pod's anti-affinity (symmetry)",
     pod("p", SEC, affinity=[term(IN_SEC, "region")], anti=[term(IN_AV, "node")]),
     [pod("e", SEC, node="machine1", anti=[term(IN_SEC, "zone")])], EXISTING),
    ("the pod matches its own NotIn term but no pod exists to match it",
     pod("p", SEC, affinity=[term(LabelSelector((SelectorRequirement("service", "NotIn",
                                                                     ("securityscan", "value2")),)), "region")]),
     [], AFF),
    ("existing pod's anti-affinity is respected when the pod has no anti-affinity of its own",
     pod("p", SEC), [pod("e", SEC, node="machine1", anti=[term(IN_SEC, "zone")])], EXISTING),
    ("existing pod's anti-affinity that does not match the pod",
     pod("p", SEC), [pod("e", SEC, node="machine1", anti=[term(
         LabelSelector((SelectorRequirement("service", "NotIn", ("securityscan", "value2")),)), "zone")])], None),
    ("the pod's anti-affinity matches both existing pods' labels",
     pod("p", SEC, anti=[term(exists("service"), "region"), term(exists("security"), "region")]),
     [pod("e", SEC2, node="machine1", anti=[term(exists("security"), "zone")])], ANTI),
    ("the existing pod's anti-affinity uses a topology key the node lacks: it does not apply",
     pod("p", SEC), [pod("e", SEC, node="machine1", anti=[term(IN_SEC, "rack")])], None),
]


@pytest.mark.parametrize(("incoming", "existing", "want"), [c[1:] for c in SINGLE], ids=[c[0] for c in SINGLE])
def test_single_node(incoming, existing, want) -> None:
    assert verdicts(cluster(machine1(), existing), incoming) == {"machine1": want}


def test_multiple_nodes_affinity_on_a_shared_topology_value() -> None:
    """A pod can go onto every node with the same region as the node holding a matching pod."""
    nodes = [node("nodeA", {"region": "r1", "zone": "z11", "hostname": "nodeA"}),
             node("nodeB", {"region": "r1", "zone": "z12", "hostname": "nodeB"}),
             node("nodeC", {"region": "r2", "zone": "z21", "hostname": "nodeC"})]
    incoming = pod("p", {"foo": "bar"}, affinity=[term(has("foo", "bar"), "region")])
    c = cluster(nodes, [pod("e", {"foo": "bar"}, node="nodeA")])
    assert verdicts(c, incoming) == {"nodeA": None, "nodeB": None, "nodeC": AFF}


def test_multiple_nodes_anti_affinity_on_a_shared_topology_value() -> None:
    """NodeA and nodeB share the region; a pod there matches the anti-affinity: only nodeC fits."""
    nodes = [node("nodeA", {"region": "r1", "hostname": "nodeA"}), node("nodeB", {"region": "r1", "hostname": "nodeB"}),
             node("nodeC", {"region": "r2", "hostname": "nodeC"})]
    incoming = pod("p", {"foo": "bar"}, anti=[term(has("foo", "bar"), "region")])
    c = cluster(nodes, [pod("e", {"foo": "bar"}, node="nodeA")])
    assert verdicts(c, incoming) == {"nodeA": ANTI, "nodeB": ANTI, "nodeC": None}


def test_first_pod_of_a_self_affine_group_fits_where_the_topology_key_exists() -> None:
    """No pod matches anywhere and the pod matches its own terms: every node with the key fits."""
    nodes = [node("nodeA", {"zone": "z1"}), node("nodeB", {"zone": "z2"}), node("nodeC", {})]
    incoming = pod("w0", {"job": "train"}, affinity=[term(has("job", "train"), "zone")])
    assert verdicts(cluster(nodes), incoming) == {"nodeA": None, "nodeB": None, "nodeC": AFF}


def test_namespace_selector_matches_by_namespace_labels() -> None:
    """namespaceSelector picks the namespaces by their labels; an empty one selects every namespace."""
    nodes = [node("nodeA", {"zone": "z1"}), node("nodeB", {"zone": "z2"})]
    existing = [pod("e", {"app": "db"}, node="nodeA", ns="team-a")]
    namespaces = {"team-a": {"team": "a"}, "team-b": {"team": "b"}, "default": {}}
    want_a = pod("p", {}, affinity=[term(has("app", "db"), "zone", namespaces=(), ns_selector=has("team", "a"))])
    want_b = pod("p", {}, affinity=[term(has("app", "db"), "zone", namespaces=(), ns_selector=has("team", "b"))])
    everywhere = pod("p", {}, affinity=[term(has("app", "db"), "zone", namespaces=(), ns_selector=LabelSelector())])
    c = cluster(nodes, existing, namespaces=namespaces)
    assert verdicts(c, want_a) == {"nodeA": None, "nodeB": AFF}
    assert verdicts(c, want_b) == {"nodeA": AFF, "nodeB": AFF}
    assert verdicts(c, everywhere) == {"nodeA": None, "nodeB": AFF}
    own_namespace = pod("p", {}, affinity=[term(has("app", "db"), "zone")])  # default: the pod's own
    assert verdicts(c, own_namespace) == {"nodeA": AFF, "nodeB": AFF}


def test_existing_anti_affinity_with_namespace_selector_reads_the_incoming_pods_namespace() -> None:
    nodes = [node("nodeA", {"zone": "z1"}), node("nodeB", {"zone": "z2"})]
    guard = pod("e", {"app": "noisy"}, node="nodeA", ns="infra",
                anti=[term(exists("app"), "zone", namespaces=(), ns_selector=has("tier", "prod"))])
    namespaces = {"infra": {}, "prod-ns": {"tier": "prod"}, "dev-ns": {"tier": "dev"}}
    c = cluster(nodes, [guard], namespaces=namespaces)
    assert verdicts(c, pod("p", {"app": "web"}, ns="prod-ns")) == {"nodeA": EXISTING, "nodeB": None}
    assert verdicts(c, pod("p", {"app": "web"}, ns="dev-ns")) == {"nodeA": None, "nodeB": None}
    assert c.needs_check(pod("p", {"app": "web"}, ns="prod-ns"))
    assert not c.needs_check(pod("p", {"app": "web"}, ns="dev-ns"))


def test_statefulset_with_hostname_anti_affinity_needs_a_node_per_replica() -> None:
    """Four replicas placed in one pass onto new nodes: each replica refuses the nodes opened for the
    earlier ones, so four nodes are opened, not one."""
    c = cluster([])
    tmpl = node("tmpl", {"kubernetes.io/hostname": "tmpl"}, template=True)
    opened: list[str] = []
    for i in range(4):
        replica = pod(f"db-{i}", {"app": "db"}, anti=[term(has("app", "db"), "kubernetes.io/hostname")])
        check = c.check(replica)
        target = next((n for n in opened if check.reason(c.nodes[n]) is None), None)
        if target is None:
            assert check.reason(tmpl) is None
            target = f"new-{len(opened)}"
            c.add_node(new_node(tmpl, target))
            opened.append(target)
        c.place(replica, target)
    assert opened == ["new-0", "new-1", "new-2", "new-3"]
    # and an unrelated pod still shares them
    assert c.check(pod("web", {"app": "web"})).reason(c.nodes["new-0"]) is None


def test_unplace_releases_the_anti_affinity() -> None:
    nodes = [node("nodeA", {"zone": "z1"})]
    e = pod("e", {"app": "db"}, node="nodeA", anti=[term(has("app", "db"), "zone")])
    c = cluster(nodes, [e])
    incoming = pod("p", {"app": "db"})
    assert c.reason(incoming, nodes[0]) == EXISTING
    c.unplace(e, "nodeA")
    assert c.reason(incoming, nodes[0]) is None
    assert not c.needs_check(incoming)
