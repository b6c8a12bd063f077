"""Scheduling predicates: the filters kube-scheduler applies, as pure functions.

Semantics follow the scheduler's plugins: NodeResourcesFit, NodeAffinity (nodeSelector and
requiredDuringSchedulingIgnoredDuringExecution), TaintToleration, NodeUnschedulable. Reasons
are worded as the scheduler words them in a FailedScheduling event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod, Taint, Toleration
from scaler.core.model.resources import Resources, insufficient
from scaler.core.model.selectors import term_matches
from scaler.core.model.workload import active

REASON_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"


def effective_request(
    containers: Sequence[Mapping[str, int]],
    init_containers: Sequence[Mapping[str, int]] = (),
    overhead: Mapping[str, int] | None = None,
) -> Resources:
    """The pod's request as the scheduler computes it.

    max(sum of containers, each init container) + overhead, plus one `pods` slot. Sidecars
    (init containers with restartPolicy Always) are passed in `containers`: they run beside them.
    """
    out: Resources = {}
    for c in containers:
        for name, value in c.items():
            out[name] = out.get(name, 0) + value
    for init in init_containers:
        for name, value in init.items():
            if value > out.get(name, 0):
                out[name] = value
    for name, value in (overhead or {}).items():
        out[name] = out.get(name, 0) + value
    out[keys.RES_PODS] = 1
    return out


def matches_node_affinity(pod: Pod, labels: Mapping[str, str], name: str | None = None) -> bool:
    """nodeSelector and required node affinity; `name` is the node's, for matchFields (without it a
    term that has matchFields does not match: callers that group nodes by labels cannot tell)."""
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    if pod.required_affinity:
        return any(term_matches(t, labels, name) for t in pod.required_affinity)
    return True


def has_field_affinity(pod: Pod) -> bool:
    """The pod's required node affinity names nodes by matchFields: decided per node, not per label set."""
    return bool(pod.required_affinity) and any(r.field for term in pod.required_affinity for r in term)


def toleration_matches(tol: Toleration, taint: Taint) -> bool:
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.operator == "Exists":
        return not tol.key or tol.key == taint.key
    return tol.key == taint.key and tol.value == taint.value


def untolerated_taint(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first NoSchedule / NoExecute taint no toleration matches (PreferNoSchedule only scores)."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(toleration_matches(t, taint) for t in tols):
            return taint
    return None


def free_resources(node: Node) -> Resources:
    """Allocatable minus the requests of the pods on the node that have not terminated."""
    free = dict(node.allocatable)
    for pod in node.pods:
        if not active(pod):
            continue
        for name, value in pod.requests.items():
            free[name] = free.get(name, 0) - value
    return free


def static_reason(pod: Pod, node: Node) -> str | None:
    """Why the pod can never go on this node, whatever runs there; None if it may."""
    if node.unschedulable and not any(
        toleration_matches(t, Taint(keys.TAINT_UNSCHEDULABLE, "", "NoSchedule")) for t in pod.tolerations
    ):
        return REASON_UNSCHEDULABLE
    if not matches_node_affinity(pod, node.labels, node.name):
        return REASON_SELECTOR
    taint = untolerated_taint(pod.tolerations, node.taints)
    return None if taint is None else taint_reason(taint)


def taint_reason(taint: Taint) -> str:
    """As kube-scheduler's TaintToleration plugin words it (an empty value prints as "{key: }")."""
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def resource_reason(request: Mapping[str, int], free: Mapping[str, int]) -> str | None:
    short = insufficient(request, free)
    if not short:
        return None
    return ", ".join("Too many pods" if n == keys.RES_PODS else f"Insufficient {n}" for n in sorted(short))


def fit_reason(pod: Pod, node: Node, free: Mapping[str, int] | None = None) -> str | None:
    """Why the pod does not fit the node now; None when it fits."""
    return static_reason(pod, node) or resource_reason(pod.requests, free_resources(node) if free is None else free)


def fits(pod: Pod, node: Node, free: Mapping[str, int] | None = None) -> bool:
    return fit_reason(pod, node, free) is None
