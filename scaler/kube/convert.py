"""Kubernetes JSON (as the API and `kubectl get -o json` give it) to the core's model.

Pure functions on dicts, shared by the watch-fed cache, `python -m scaler plan` and the
simulator's fixtures. Quantities go through `scaler.core.model.quantity` (checked against the
official client's parser in the tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scaler.core.model.errors import FieldError, render_path
from scaler.core.model.objects import (
    ClaimRef,
    HostPort,
    LabelSelector,
    Node,
    NodeCondition,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    PodResourceClaim,
    PreferredTerm,
    SelectorRequirement,
    SelectorTerm,
    SpreadConstraint,
    Taint,
    Toleration,
)
from scaler.core.model.resources import Resources, parse_resources
from scaler.core.scheduling.filters.labels import merge_label_keys
from scaler.core.scheduling.predicates import effective_request
from scaler.kube import validate

JSON = Mapping[str, Any]


class SnapshotError(ValueError):
    """An object that is not a valid pod / node; the message names the object and the field."""


# The API server guarantees these shapes; a hand-edited snapshot may not: refuse what the model cannot hold.
def _strings(raw: Any, where: str) -> dict[str, str]:
    """Labels, annotations, a node selector: strings to strings."""
    if raw is None:
        return {}
    if isinstance(raw, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        return dict(raw)
    raise FieldError(where, "expected a mapping of strings to strings")


def _objects(raw: Any, where: str) -> list[JSON]:
    if raw is None:
        return []
    if isinstance(raw, list | tuple) and all(isinstance(o, Mapping) for o in raw):
        return list(raw)
    raise FieldError(where, "expected a list of objects")


def _text(obj: JSON, key: str, where: str, default: str = "") -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise FieldError(f"{where}.{key}".lstrip("."), f"expected a string, got {type(value).__name__}")
    return value


def selector_term(raw: JSON, where: str) -> SelectorTerm:
    out = []
    for i, r in enumerate(_objects(raw.get("matchExpressions"), f"{where}.matchExpressions")):
        at = f"{where}.matchExpressions[{i}]"
        values = r.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise FieldError(f"{at}.values", "expected a list of strings")
        operator = _text(r, "operator", at)
        if operator not in _SELECTOR_OPERATORS:
            raise FieldError(f"{at}.operator", f"{operator!r} is not one of {', '.join(_SELECTOR_OPERATORS)}")
        validate.node_requirement(operator, values, at)
        out.append(SelectorRequirement(_text(r, "key", at), operator, tuple(values)))  # type: ignore[arg-type]
    for i, r in enumerate(_objects(raw.get("matchFields"), f"{where}.matchFields")):  # only metadata.name exists
        at = f"{where}.matchFields[{i}]"
        values = r.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise FieldError(f"{at}.values", "expected a list of strings")
        operator = _text(r, "operator", at)
        if operator not in ("In", "NotIn"):
            raise FieldError(f"{at}.operator", f"{operator!r} is not In or NotIn")
        out.append(SelectorRequirement(_text(r, "key", at), operator, tuple(values), field=True))  # type: ignore[arg-type]
    return tuple(out)


def _toleration(t: JSON, where: str) -> Toleration:
    operator = _text(t, "operator", where, "Equal")
    if operator not in ("Equal", "Exists"):
        raise FieldError(f"{where}.operator", f"{operator!r} is not Equal or Exists")
    effect = _text(t, "effect", where)
    if effect not in ("", *_EFFECTS):
        raise FieldError(f"{where}.effect", f"{effect!r} is not one of {', '.join(_EFFECTS)}")
    return Toleration(_text(t, "key", where), operator, _text(t, "value", where), effect)  # type: ignore[arg-type]


def _taint(t: JSON, where: str) -> Taint:
    key = _text(t, "key", where)
    validate.taint_key(key, where)
    effect = _text(t, "effect", where)
    if effect not in _EFFECTS:
        raise FieldError(f"{where}.effect", f"{effect!r} is not one of {', '.join(_EFFECTS)}")
    return Taint(key, _text(t, "value", where), effect)  # type: ignore[arg-type]


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _requests(container: JSON, where: str) -> Resources:
    res = container.get("resources") or {}
    if not isinstance(res, Mapping):
        raise FieldError(f"{where}.resources", "expected an object with requests and limits")
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
        containers = [_requests(c, f"spec.containers[{i}]")
                      for i, c in enumerate(_objects(spec.get("containers"), "spec.containers"))]
        init_list = list(enumerate(_objects(spec.get("initContainers"), "spec.initContainers")))
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
        owners = [o for o in _objects(meta.get("ownerReferences"), "metadata.ownerReferences") if o.get("controller")]
        aff = "spec.affinity.nodeAffinity"
        return Pod(
            name=_text(meta, "name", "metadata") or meta["name"],
            namespace=_text(meta, "namespace", "metadata", "default"),
            uid=_text(meta, "uid", "metadata"),
            requests=effective_request([*containers, *sidecars], inits, overhead),
            labels=_strings(meta.get("labels"), "metadata.labels"),
            annotations=_strings(meta.get("annotations"), "metadata.annotations"),
            node_selector=_strings(spec.get("nodeSelector"), "spec.nodeSelector"),
            required_affinity=tuple(
                selector_term(t, f"{aff}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]")
                for i, t in enumerate(_objects(required, f"{aff}.requiredDuringSchedulingIgnoredDuringExecution"))
            ),
            preferred_affinity=tuple(
                PreferredTerm(int(p["weight"]), selector_term(p["preference"], f"{aff}.preferred[{i}].preference"))
                for i, p in enumerate(_objects(preferred, f"{aff}.preferredDuringSchedulingIgnoredDuringExecution"))
            ),
            tolerations=tuple(_toleration(t, f"spec.tolerations[{i}]")
                              for i, t in enumerate(_objects(spec.get("tolerations"), "spec.tolerations"))),
            node_name=_text(spec, "nodeName", "spec") or None,
            owner_kind=_text(owners[0], "kind", "metadata.ownerReferences[]") if owners else None,
            priority=int(spec.get("priority") or 0),
            scheduler_name=_text(spec, "schedulerName", "spec") or "default-scheduler",
            phase=_text(obj.get("status") or {}, "phase", "status", "Pending"),
            created_at=timestamp(meta.get("creationTimestamp")),
            started_at=timestamp((obj.get("status") or {}).get("startTime")) or None,
            resource_claims=resource_claims(spec, obj.get("status") or {}),
            scheduling_group=_text(spec.get("schedulingGroup") or {}, "podGroupName", "spec.schedulingGroup") or None,
            unhealthy_devices=unhealthy_devices(obj.get("status") or {}),
            **_scheduling_fields(meta, spec),
        )
    except FieldError as err:
        raise SnapshotError(f"pod {name}: {render_path(err.path)}: {err.message}") from None
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"pod {name}: {err.__class__.__name__}: {err}") from None


# --- what kube-scheduler's pod-to-pod and volume filters read (scaler.core.scheduling.filters) ------------
def label_selector(raw: JSON | None) -> LabelSelector | None:
    """A metav1.LabelSelector; None for a null one (it selects nothing)."""
    if raw is None:
        return None
    reqs = [SelectorRequirement(k, "In", (str(v),)) for k, v in (raw.get("matchLabels") or {}).items()]
    reqs += [SelectorRequirement(r["key"], r["operator"], tuple(r.get("values") or ()))
             for r in raw.get("matchExpressions") or ()]
    return LabelSelector(tuple(reqs))


def _affinity_terms(raw: Any, meta: JSON, where: str) -> tuple[PodAffinityTerm, ...]:
    labels = meta.get("labels") or {}
    out = []
    for i, t in enumerate(_objects(raw, where)):
        validate.affinity_term(t, f"{where}[{i}]")
        ns_selector = label_selector(t.get("namespaceSelector"))
        namespaces = tuple(t.get("namespaces") or ())
        if not namespaces and ns_selector is None:
            namespaces = (meta.get("namespace", "default"),)
        selector = merge_label_keys(label_selector(t.get("labelSelector")), labels,
                                    tuple(t.get("matchLabelKeys") or ()), tuple(t.get("mismatchLabelKeys") or ()))
        out.append(PodAffinityTerm(selector, t["topologyKey"], namespaces, ns_selector))
    return tuple(out)


def _scheduling_fields(meta: JSON, spec: JSON) -> dict[str, Any]:
    labels = meta.get("labels") or {}
    spread = []
    for i, c in enumerate(_objects(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")):
        validate.spread_constraint(c, f"spec.topologySpreadConstraints[{i}]")
        if c.get("whenUnsatisfiable") != "DoNotSchedule":
            continue  # ScheduleAnyway only scores
        spread.append(SpreadConstraint(
            max_skew=int(c["maxSkew"]), topology_key=c["topologyKey"],
            selector=merge_label_keys(label_selector(c.get("labelSelector")), labels,
                                      tuple(c.get("matchLabelKeys") or ())),
            min_domains=int(c.get("minDomains") or 1),
            node_affinity_policy=c.get("nodeAffinityPolicy") or "Honor",
            node_taints_policy=c.get("nodeTaintsPolicy") or "Ignore",
        ))
    affinity = spec.get("affinity") or {}
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    ports = []
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    for c in [*(spec.get("containers") or ()), *sidecars]:
        for p in c.get("ports") or ():
            if int(p.get("hostPort") or 0) > 0:
                ports.append(HostPort(int(p["hostPort"]), p.get("protocol") or "TCP", p.get("hostIP") or "0.0.0.0"))  # noqa: S104
    claims = []
    for v in spec.get("volumes") or ():
        if v.get("persistentVolumeClaim"):
            claims.append(ClaimRef(v["persistentVolumeClaim"]["claimName"]))
        elif v.get("ephemeral"):
            claims.append(ClaimRef(f"{meta.get('name', '')}-{v['name']}", ephemeral=True))
    return {
        "spread": tuple(spread),
        "pod_affinity": _affinity_terms((affinity.get("podAffinity") or {}).get(required), meta,
                                        f"spec.affinity.podAffinity.{required}"),
        "pod_anti_affinity": _affinity_terms((affinity.get("podAntiAffinity") or {}).get(required), meta,
                                             f"spec.affinity.podAntiAffinity.{required}"),
        "host_ports": tuple(ports),
        "claims": tuple(claims),
        "terminating": bool(meta.get("deletionTimestamp")),
    }


def unhealthy_devices(status: JSON) -> int:
    """The devices the kubelet reports Unhealthy in the pod's containers' (and init containers')
    `allocatedResourcesStatus` (KEP-4680, beta in 1.36: device plugin resources by name, DRA ones as
    `claim:<claim>/<request>`), each resourceID once: containers sharing a claim report the same device."""
    bad = set()
    for field in ("initContainerStatuses", "containerStatuses"):
        for i, c in enumerate(_objects(status.get(field), f"status.{field}")):
            where = f"status.{field}[{i}].allocatedResourcesStatus"
            for j, entry in enumerate(_objects(c.get("allocatedResourcesStatus"), where)):
                name = _text(entry, "name", f"{where}[{j}]")
                for k, r in enumerate(_objects(entry.get("resources"), f"{where}[{j}].resources")):
                    if _text(r, "health", f"{where}[{j}].resources[{k}]") == "Unhealthy":
                        bad.add((name, _text(r, "resourceID", f"{where}[{j}].resources[{k}]")))
    return len(bad)


def resource_claims(spec: JSON, status: JSON) -> tuple[PodResourceClaim, ...]:
    """spec.resourceClaims (DRA), with the names of the claims made from templates (status)."""
    made = {_text(s, "name", "status.resourceClaimStatuses[]"): _text(s, "resourceClaimName", "status")
            for s in _objects(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses")}
    out = []
    for i, c in enumerate(_objects(spec.get("resourceClaims"), "spec.resourceClaims")):
        where = f"spec.resourceClaims[{i}]"
        name = _text(c, "name", where)
        claim, template = _text(c, "resourceClaimName", where), _text(c, "resourceClaimTemplateName", where)
        if not name or bool(claim) == bool(template):
            raise FieldError(where, "needs a name and exactly one of resourceClaimName, resourceClaimTemplateName")
        out.append(PodResourceClaim(name, claim, template, made.get(name, "")))
    return tuple(out)


# kube-scheduler 1.37's word for a Workload gang it found no room for: the pod-group cycle fails, then the
# DynamicResources plugin's PodGroupPostFilter errors ("not found": no pod of the group ran its DRA filter, so
# the plugin's group state was never written; pkg/scheduler/framework/plugins/dynamicresources, 1.37.2) and the
# pods get reason SchedulerError instead of Unschedulable. Seen on the real control plane (tests/controlplane).
_GANG_NO_ROOM = "PodGroupPostFilter"


def is_unschedulable(obj: JSON) -> bool:
    """Pending = condition PodScheduled False with reason Unschedulable (what cluster-autoscaler reads), or, for a
    pod of a Workload gang, the SchedulerError 1.37's scheduler gives a gang it found no room for."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled":
            if cond.get("status") != "False":
                return False
            if cond.get("reason") == "SchedulerError" and _GANG_NO_ROOM in str(cond.get("message") or ""):
                return bool((obj.get("spec") or {}).get("schedulingGroup"))
            return bool(cond.get("reason") == "Unschedulable")
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
        labels = _strings(meta.get("labels"), "metadata.labels")
        where = "status.conditions"
        conditions = tuple(NodeCondition(_text(c, "type", where), _text(c, "status", where),
                                         timestamp(c.get("lastTransitionTime")), _text(c, "reason", where))
                           for c in _objects(status.get("conditions"), where))
        ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
        return Node(
            name=_text(meta, "name", "metadata") or meta["name"],
            labels=labels,
            taints=tuple(_taint(t, f"spec.taints[{i}]")
                         for i, t in enumerate(_objects(spec.get("taints"), "spec.taints"))),
            allocatable=_allocatable(status.get("allocatable")),
            unschedulable=bool(spec.get("unschedulable")),
            ready=ready,
            provider_id=_text(spec, "providerID", "spec"),
            pool=labels.get(pool_label) if pool_label else None,
            created_at=timestamp(meta.get("creationTimestamp")),
            capacity=_allocatable(status.get("capacity"), "capacity"),
            conditions=conditions,
        )
    except FieldError as err:
        raise SnapshotError(f"node {meta.get('name', '?')}: {render_path(err.path)}: {err.message}") from None
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"node {meta.get('name', '?')}: {err.__class__.__name__}: {err}") from None


