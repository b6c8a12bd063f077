"""NodePorts, NodeName and node affinity's matchFields, table-driven.

NodePorts cases ported (rewritten in Python, same ports and expectations) from kube-scheduler's
pkg/scheduler/framework/plugins/nodeports/node_ports_test.go (TestNodePorts, TestFits); NodeName and
matchFields from pkg/scheduler/framework/plugins/nodename/node_name_test.go and
nodeaffinity/node_affinity_test.go ("Pod with matchFields using In operator ...").
"""

from __future__ import annotations

import pytest
from filter_builders import cluster, node, pod, verdicts

from scaler.core.model.objects import Pod, SelectorRequirement
from scaler.core.scheduling.filters import new_node, reasons
from scaler.core.scheduling.predicates import REASON_SELECTOR, static_reason
from scaler.kube.convert import pod_from_json

PORTS = reasons.PORTS
CASES = [
    ("other port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], None),
    ("same udp port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], PORTS),
    ("same tcp port", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], PORTS),
    ("different host ip", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], None),
    ("different protocol", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], None),
    ("second udp port conflict", ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], PORTS),
    ("first tcp port conflict", ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
     ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"], PORTS),
    ("first tcp port conflict due to 0.0.0.0 hostIP", ["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], PORTS),
    ("TCP hostPort conflict due to 0.0.0.0 hostIP", ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
     ["TCP/127.0.0.1/8001"], PORTS),
    ("second tcp port conflict to 0.0.0.0 hostIP", ["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], PORTS),
    ("second different protocol", ["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], None),
    ("UDP hostPort conflict due to 0.0.0.0 hostIP", ["UDP/127.0.0.1/8001"],
     ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"], PORTS),
    ("multiple non-conflicting ports", ["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90",
                                        "TCP/127.0.1.1/100"],
     ["TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"], None),
    ("multiple ports, some conflicting", ["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90",
                                          "TCP/127.0.1.1/100"],
     ["TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"], PORTS),
]


@pytest.mark.parametrize(("want_ports", "used_ports", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_node_ports(want_ports, used_ports, want) -> None:
    m1 = node("m1")
    c = cluster([m1], [pod("existing", node="m1", ports=used_ports)])
    assert verdicts(c, pod("p", ports=want_ports)) == {"m1": want}


def test_sidecar_ports_count_and_plain_init_container_ports_do_not() -> None:
    """As the upstream cases "non-sidecar initContainer using hostPort" / "... from sidecar initContainer"."""
    def with_init(restart: str | None) -> Pod:
        init = {"name": "i", "ports": [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}]}
        if restart:
            init["restartPolicy"] = restart
        return pod_from_json({"metadata": {"name": "p"}, "spec": {"containers": [], "initContainers": [init]}})

    c = cluster([node("m1")], [pod("existing", node="m1", ports=["TCP/0.0.0.0/8001"])])
    assert verdicts(c, with_init(None)) == {"m1": None}
    assert verdicts(c, with_init("Always")) == {"m1": PORTS}


def test_two_pods_of_one_host_port_need_two_new_nodes() -> None:
    """The planner places a pod, then the next one with the same hostPort refuses that node."""
    c = cluster([])
    tmpl = node("tmpl", template=True)
    c.add_node(new_node(tmpl, "new-0"))
    c.place(pod("a", ports=["TCP//9400"]), "new-0")
    check = c.check(pod("b", ports=["TCP//9400"]))
    assert check.reason(c.nodes["new-0"]) == PORTS
    assert check.reason(tmpl) is None


def test_node_name() -> None:
    """A pending pod that names its node fits that node only (node_name_test.go)."""
    c = cluster([node("foo"), node("bar")])
    pinned = pod("p")
    pinned.node_name = "foo"
    assert verdicts(c, pinned) == {"foo": None, "bar": reasons.NODE_NAME}
    assert verdicts(c, pod("free")) == {"foo": None, "bar": None}


def test_match_fields_on_metadata_name() -> None:
    """Pod with matchFields using In on metadata.name: only that node; NotIn: every other node; a term
    with matchFields and matchExpressions needs both (node_affinity_test.go). The static predicate,
    which cannot see names, refuses the pod (conservatively), the node check decides."""
    raw = {"metadata": {"name": "p"}, "spec": {"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node1"]}]}]}}}}}
    p = pod_from_json(raw)
    assert p.required_affinity == ((SelectorRequirement("metadata.name", "In", ("node1",), field=True),),)
    nodes = [node("node1", {"zone": "z1"}), node("node2", {"zone": "z1"})]
    c = cluster(nodes)
    assert verdicts(c, p) == {"node1": None, "node2": REASON_SELECTOR}
    assert [static_reason(p, n) for n in nodes] == [None, REASON_SELECTOR]  # the whole Node: name known
    not_in = pod("q", node_affinity=((SelectorRequirement("metadata.name", "NotIn", ("node1",), field=True),),))
    assert verdicts(c, not_in) == {"node1": REASON_SELECTOR, "node2": None}
    both = pod("r", node_affinity=((SelectorRequirement("metadata.name", "In", ("node1", "node2"), field=True),
                                    SelectorRequirement("zone", "In", ("z2",))),))
    assert verdicts(c, both) == {"node1": REASON_SELECTOR, "node2": REASON_SELECTOR}
    # a new node never has the name asked for
    assert c.check(p).reason(new_node(node("tmpl", {"zone": "z1"}, template=True), "new-0")) == REASON_SELECTOR
