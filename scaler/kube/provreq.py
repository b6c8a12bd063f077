"""ProvisioningRequests (autoscaling.x-k8s.io/v1) in the cluster: read them with their PodTemplates, write
their status conditions. The deciding is the core's (scaler.core.planning.provreq).

Calls (scaler.permissions): provisioningrequests list, provisioningrequests/status patch, podtemplates get.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as TransportError

from scaler.core.model import keys
from scaler.core.model.conditions import Condition
from scaler.core.model.provreq import PodSet, ProvisioningRequest
from scaler.kube.client import MERGE_PATCH, TIMEOUT, read_or_none
from scaler.kube.convert import SnapshotError, pod_from_json, timestamp
from scaler.ports import KubeError, Skipped

log = logging.getLogger(__name__)
GROUP, VERSION, PLURAL = keys.API_GROUP_AUTOSCALING, "v1", "provisioningrequests"
JSON = dict[str, Any]


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def template_refs(obj: JSON) -> list[str]:
    """The PodTemplate names of a request's pod sets; SnapshotError (naming the request and the field) when
    the request is not shaped as the CRD says: such a request is skipped, not failed."""
    meta = obj.get("metadata") or {}
    where = f"provisioningrequest {meta.get('namespace') or 'default'}/{meta.get('name') or '?'}"
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise SnapshotError(f"{where}: spec: expected an object")
    if not isinstance(spec.get("parameters") or {}, dict):
        raise SnapshotError(f"{where}: spec.parameters: expected a mapping of strings to strings")
    pod_sets = spec.get("podSets") or []
    if not isinstance(pod_sets, list):
        raise SnapshotError(f"{where}: spec.podSets: expected a list of objects")
    refs = []
    for i, pod_set in enumerate(pod_sets):
        if not isinstance(pod_set, dict):
            raise SnapshotError(f"{where}: spec.podSets[{i}]: expected an object")
        count = pod_set.get("count", 0)
        if not isinstance(count, int) or isinstance(count, bool):
            raise SnapshotError(f"{where}: spec.podSets[{i}].count: expected an integer, got {count!r}")
        ref = pod_set.get("podTemplateRef") or {}
        if not isinstance(ref, dict) or not isinstance(ref.get("name") or "", str):
            raise SnapshotError(f"{where}: spec.podSets[{i}].podTemplateRef.name: expected a string")
        refs.append(str(ref.get("name") or ""))
    return refs


def request_from_json(obj: JSON, templates: dict[str, JSON | None]) -> ProvisioningRequest:
    """A ProvisioningRequest and the PodTemplates it names (`templates`: "namespace/name" -> the object, or
    None when it does not exist). A request whose PodTemplate cannot be read gets `problem` set; one not
    shaped as the CRD says raises SnapshotError (`template_refs`)."""
    template_refs(obj)
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "?")
    conditions = {}
    for c in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type"):
            conditions[str(c["type"])] = Condition(str(c["type"]), str(c.get("status", "")), str(c.get("reason", "")),
                                                   str(c.get("message", "")), timestamp(c.get("lastTransitionTime")))
    parameters = {str(k): str(v) for k, v in (spec.get("parameters") or {}).items()}
    req = ProvisioningRequest(namespace=ns, name=name, class_name=str(spec.get("provisioningClassName") or ""),
                              pod_sets=[], parameters=parameters, created_at=timestamp(meta.get("creationTimestamp")),
                              conditions=conditions)
    for i, pod_set in enumerate(spec.get("podSets") or ()):
        ref = str(((pod_set or {}).get("podTemplateRef") or {}).get("name") or "")
        template = templates.get(f"{ns}/{ref}")
        if template is None:
            req.problem = f"spec.podSets[{i}]: PodTemplate {ns}/{ref} not found"
            return req
        body = template.get("template") or {}
        tmeta = {**(body.get("metadata") or {}), "namespace": ns, "name": ref}
        try:
            pod = pod_from_json({"metadata": tmeta, "spec": body.get("spec") or {}})
        except (SnapshotError, ValueError) as err:
            req.problem = f"spec.podSets[{i}]: PodTemplate {ns}/{ref}: {err}"
            return req
        req.pod_sets.append(PodSet(pod, int(pod_set.get("count") or 0)))
    return req


class ProvisioningRequests:
    def __init__(self, api: client.ApiClient, timeout: tuple[float, float] = TIMEOUT) -> None:
        self.timeout = timeout  # (connect, read) seconds of every call
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.skipped: list[Skipped] = []  # the requests the last read() left out, and why

    def read(self) -> list[ProvisioningRequest]:
        """Every request in the cluster (an API without the CRD has none)."""
        try:
            listed = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, _request_timeout=self.timeout)
        except ApiException as err:
            if err.status == 404:
                return []
            raise KubeError(f"list {PLURAL}: {err.status} {err.reason}") from err
        except TransportError as err:
            raise KubeError(f"list {PLURAL}: {err}") from err
        items: list[JSON] = list((listed if isinstance(listed, dict) else {}).get("items") or ())
        templates: dict[str, JSON | None] = {}
        self.skipped = []
        out = []
        for obj in items:
            meta = obj.get("metadata") or {}
            ns = meta.get("namespace") or "default"
            try:
                for ref in template_refs(obj):
                    if f"{ns}/{ref}" not in templates:
                        templates[f"{ns}/{ref}"] = self._template(ns, ref)
                out.append(request_from_json(obj, templates))
            except SnapshotError as err:  # one malformed request never stops the others, nor the pass
                log.warning("skipping %s", err)
                self.skipped.append(Skipped("ProvisioningRequest", str(ns), str(meta.get("name") or "?"),
                                            str(meta.get("uid") or ""), str(err)))
        return out

    def _template(self, ns: str, name: str) -> JSON | None:
        return read_or_none(self.core.read_namespaced_pod_template, self.core.api_client,
                            "podtemplate", ns, name, self.timeout)

    def write(self, req: ProvisioningRequest, conditions: dict[str, Condition]) -> None:
        """Set the request's conditions (the status subresource, a merge patch of the whole list)."""
        if conditions == req.conditions:
            return
        body = {"status": {"conditions": [
            {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message[:32768],
             "lastTransitionTime": _time(c.at)} for c in sorted(conditions.values(), key=lambda c: c.type)]}}
        try:
            self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, req.namespace, PLURAL, req.name, body,
                                                              _request_timeout=self.timeout, _content_type=MERGE_PATCH)
        except ApiException as err:
            if err.status == 404:
                return  # deleted meanwhile
            raise KubeError(f"patch {PLURAL}/status {req.key}: {err.status} {err.reason}") from err
        except TransportError as err:
            raise KubeError(f"patch {PLURAL}/status {req.key}: {err}") from err
        req.conditions = dict(conditions)
        log.info("provisioning request %s: %s", req.key,
                 ", ".join(f"{c.type}={c.status} ({c.reason})" for c in sorted(conditions.values(),
                                                                                 key=lambda c: c.type)))
