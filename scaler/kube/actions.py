"""What the scaler does to the cluster (`scaler.ports.Kube`): cordon, evict, uncordon, Events, the
ProvisioningRequests' conditions, the status ConfigMap. Leader election on the Lease is scaler.kube.leader
(Leader, importable from here too).

Every call is one the RBAC rules in scaler.permissions allow, and nothing more.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as TransportError

from scaler.core.config.runtime import Runtime
from scaler.core.model import keys
from scaler.core.model.buffers import BufferStatus, CapacityBuffer
from scaler.core.model.conditions import Condition
from scaler.core.model.provreq import ProvisioningRequest
from scaler.kube.buffers import write_status as write_buffer_status
from scaler.kube.client import MERGE_PATCH, TIMEOUT
from scaler.kube.leader import Leader as Leader  # noqa: PLC0414 - re-exported: the loop and tests take it here
from scaler.kube.provreq import VERSION as PROVREQ_VERSION
from scaler.kube.provreq import ProvisioningRequests
from scaler.permissions import STATUS_CONFIGMAP
from scaler.ports import EvictResult, KubeError, ObjectRef

log = logging.getLogger(__name__)
COMPONENT = "gpuburst-scaler"


# The apiVersion of the kinds an Event of ours is about, where it is not the core "v1".
API_VERSIONS = {"Lease": "coordination.k8s.io/v1", "PodDisruptionBudget": "policy/v1",
                "StorageClass": "storage.k8s.io/v1", "CSINode": "storage.k8s.io/v1",
                "ProvisioningRequest": f"{keys.API_GROUP_AUTOSCALING}/{PROVREQ_VERSION}"}


def _now() -> datetime:
    return datetime.now(UTC)


class KubeActions:
    """`scaler.ports.Kube` on a live cluster.

    `nodes` looks a node up by name as the watch-fed cache has it (`ClusterCache.raw_node`): a cordon
    is computed from that copy and carries its resourceVersion. `before_change` runs before every
    change to a node, a pod or a request's status and raises to stop it (the leader lease's check)."""

    def __init__(self, api: client.ApiClient, namespace: str, *, event_interval: float = Runtime().event_interval,
                 nodes: Callable[[str], dict[str, Any] | None] = lambda _: None,
                 before_change: Callable[[], None] = lambda: None,
                 timeout: tuple[float, float] = TIMEOUT) -> None:
        self.core = client.CoreV1Api(api)
        self.timeout = timeout  # (connect, read) seconds of every call
        self.requests = ProvisioningRequests(api, timeout)
        self.custom = client.CustomObjectsApi(api)
        self.nodes = nodes
        self.namespace = namespace
        self._event_interval = event_interval
        self._events: dict[tuple[str, str, str, str], tuple[str, int, float]] = {}
        self.before_change = before_change

    # --- cordon / uncordon -------------------------------------------------------------------
    def cordon_node(self, name: str) -> bool:
        raw = self.nodes(name)
        if raw is None:
            return False
        self.cordon(raw)
        return True

    def uncordon_node(self, name: str) -> bool:
        raw = self.nodes(name)
        return raw is not None and self.uncordon(raw)

    def cordon(self, node: dict[str, Any]) -> None:
        """spec.unschedulable plus our NoSchedule taint (which also tells others who cordoned it)."""
        taints = list((node.get("spec") or {}).get("taints") or [])
        if not any(t.get("key") == keys.TAINT_DISRUPTING for t in taints):
            taints.append({"key": keys.TAINT_DISRUPTING, "value": "true", "effect": "NoSchedule"})
        self._patch_node(node, {"spec": {"unschedulable": True, "taints": taints}})

    def uncordon(self, node: dict[str, Any]) -> bool:
        """Undo our cordon only: a node someone else cordoned (no taint of ours) stays cordoned."""
        taints = list((node.get("spec") or {}).get("taints") or [])
        kept = [t for t in taints if t.get("key") != keys.TAINT_DISRUPTING]
        if len(kept) == len(taints):
            return False
        self._patch_node(node, {"spec": {"unschedulable": False, "taints": kept}})
        return True

    def _patch_node(self, node: dict[str, Any], body: dict[str, Any]) -> None:
        """The taint list is written whole, computed from the node as the cache saw it: the patch
        carries that resourceVersion, so a taint someone added since (the node lifecycle controller's
        NoExecute, a CNI's startup taint) makes it fail with 409 instead of being wiped out."""
        name = node["metadata"]["name"]
        version = node["metadata"].get("resourceVersion")
        if version:
            body = {**body, "metadata": {"resourceVersion": version}}
        self.before_change()
        try:
            self.core.patch_node(name, body, _request_timeout=self.timeout, _content_type=MERGE_PATCH)
        except ApiException as err:
            raise KubeError(f"patch node {name}: HTTP {err.status} {err.reason}") from None
        except TransportError as err:
            raise KubeError(f"patch node {name}: {err}") from None

    def delete_node(self, name: str) -> None:
        """Delete a Node object (its instance is gone); one already deleted is fine."""
        self.before_change()
        try:
            self.core.delete_node(name, _request_timeout=self.timeout)
        except ApiException as err:
            if err.status != 404:
                raise KubeError(f"delete node {name}: HTTP {err.status} {err.reason}") from None
        except TransportError as err:
            raise KubeError(f"delete node {name}: {err}") from None

    # --- eviction -----------------------------------------------------------------------------
    def evict(self, namespace: str, name: str) -> EvictResult:
        """policy/v1 Eviction: 429 means a PodDisruptionBudget forbids it now (retry later)."""
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
        self.before_change()
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body, _request_timeout=self.timeout)
        except ApiException as err:
            if err.status == 429:
                return "blocked"
            if err.status == 404:
                return "gone"
            raise KubeError(f"evict {namespace}/{name}: HTTP {err.status} {err.reason}") from None
        except TransportError as err:
            raise KubeError(f"evict {namespace}/{name}: {err}") from None
        return "evicted"

    def delete_pod(self, namespace: str, name: str) -> EvictResult:
        """DELETE of the pod (its grace period honoured): only for a gang on an ending Capacity Block."""
        self.before_change()
        try:
            self.core.delete_namespaced_pod(name, namespace, _request_timeout=self.timeout)
        except ApiException as err:
            if err.status == 404:
                return "gone"
            raise KubeError(f"delete pod {namespace}/{name}: HTTP {err.status} {err.reason}") from None
        except TransportError as err:
            raise KubeError(f"delete pod {namespace}/{name}: {err}") from None
        return "evicted"

    # --- ProvisioningRequests -----------------------------------------------------------------
    def write_conditions(self, request: ProvisioningRequest, conditions: dict[str, Condition]) -> None:
        self.before_change()
        self.requests.write(request, conditions)

    def write_buffer_status(self, buffer: CapacityBuffer, status: BufferStatus) -> None:
        self.before_change()
        write_buffer_status(self.custom, buffer, status, self.timeout)

    # --- events ------------------------------------------------------------------------------
    def event(self, ref: ObjectRef, reason: str, message: str, type_: str = "Normal") -> None:
        """A core/v1 Event; the same one again within `event_interval` only bumps its count. An Event of
        ours for the same object, reason and message already in the API (written before a restart) is
        updated rather than created again."""
        ns = ref.namespace or "default"
        key = (ref.kind, f"{ns}/{ref.name}", reason, message)
        now = time.monotonic()
        seen = self._events.get(key)
        stamp = _now()
        try:
            if seen is None:
                seen = self._existing_event(ref, ns, reason, message)
            if seen is not None:
                name, count, at = seen
                if now - at < self._event_interval:
                    return
                self.core.patch_namespaced_event(name, ns, {"count": count + 1, "lastTimestamp": stamp.isoformat()},
                                                 _request_timeout=self.timeout, _content_type=MERGE_PATCH)
                self._events[key] = (name, count + 1, now)
                return
            ev = client.CoreV1Event(
                metadata=client.V1ObjectMeta(generate_name=f"{ref.name}.", namespace=ns),
                involved_object=client.V1ObjectReference(
                    kind=ref.kind, name=ref.name, namespace=ref.namespace or None, uid=ref.uid or None,
                    api_version=API_VERSIONS.get(ref.kind, "v1")),
                reason=reason, message=message[:1024], type=type_, count=1,
                first_timestamp=stamp, last_timestamp=stamp,
                source=client.V1EventSource(component=COMPONENT), reporting_component=COMPONENT,
                reporting_instance=socket.gethostname(),
            )
            created = self.core.create_namespaced_event(ns, ev, _request_timeout=self.timeout)
            self._events[key] = (str(created.metadata.name), 1, now)
        except ApiException as err:
            log.warning("event %s on %s %s/%s not recorded: HTTP %s", reason, ref.kind, ns, ref.name, err.status)
        except TransportError as err:
            log.warning("event %s on %s %s/%s not recorded: %s", reason, ref.kind, ns, ref.name, err)

    def _existing_event(self, ref: ObjectRef, ns: str, reason: str, message: str) -> tuple[str, int, float] | None:
        found = self.core.list_namespaced_event(
            ns, field_selector=f"involvedObject.kind={ref.kind},involvedObject.name={ref.name},reason={reason}",
            _request_timeout=self.timeout)
        for ev in found.items or ():
            if ev.message == message[:1024] and ev.source is not None and ev.source.component == COMPONENT:
                return str(ev.metadata.name), int(ev.count or 1), float("-inf")  # due for its count bump
        return None

    # --- status ConfigMap -----------------------------------------------------------------
    def write_status(self, status: dict[str, Any]) -> None:
        data = {"status.json": json.dumps(status, indent=1, sort_keys=True, default=str)}
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=STATUS_CONFIGMAP, namespace=self.namespace),
                                  data=data)
        try:
            try:
                self.core.replace_namespaced_config_map(STATUS_CONFIGMAP, self.namespace, body,
                                                        _request_timeout=self.timeout)
            except ApiException as err:
                if err.status != 404:
                    raise
                self.core.create_namespaced_config_map(self.namespace, body, _request_timeout=self.timeout)
        except ApiException as err:
            log.warning("status ConfigMap not written: HTTP %s %s", err.status, err.reason)
        except TransportError as err:
            log.warning("status ConfigMap not written: %s", err)
