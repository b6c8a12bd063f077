"""NodeName, node affinity's matchFields, and NodePorts, as kube-scheduler filters."""

from __future__ import annotations

from collections.abc import Iterable

from scaler.core.model.objects import HostPort, Node, Pod
from scaler.core.scheduling.filters import reasons
from scaler.core.scheduling.predicates import REASON_SELECTOR, has_field_affinity, matches_node_affinity

ANY_IP = "0.0.0.0"  # noqa: S104 -- hostIP "bind to every address"


def node_name_reason(pod: Pod, node: Node) -> str | None:
    """NodeName: a pod that names its node (spec.nodeName, still pending) fits only that node."""
    if pod.phase == "Pending" and pod.node_name and pod.node_name != node.name:
        return reasons.NODE_NAME
    return None


def field_affinity_reason(pod: Pod, node: Node) -> str | None:
    """NodeAffinity with matchFields on metadata.name: the node's name decides (label-only callers
    cannot tell, see predicates.matches_node_affinity)."""
    if has_field_affinity(pod) and not matches_node_affinity(pod, node.labels, node.name):
        return REASON_SELECTOR
    return None


def conflicts(want: HostPort, used: Iterable[HostPort]) -> bool:
    """A hostPort clashes with a used one on the same protocol and port when either binds every
    address (0.0.0.0) or both bind the same one."""
    if want.port <= 0:
        return False
    for u in used:
        if u.port == want.port and u.protocol == want.protocol and (
                want.ip == ANY_IP or u.ip in (ANY_IP, want.ip)):
            return True
    return False


def ports_reason(pod: Pod, used: Iterable[HostPort]) -> str | None:
    """NodePorts: `used` are the host ports of the pods already on the node."""
    used = list(used)
    if not used:
        return None
    for hp in pod.host_ports:
        if conflicts(hp, used):
            return reasons.PORTS
    return None
