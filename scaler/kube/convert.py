"""Kubernetes JSON (as the API and `kubectl get -o json` give it) to the core's model.

Pure functions on dicts, shared by the watch-fed cache, `python -m scaler plan` and the
simulator's fixtures. Quantities go through `scaler.core.quantity` (checked against the
official client's parser in the tests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scaler.core.model import (
    Node,
    Pod,
    PodDisruptionBudget,
    PreferredTerm,
    SelectorRequirement,
    SelectorTerm,
    Taint,
    Toleration,
)
from scaler.core.predicates import TERMINATED_PHASES, effective_request
from scaler.core.resources import Resources, parse_resources

JSON = Mapping[str, Any]


class SnapshotError(ValueError):
    """An object that is not a valid pod / node; the message names the object and the field."""


def _term(raw: JSON) -> SelectorTerm:
    return tuple(
        SelectorRequirement(r["key"], r["operator"], tuple(r.get("values") or ()))
        for r in raw.get("matchExpressions") or ()
    )


def _requests(container: JSON) -> Resources:
    res = container.get("resources") or {}
    requests = dict(res.get("requests") or {})
    # A limit without a request defaults the request to the limit (API server defaulting).
    for name, value in (res.get("limits") or {}).items():
        requests.setdefault(name, value)
    return parse_resources(requests)


def pod_from_json(obj: JSON) -> Pod:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    name = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    try:
        containers = [_requests(c) for c in spec.get("containers") or ()]
        sidecars = [_requests(c) for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
        inits = [_requests(c) for c in spec.get("initContainers") or () if c.get("restartPolicy") != "Always"]
        overhead = parse_resources(spec.get("overhead"))
        affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
        preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        owners = [o for o in meta.get("ownerReferences") or () if o.get("controller")]
        return Pod(
            name=meta["name"],
            namespace=meta.get("namespace", "default"),
            uid=meta.get("uid", ""),
            requests=effective_request([*containers, *sidecars], inits, overhead),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            node_selector=dict(spec.get("nodeSelector") or {}),
            required_affinity=tuple(_term(t) for t in required or ()),
            preferred_affinity=tuple(PreferredTerm(int(p["weight"]), _term(p["preference"])) for p in preferred),
            tolerations=tuple(
                Toleration(t.get("key", ""), t.get("operator", "Equal"), t.get("value", ""), t.get("effect", ""))
                for t in spec.get("tolerations") or ()
            ),
            node_name=spec.get("nodeName") or None,
            owner_kind=owners[0].get("kind") if owners else None,
            priority=int(spec.get("priority") or 0),
            scheduler_name=spec.get("schedulerName") or "default-scheduler",
            phase=(obj.get("status") or {}).get("phase", "Pending"),
            created_at=timestamp(meta.get("creationTimestamp")),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"pod {name}: {err.__class__.__name__}: {err}") from None


def is_unschedulable(obj: JSON) -> bool:
    """Pending = condition PodScheduled False with reason Unschedulable (what cluster-autoscaler reads)."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return bool(cond.get("status") == "False" and cond.get("reason") == "Unschedulable")
    return False


def timestamp(text: str | None) -> float:
    """An RFC 3339 timestamp of the API ("2026-11-22T03:00:00Z") as epoch seconds; 0 when absent or bad."""
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0


def node_from_json(obj: JSON, pool_label: str | None = None) -> Node:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    try:
        labels = dict(meta.get("labels") or {})
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
        return Node(
            name=meta["name"],
            labels=labels,
            taints=tuple(Taint(t["key"], t.get("value", ""), t["effect"]) for t in spec.get("taints") or ()),
            allocatable=parse_resources(status.get("allocatable")),
            unschedulable=bool(spec.get("unschedulable")),
            ready=ready,
            provider_id=spec.get("providerID", ""),
            pool=labels.get(pool_label) if pool_label else None,
            created_at=timestamp(meta.get("creationTimestamp")),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"node {meta.get('name', '?')}: {err.__class__.__name__}: {err}") from None


def pdb_from_json(obj: JSON) -> PodDisruptionBudget:
    meta = obj.get("metadata") or {}
    selector = (obj.get("spec") or {}).get("selector") or {}
    return PodDisruptionBudget(
        name=meta.get("name", "?"),
        namespace=meta.get("namespace", "default"),
        selector=dict(selector.get("matchLabels") or {}),
        disruptions_allowed=int((obj.get("status") or {}).get("disruptionsAllowed") or 0),
    )


@dataclass(slots=True)
class ClusterView:
    """Nodes with the pods bound to them, and the pending pods, as the planner's Snapshot takes them."""

    pending: list[Pod] = field(default_factory=list)  # PodScheduled=False, reason Unschedulable
    nodes: dict[str, Node] = field(default_factory=dict)
    waiting: int = 0  # pods with no node the scheduler has not marked Unschedulable (yet)
    lost: list[Pod] = field(default_factory=list)  # pods bound to a node that is not in the view


def cluster_view(nodes: Iterable[JSON], pods: Iterable[JSON], pool_label: str | None = None,
                 skip: Callable[[SnapshotError], None] | None = None) -> ClusterView:
    """The one conversion of the API's nodes and pods into the core's view (the watch-fed cache and
    `python -m scaler plan` both use it). Terminated pods hold nothing and are left out. An object that
    does not convert raises SnapshotError, or, with `skip`, is handed to it and left out."""
    out = ClusterView()
    for obj in nodes:
        try:
            node = node_from_json(obj, pool_label)
        except SnapshotError as err:
            if skip is None:
                raise
            skip(err)
            continue
        out.nodes[node.name] = node
    for obj in pods:
        if (obj.get("status") or {}).get("phase") in TERMINATED_PHASES:
            continue
        try:
            pod = pod_from_json(obj)
        except SnapshotError as err:
            if skip is None:
                raise
            skip(err)
            continue
        if pod.node_name:
            host = out.nodes.get(pod.node_name)
            if host is None:
                out.lost.append(pod)
            else:
                host.pods.append(pod)
        elif is_unschedulable(obj):
            out.pending.append(pod)
        else:
            out.waiting += 1
    return out
