"""Nodes without machines, on kwok's model: what the kubelet, a DRA driver and the cloud's node controller
do for the tests' control plane, through the official client.

- `register(node)`: a Node as a kubelet registers it (labels, taints, capacity and allocatable, Ready),
  its Lease in kube-node-lease, and for a DRA pool the ResourceSlices the NVIDIA driver would publish
  (owned by the Node, so the garbage collector deletes them with it).
- a background loop: renews every node's Lease and Ready heartbeat (the node lifecycle controller would
  otherwise taint it unreachable), marks pods the scheduler bound to our nodes Running, and finishes the
  deletion of pods whose deletion began (a kubelet does, once their containers stop: here at once).
- `forget(name)`: the cloud's node controller deleting the Node of a terminated instance, and its pods.

kwok (sigs.k8s.io/kwok) does the first two for any node; it creates no Node, publishes no ResourceSlice and
knows no cloud, which are most of what a test needs, so this small agent does all of it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from scaler.core.model import keys
from scaler.core.model.dra import CapacityPolicy, ResourceSlice, Version
from scaler.core.model.resources import format_resources

JSON = dict[str, Any]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _quantity(v: Any) -> str:
    return str(v)


def _attribute(v: Any) -> JSON:
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, Version):
        return {"version": v.text}
    return {"string": str(v)}


def _capacity(value: Any, policy: CapacityPolicy | None) -> JSON:
    """A device capacity, with its requestPolicy (consumable capacity) when it has one."""
    out: JSON = {"value": _quantity(value)}
    if policy is None:
        return out
    rule: JSON = {"default": _quantity(policy.default)} if policy.default is not None else {}
    if policy.valid_values:
        rule["validValues"] = [_quantity(v) for v in policy.valid_values]
    if policy.min is not None:
        rule["validRange"] = {k: _quantity(v) for k, v in (("min", policy.min), ("max", policy.max),
                                                            ("step", policy.step)) if v is not None}
    return {**out, "requestPolicy": rule}


def slice_json(s: ResourceSlice, owner: JSON | None = None) -> JSON:
    """A ResourceSlice of the model (the pool's template slices) as the driver would publish it."""
    spec: JSON = {"driver": s.driver, "pool": {"name": s.pool.name, "generation": s.pool.generation,
                                               "resourceSliceCount": s.pool.resource_slice_count}}
    if s.node_name:
        spec["nodeName"] = s.node_name
    elif s.all_nodes:
        spec["allNodes"] = True
    if s.devices:
        spec["devices"] = [{
            "name": d.name,
            **({"attributes": {k: _attribute(v) for k, v in d.attributes.items()}} if d.attributes else {}),
            **({"allowMultipleAllocations": True} if d.allow_multiple else {}),
            **({"capacity": {k: _capacity(v, d.policies.get(k)) for k, v in d.capacity.items()}} if d.capacity else {}),
            **({"consumesCounters": [{"counterSet": c.counter_set,
                                      "counters": {k: {"value": _quantity(v)} for k, v in c.counters.items()}}
                                     for c in d.consumes_counters]} if d.consumes_counters else {}),
            **({"taints": [{"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
                           for t in d.taints]} if d.taints else {}),
        } for d in s.devices]
    if s.shared_counters:
        spec["sharedCounters"] = [
            {"name": c.name, "counters": {k: {"value": _quantity(v)} for k, v in c.counters.items()}}
            for c in s.shared_counters]
    meta: JSON = {"name": s.name}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta, "spec": spec}


@dataclass
class NodeSpec:
    name: str
    labels: Mapping[str, str]
    taints: Iterable[tuple[str, str, str]] = ()  # (key, value, effect)
    allocatable: Mapping[str, Any] = field(default_factory=dict)  # model resources (format_resources)
    capacity: Mapping[str, Any] | None = None
    provider_id: str = ""
    slices: tuple[ResourceSlice, ...] = ()


class NodeAgent:
    def __init__(self, api: client.ApiClient, interval: float = 0.2, heartbeat: float = 10.0) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.coord = client.CoordinationV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.interval, self.heartbeat = interval, heartbeat
        self.nodes: set[str] = set()
        self.started: set[str] = set()  # ns/name of pods marked Running
        self.device_plugins: dict[str, JSON] = {}  # node -> the status its device plugin will advertise
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="node-agent", daemon=True)
        self._last_beat = 0.0
        self.errors: list[str] = []

    # --- the kubelet registering ---------------------------------------------------------------
    def register(self, spec: NodeSpec, *, gpus_later: bool = False) -> None:
        """`gpus_later`: the node registers without its GPUs, as a kubelet does before the NVIDIA device
        plugin has started on it (tens of seconds on a real GPU node); `advertise` adds them."""
        allocatable = format_resources(spec.allocatable)
        capacity = format_resources(spec.capacity) if spec.capacity is not None else dict(allocatable)
        capacity.setdefault("pods", "110")
        allocatable.setdefault("pods", "110")
        if gpus_later and keys.RES_GPU in allocatable:
            self.device_plugins[spec.name] = {"capacity": dict(capacity), "allocatable": dict(allocatable)}
            for res in (capacity, allocatable):
                res.pop(keys.RES_GPU, None)
        body = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": spec.name, "labels": {**spec.labels, keys.LABEL_HOSTNAME: spec.name}},
            "spec": {**({"providerID": spec.provider_id} if spec.provider_id else {}),
                     "taints": [{"key": k, "value": v, "effect": e} for k, v, e in spec.taints]},
            "status": {"capacity": capacity, "allocatable": allocatable,
                       "conditions": [self._ready()],
                       "nodeInfo": {"kubeletVersion": "v1.37.2", "architecture": "amd64", "operatingSystem": "linux",
                                    "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                                    "osImage": "", "containerRuntimeVersion": "", "kubeProxyVersion": ""}},
        }
        node = self.core.create_node(body)
        # The API server keeps status on create only partly: write it through the status subresource.
        self.core.patch_node_status(spec.name, {"status": body["status"]})
        self.coord.create_namespaced_lease("kube-node-lease", {
            "metadata": {"name": spec.name, "ownerReferences": [self._owner(node)]},
            "spec": {"holderIdentity": spec.name, "leaseDurationSeconds": 40, "renewTime": _now()}})
        for s in spec.slices:
            self.custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices",
                                                     slice_json(s, self._owner(node)))
        with self._lock:
            self.nodes.add(spec.name)
        # The API server admits a new Node with the node.kubernetes.io/not-ready taint (TaintNodesByCondition)
        # and the node lifecycle controller lifts it once it sees Ready: registration is done then, as a
        # kubelet's node is usable then.
        deadline = time.monotonic() + 30
        while any(t.key == keys.TAINT_NOT_READY for t in (self.core.read_node(spec.name).spec.taints or [])):
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {spec.name}: the not-ready taint was never lifted")
            time.sleep(0.05)

    def advertise(self) -> list[str]:
        """The device plugin starts on every node waiting for it: its GPUs become allocatable."""
        done = []
        for name, status in list(self.device_plugins.items()):
            with contextlib.suppress(ApiException):
                self.core.patch_node_status(name, {"status": status})
                done.append(name)
            del self.device_plugins[name]
        return done

    @staticmethod
    def _owner(node: Any) -> JSON:
        return {"apiVersion": "v1", "kind": "Node", "name": node.metadata.name, "uid": node.metadata.uid}

    @staticmethod
    def _ready() -> JSON:
        return {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "stand-in kubelet",
                "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}

    # --- the cloud's node controller -------------------------------------------------------------
    def forget(self, name: str) -> None:
        """The instance is gone: its Node goes, and the pods bound to it (the pod GC would, later)."""
        with self._lock:
            self.nodes.discard(name)
        with contextlib.suppress(ApiException):
            self.core.delete_node(name)
        for p in self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items:
            with contextlib.suppress(ApiException):
                self.core.delete_namespaced_pod(p.metadata.name, p.metadata.namespace, grace_period_seconds=0)

    # --- the loop --------------------------------------------------------------------------------
    def start(self) -> NodeAgent:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
                if time.monotonic() - self._last_beat > self.heartbeat:
                    self.beat()
                    self._last_beat = time.monotonic()
            except Exception as e:
                self.errors.append(repr(e))
            self._stop.wait(self.interval)

    def tick(self) -> None:
        """Pods bound to our nodes start; pods being deleted on our nodes finish."""
        with self._lock:
            mine = set(self.nodes)
        for p in self.core.list_pod_for_all_namespaces().items:
            node = p.spec.node_name
            if node not in mine:
                continue
            key = f"{p.metadata.namespace}/{p.metadata.name}"
            if p.metadata.deletion_timestamp is not None:
                with contextlib.suppress(ApiException):
                    self.core.delete_namespaced_pod(p.metadata.name, p.metadata.namespace, grace_period_seconds=0)
                self.started.discard(key)
                continue
            if p.status.phase == "Pending":
                now = _now()
                conditions = [{"type": t, "status": "True", "lastTransitionTime": now}
                              for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready",
                                        "PodScheduled")]
                statuses = [{"name": c.name, "image": c.image, "imageID": "", "ready": True, "restartCount": 0,
                             "started": True, "state": {"running": {"startedAt": now}}} for c in p.spec.containers]
                with contextlib.suppress(ApiException):
                    self.core.patch_namespaced_pod_status(p.metadata.name, p.metadata.namespace, {"status": {
                        "phase": "Running", "startTime": now, "conditions": conditions, "hostIP": "10.1.0.1",
                        "podIP": "10.2.0.1", "containerStatuses": statuses}})
                    self.started.add(key)

    def beat(self) -> None:
        with self._lock:
            mine = set(self.nodes)
        for name in mine:
            with contextlib.suppress(ApiException):
                self.coord.patch_namespaced_lease(name, "kube-node-lease", {"spec": {"renewTime": _now()}})
                self.core.patch_node_status(name, {"status": {"conditions": [self._ready()]}})
