"""CapacityBuffers (autoscaling.x-k8s.io/v1beta1) in the cluster: the buffers and the PodTemplates they name are
watched by `scaler.kube.cache` and converted by `scaler.kube.convert_buffers`; the Deployment, ReplicaSet or
StatefulSet of a `scalableRef` is read here when a pass needs it (its pod template and replicas), and each
buffer's status is written back. The deciding is the core's (scaler.core.planning.buffers).

Calls (scaler.permissions): capacitybuffers list/watch, capacitybuffers/status patch, podtemplates
list/watch, deployments/replicasets/statefulsets get.
"""

from __future__ import annotations

import logging

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as TransportError

from scaler.core.model.buffers import BufferStatus, CapacityBuffer
from scaler.kube.client import MERGE_PATCH, TIMEOUT, read_or_none
from scaler.kube.convert_buffers import GROUP, JSON, PLURAL, STATUS_FIELDS, VERSION, status_json
from scaler.ports import KubeError

log = logging.getLogger(__name__)


class Scalable:
    """Reads the scalable objects buffers name (get, when a pass needs them)."""

    def __init__(self, api: client.ApiClient, timeout: tuple[float, float] = TIMEOUT) -> None:
        self.apps = client.AppsV1Api(api)
        self.timeout = timeout

    def __call__(self, kind: str, namespace: str, name: str) -> JSON | None:
        read = {"Deployment": self.apps.read_namespaced_deployment,
                "ReplicaSet": self.apps.read_namespaced_replica_set,
                "StatefulSet": self.apps.read_namespaced_stateful_set}[kind]
        return read_or_none(read, self.apps.api_client, kind, namespace, name, self.timeout)


def write_status(custom: client.CustomObjectsApi, buf: CapacityBuffer, status: BufferStatus,
                 timeout: tuple[float, float] = TIMEOUT) -> None:
    """Set the buffer's whole status (the status subresource: the spec is not touched), as a merge patch in
    which a field the status no longer has is null. (An update would need the object's resourceVersion: the API
    server refuses an unconditional update of a custom resource, 422.)"""
    body = {"status": {**dict.fromkeys(STATUS_FIELDS), **status_json(status)}}
    try:
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, buf.namespace, PLURAL, buf.name, body,
                                                     _request_timeout=timeout, _content_type=MERGE_PATCH)
    except ApiException as err:
        if err.status == 404:
            return  # deleted meanwhile
        raise KubeError(f"patch {PLURAL}/status {buf.key}: {err.status} {err.reason}") from err
    except TransportError as err:
        raise KubeError(f"patch {PLURAL}/status {buf.key}: {err}") from err
    log.info("capacity buffer %s: replicas %s, %s", buf.key, status.replicas,
             ", ".join(f"{c.type}={c.status} ({c.reason})" for c in sorted(status.conditions.values(),
                                                                             key=lambda c: c.type)))