def _allocatable(raw: Any, field: str = "allocatable") -> Resources:
    try:
        return parse_resources(raw)
    except FieldError as err:
        raise FieldError(("status", field, *err.path), err.message) from None


def pdb_from_json(obj: JSON) -> PodDisruptionBudget:
    meta = obj.get("metadata") or {}
    name = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    try:
        spec = obj.get("spec") or {}
        selector = spec.get("selector") or {}
        allowed = (obj.get("status") or {}).get("disruptionsAllowed") or 0
        if not isinstance(allowed, int) or isinstance(allowed, bool):
            raise FieldError("status.disruptionsAllowed", "expected an integer")
        return PodDisruptionBudget(
            name=_text(meta, "name", "metadata", "?"),
            namespace=_text(meta, "namespace", "metadata", "default"),
            selector=_strings(selector.get("matchLabels"), "spec.selector.matchLabels"),
            disruptions_allowed=allowed,
            always_allow_unhealthy=_text(spec, "unhealthyPodEvictionPolicy", "spec") == "AlwaysAllow",
        )
    except FieldError as err:
        raise SnapshotError(f"poddisruptionbudget {name}: {render_path(err.path)}: {err.message}") from None
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"poddisruptionbudget {name}: {err.__class__.__name__}: {err}") from None
