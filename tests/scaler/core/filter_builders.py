"""Builders for the filter tests, in the shape of kube-scheduler's st.MakePod() / st.MakeNode() helpers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaler.core.model.objects import (
    ClaimRef,
    HostPort,
    LabelSelector,
    Node,
    Pod,
    PodAffinityTerm,
    SelectorRequirement,
    SpreadConstraint,
    Taint,
    Toleration,
)
from scaler.core.model.storage import Storage
from scaler.core.scheduling.filters import Cluster


def exists(key: str) -> LabelSelector:
    return LabelSelector((SelectorRequirement(key, "Exists"),))


def has(key: str, *values: str) -> LabelSelector:
    return LabelSelector((SelectorRequirement(key, "In", values),))


def spread(max_skew: int, key: str, selector: LabelSelector | None, *, min_domains: int = 1,
           affinity_policy: str = "Honor", taints_policy: str = "Ignore") -> SpreadConstraint:
    return SpreadConstraint(max_skew, key, selector, min_domains, affinity_policy, taints_policy)  # type: ignore[arg-type]


def term(selector: LabelSelector | None, key: str, namespaces: tuple[str, ...] = ("default",),
         ns_selector: LabelSelector | None = None) -> PodAffinityTerm:
    return PodAffinityTerm(selector, key, namespaces, ns_selector)


def pod(name: str, labels: Mapping[str, str] | None = None, *, node: str | None = None, ns: str = "default",
        spread: Iterable[SpreadConstraint] = (), affinity: Iterable[PodAffinityTerm] = (),
        anti: Iterable[PodAffinityTerm] = (), ports: Iterable[str] = (), claims: Iterable[str] = (),
        terminating: bool = False, node_affinity: tuple[tuple[SelectorRequirement, ...], ...] = (),
        node_selector: Mapping[str, str] | None = None, tolerations: Iterable[Toleration] = (),
        uid: str = "") -> Pod:
    """`ports` as the upstream tests write them: "TCP/127.0.0.1/8080"."""
    host_ports = []
    for spec in ports:
        proto, ip, port = spec.split("/")
        host_ports.append(HostPort(int(port), proto, ip or "0.0.0.0"))
    return Pod(name, ns, uid=uid, labels=dict(labels or {}), node_name=node,
               phase="Running" if node else "Pending", spread=tuple(spread), pod_affinity=tuple(affinity),
               pod_anti_affinity=tuple(anti), host_ports=tuple(host_ports),
               claims=tuple(ClaimRef(c) for c in claims), terminating=terminating,
               required_affinity=node_affinity, node_selector=dict(node_selector or {}),
               tolerations=tuple(tolerations))


def node(name: str, labels: Mapping[str, str] | None = None, taints: Iterable[Taint] = (), *,
         template: bool = False) -> Node:
    return Node(name, dict(labels or {}), tuple(taints), is_template=template)


def cluster(nodes: Iterable[Node], pods: Iterable[Pod] = (), storage: Storage | None = None,
            namespaces: Mapping[str, Mapping[str, str]] | None = None) -> Cluster:
    """Nodes with the pods bound to them (each pod's `node_name`)."""
    nodes = list(nodes)
    by_name = {n.name: n for n in nodes}
    for p in pods:
        assert p.node_name is not None
        by_name[p.node_name].pods.append(p)
    return Cluster(nodes, storage, namespaces)


def verdicts(c: Cluster, incoming: Pod, nodes: Iterable[Node] | None = None) -> dict[str, str | None]:
    """Node name -> the filters' reason (None: fits), as the upstream tests tabulate Filter's status."""
    check = c.check(incoming)
    return {n.name: check.reason(n) for n in (c.nodes.values() if nodes is None else nodes)}
