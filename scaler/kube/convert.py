"""Kubernetes JSON (as the API and `kubectl get -o json` give it) to the core's model.

Pure functions on dicts, shared by the watch-fed cache, `python -m scaler plan` and the
simulator's fixtures. Quantities go through `scaler.core.quantity` (checked against the
official client's parser in the tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scaler.core.errors import FieldError, render_path
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
from scaler.core.predicates import effective_request
from scaler.core.resources import Resources, parse_resources

JSON = Mapping[str, Any]


class SnapshotError(ValueError):
    """An object that is not a valid pod / node; the message names the object and the field."""


def _term(raw: JSON) -> SelectorTerm:
    return tuple(
        SelectorRequirement(r["key"], r["operator"], tuple(r.get("values") or ()))
        for r in raw.get("matchExpressions") or ()
    )


def _requests(container: JSON, where: str) -> Resources:
    res = container.get("resources") or {}
    for part in ("limits", "requests"):  # a limit without a request defaults the request to the limit
        try:
            parse_resources(res.get(part))
        except FieldError as err:
            raise FieldError(f"{where}.resources.{render_path((part, *err.path))}", err.message) from None
    requests = dict(res.get("requests") or {})
    for name, value in (res.get("limits") or {}).items():
        requests.setdefault(name, value)
    return parse_resources(requests)


def pod_from_json(obj: JSON) -> Pod:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    name = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    try:
        containers = [_requests(c, f"spec.containers[{i}]") for i, c in enumerate(spec.get("containers") or ())]
        init_list = list(enumerate(spec.get("initContainers") or ()))
        sidecars = [_requests(c, f"spec.initContainers[{i}]") for i, c in init_list
                    if c.get("restartPolicy") == "Always"]
        inits = [_requests(c, f"spec.initContainers[{i}]") for i, c in init_list if c.get("restartPolicy") != "Always"]
        try:
            overhead = parse_resources(spec.get("overhead"))
        except FieldError as err:
            raise FieldError(render_path(("spec", "overhead", *err.path)), err.message) from None
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
    except FieldError as err:
        raise SnapshotError(f"pod {name}: {render_path(err.path)}: {err.message}") from None
    except (AttributeError, KeyError, TypeError, ValueError) as err:
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
            allocatable=_allocatable(status.get("allocatable")),
            unschedulable=bool(spec.get("unschedulable")),
            ready=ready,
            provider_id=spec.get("providerID", ""),
            pool=labels.get(pool_label) if pool_label else None,
            created_at=timestamp(meta.get("creationTimestamp")),
        )
    except FieldError as err:
        raise SnapshotError(f"node {meta.get('name', '?')}: {render_path(err.path)}: {err.message}") from None
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"node {meta.get('name', '?')}: {err.__class__.__name__}: {err}") from None


def _allocatable(raw: Any) -> Resources:
    try:
        return parse_resources(raw)
    except FieldError as err:
        raise FieldError(("status", "allocatable", *err.path), err.message) from None


def pdb_from_json(obj: JSON) -> PodDisruptionBudget:
    meta = obj.get("metadata") or {}
    selector = (obj.get("spec") or {}).get("selector") or {}
    return PodDisruptionBudget(
        name=meta.get("name", "?"),
        namespace=meta.get("namespace", "default"),
        selector=dict(selector.get("matchLabels") or {}),
        disruptions_allowed=int((obj.get("status") or {}).get("disruptionsAllowed") or 0),
    )
