"""CapacityBuffers (autoscaling.x-k8s.io/v1beta1) from the API's JSON, with the PodTemplates (or workloads) they
name, and their status back to JSON. No SDK: `plan` / `explain` read buffers from a kubectl List with it too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from scaler.core.model import keys
from scaler.core.model.buffers import SCALABLE_KINDS, BufferStatus, CapacityBuffer, ScalableRef
from scaler.core.model.conditions import Condition
from scaler.core.model.errors import FieldError
from scaler.core.model.objects import Pod
from scaler.core.model.resources import parse_resources
from scaler.kube.convert import SnapshotError, pod_from_json, timestamp

GROUP, VERSION, PLURAL = keys.API_GROUP_AUTOSCALING, "v1beta1", "capacitybuffers"
JSON = dict[str, Any]
Scalables = Callable[[str, str, str], JSON | None]  # (kind, namespace, name) -> the object, or None


def _int(spec: JSON, name: str, where: str) -> int | None:
    value = spec.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise SnapshotError(f"{where}: spec.{name}: expected an integer, got {value!r}")
    return value


def _ref(spec: JSON, name: str, where: str) -> JSON | None:
    ref = spec.get(name)
    if ref is None:
        return None
    if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or not ref["name"]:
        raise SnapshotError(f"{where}: spec.{name}.name: expected a name")
    return ref


def template_pod(body: JSON, namespace: str, name: str) -> Pod:
    meta = {**(body.get("metadata") or {}), "namespace": namespace, "name": name}
    return pod_from_json({"metadata": meta, "spec": body.get("spec") or {}})


def _conditions(status: JSON) -> dict[str, Condition]:
    out = {}
    for c in status.get("conditions") or ():
        if isinstance(c, dict) and c.get("type"):
            out[str(c["type"])] = Condition(str(c["type"]), str(c.get("status", "")), str(c.get("reason", "")),
                                            str(c.get("message", "")), timestamp(c.get("lastTransitionTime")))
    return out


def _status(raw: JSON) -> BufferStatus | None:
    if not isinstance(raw, dict) or not raw:
        return None
    ref = raw.get("podTemplateRef") or {}
    return BufferStatus(raw.get("replicas"), ref.get("name") if isinstance(ref, dict) else None,
                        raw.get("podTemplateGeneration"), str(raw.get("provisioningStrategy") or
                                                              keys.BUFFER_STRATEGY_ACTIVE), _conditions(raw))


def buffer_from_json(obj: JSON, templates: Mapping[str, JSON], scalables: Scalables) -> CapacityBuffer:
    """A CapacityBuffer with what its references resolve to (`templates`: "namespace/name" -> PodTemplate).
    A reference that does not resolve is the buffer's `problem` (the core answers it in the status); a buffer
    not shaped as the CRD says raises SnapshotError (skipped, with a Warning Event)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec")
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "?")
    where = f"capacitybuffer {ns}/{name}"
    if not isinstance(spec, dict):
        raise SnapshotError(f"{where}: spec: expected an object")
    template_ref, scalable_ref = _ref(spec, "podTemplateRef", where), _ref(spec, "scalableRef", where)
    try:
        limits = parse_resources(spec["limits"]) if spec.get("limits") is not None else None
    except FieldError as err:
        raise SnapshotError(f"{where}: spec.limits.{err}") from None
    buf = CapacityBuffer(
        namespace=ns, name=name, uid=str(meta.get("uid") or ""), replicas=_int(spec, "replicas", where),
        percentage=_int(spec, "percentage", where), limits=limits,
        strategy=str(spec.get("provisioningStrategy") or keys.BUFFER_STRATEGY_ACTIVE),
        template_ref=template_ref["name"] if template_ref else None, status=_status(obj.get("status") or {}),
        scalable=ScalableRef(str(scalable_ref.get("kind") or ""), scalable_ref["name"],
                             str(scalable_ref.get("apiGroup") or "")) if scalable_ref else None)
    try:
        _resolve(buf, templates, scalables)
    except (SnapshotError, ValueError) as err:
        buf.problem = str(err)
    return buf


def _resolve(buf: CapacityBuffer, templates: Mapping[str, JSON], scalables: Scalables) -> None:
    if buf.template_ref is not None:
        found = templates.get(f"{buf.namespace}/{buf.template_ref}")
        if found is not None:
            buf.template = template_pod(found.get("template") or {}, buf.namespace, buf.template_ref)
            buf.template_generation = (found.get("metadata") or {}).get("generation")
        return
    ref = buf.scalable
    if ref is None:
        return
    if ref.kind not in SCALABLE_KINDS or ref.api_group not in ("apps", ""):
        buf.problem = f"spec.scalableRef: kind {ref.api_group or 'core'}/{ref.kind} is not read by gpuburst " \
                      f"(apps/{', apps/'.join(SCALABLE_KINDS)})"
        return
    found = scalables(ref.kind, buf.namespace, ref.name)
    if found is not None:
        spec = found.get("spec") or {}
        buf.template = template_pod(spec.get("template") or {}, buf.namespace, ref.name)
        buf.scalable_replicas = int(spec.get("replicas", 1) or 0)


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Every field of the status gpuburst writes (status_json leaves out those it has no value for).
STATUS_FIELDS = ("provisioningStrategy", "conditions", "replicas", "podTemplateRef", "podTemplateGeneration")


def status_json(status: BufferStatus) -> JSON:
    out: JSON = {"provisioningStrategy": status.strategy, "conditions": [
        {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message[:32768],
         "lastTransitionTime": _time(c.at)} for c in sorted(status.conditions.values(), key=lambda c: c.type)]}
    if status.replicas is not None:
        out["replicas"] = status.replicas
    if status.template_ref is not None:
        out["podTemplateRef"] = {"name": status.template_ref}
    if status.template_generation is not None:
        out["podTemplateGeneration"] = status.template_generation
    return out


