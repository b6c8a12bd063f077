"""The cluster as one kubectl-style List: every object `python -m scaler plan | explain` reads, from the API.

What kube-scheduler's filters and the planner read, as the running scaler watches it (scaler.kube.cache):
Nodes and Pods; the volume and namespaceSelector filters' PersistentVolumeClaims, PersistentVolumes,
StorageClasses, CSINodes and Namespaces; the DynamicResources filter's DeviceClasses, ResourceClaims,
ResourceClaimTemplates and ResourceSlices; CapacityBuffers with the PodTemplates and the Deployments,
ReplicaSets or StatefulSets they name; the gangs' PodGroups of each API that serves them (Workload API,
coscheduling, Volcano). Each item carries its kind and apiVersion (a list's items do not).
APIs the server does not serve (DRA before 1.34, the CapacityBuffer CRD) give no objects and a note.
Only list and get, with the scaler's own read permissions.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as TransportError

from scaler.kube import convert_podgroup as podgroups
from scaler.kube.buffers import Scalable
from scaler.kube.client import TIMEOUT
from scaler.kube.convert import SnapshotError
from scaler.kube.convert_buffers import GROUP, PLURAL, VERSION, buffer_from_json
from scaler.ports import KubeError

JSON = dict[str, Any]
PAGE = 500
Lister = Callable[..., Any]


def listers(api: client.ApiClient) -> dict[str, tuple[tuple[str, Lister, bool], ...]]:
    """kind -> each (apiVersion, its list call, optional: a server may not serve it) it is read from: one, but
    for PodGroups (the Workload API's in each version, scheduler-plugins' and Volcano's)."""
    core, storage, dra = client.CoreV1Api(api), client.StorageV1Api(api), client.ResourceV1Api(api)
    custom = client.CustomObjectsApi(api)
    one: dict[str, tuple[str, Lister, bool]] = {
        "Node": ("v1", core.list_node, False),
        "Pod": ("v1", core.list_pod_for_all_namespaces, False),
        "PersistentVolumeClaim": ("v1", core.list_persistent_volume_claim_for_all_namespaces, False),
        "PersistentVolume": ("v1", core.list_persistent_volume, False),
        "StorageClass": ("storage.k8s.io/v1", storage.list_storage_class, False),
        "CSINode": ("storage.k8s.io/v1", storage.list_csi_node, False),
        "Namespace": ("v1", core.list_namespace, False),
        "DeviceClass": ("resource.k8s.io/v1", dra.list_device_class, True),
        "ResourceClaim": ("resource.k8s.io/v1", dra.list_resource_claim_for_all_namespaces, True),
        "ResourceClaimTemplate": ("resource.k8s.io/v1", dra.list_resource_claim_template_for_all_namespaces, True),
        "ResourceSlice": ("resource.k8s.io/v1", dra.list_resource_slice, True),
        "DeviceTaintRule": ("resource.k8s.io/v1", dra.list_device_taint_rule, True),
        "CapacityBuffer": (f"{GROUP}/{VERSION}",
                           functools.partial(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL), True),
        "PodTemplate": ("v1", core.list_pod_template_for_all_namespaces, False),
    }
    return {**{kind: (source,) for kind, source in one.items()},
            "PodGroup": tuple((f"{group}/{version}", functools.partial(
                custom.list_cluster_custom_object, group, version, podgroups.PLURAL), True)
                for group, version in podgroups.SOURCES)}


def _list(kind: str, call: Lister) -> list[JSON]:
    items: list[JSON] = []
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": PAGE, "_preload_content": False, "_request_timeout": TIMEOUT}
        if token:
            kwargs["_continue"] = token
        try:
            page = json.loads(call(**kwargs).data)
        except (TransportError, ValueError) as err:
            raise KubeError(f"list {kind}: {err}") from err
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items


def read_cluster(api: client.ApiClient) -> tuple[JSON, list[str]]:
    """The List, and notes on what the API server does not serve."""
    out: list[JSON] = []
    notes: list[str] = []
    for kind, sources in listers(api).items():
        for api_version, call, optional in sources:
            what = kind if len(sources) == 1 else f"{kind} ({api_version})"
            try:
                found = _list(what, call)
            except ApiException as err:
                if err.status == 404 and optional:
                    notes.append(f"{what}: not served by this API server; none in the snapshot")
                    continue
                raise KubeError(f"list {what}: {err.status} {err.reason}") from err
            out += [{**obj, "kind": kind, "apiVersion": api_version} for obj in found]
    out += _scalables(api, out)
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": out}, notes


def _scalables(api: client.ApiClient, items: list[JSON]) -> list[JSON]:
    """The Deployments, ReplicaSets and StatefulSets the List's CapacityBuffers name (read as the scaler
    reads them: get, by the converter's own lookup)."""
    read = Scalable(api)
    found: dict[tuple[str, str, str], JSON] = {}

    def lookup(kind: str, namespace: str, name: str) -> JSON | None:
        obj = read(kind, namespace, name)
        if obj is not None:
            found[(kind, namespace, name)] = {**obj, "kind": kind, "apiVersion": "apps/v1"}
        return obj

    templates = {f"{o['metadata'].get('namespace') or 'default'}/{o['metadata']['name']}": o
                 for o in items if o["kind"] == "PodTemplate"}
    for obj in items:
        if obj["kind"] == "CapacityBuffer":
            with contextlib.suppress(SnapshotError):  # written as it is: `plan` names what is wrong with it
                buffer_from_json(obj, templates, lookup)
    return list(found.values())
