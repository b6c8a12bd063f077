"""A small, honest stand-in for the Kubernetes API server, for the official client to talk to.

Serves the real JSON shapes over HTTP on 127.0.0.1: lists with metadata.resourceVersion, watch
streams (one JSON event per line; ERROR 410 when the asked resourceVersion was compacted), node
PATCH (merge), policy/v1 Eviction (201, or 429 when a PodDisruptionBudget allows no disruption),
core/v1 Events, ConfigMaps and coordination.k8s.io/v1 Leases with optimistic concurrency (409),
PodTemplates, autoscaling.x-k8s.io/v1 ProvisioningRequests and v1beta1 CapacityBuffers with their status
subresource, apps/v1 Deployments (read).
`down = True` answers 503 to everything and ends open watches: the API server is gone.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from scaler.core.config.pool import Pool
from scaler.core.model.resources import format_resources

JSON = dict[str, Any]
TOKEN = "fake-token"

# collection path -> (kind of the list, namespaced?)
CLUSTER_LISTS = {
    "/api/v1/pods": "pods",
    "/api/v1/nodes": "nodes",
    "/apis/policy/v1/poddisruptionbudgets": "poddisruptionbudgets",
    "/api/v1/persistentvolumeclaims": "persistentvolumeclaims",
    "/api/v1/persistentvolumes": "persistentvolumes",
    "/api/v1/namespaces": "namespaces",
    "/apis/storage.k8s.io/v1/storageclasses": "storageclasses",
    "/apis/storage.k8s.io/v1/csinodes": "csinodes",
    "/apis/autoscaling.x-k8s.io/v1/provisioningrequests": "provisioningrequests",
    "/apis/autoscaling.x-k8s.io/v1beta1/capacitybuffers": "capacitybuffers",
    "/api/v1/podtemplates": "podtemplates",
    "/apis/resource.k8s.io/v1/deviceclasses": "deviceclasses",
    "/apis/resource.k8s.io/v1/resourceclaims": "resourceclaims",
    "/apis/resource.k8s.io/v1/resourceclaimtemplates": "resourceclaimtemplates",
    "/apis/resource.k8s.io/v1/resourceslices": "resourceslices",
    "/apis/resource.k8s.io/v1/devicetaintrules": "devicetaintrules",
}
NAMESPACED = {
    ("api/v1", "pods"): "pods",
    ("api/v1", "events"): "events",
    ("api/v1", "configmaps"): "configmaps",
    ("apis/coordination.k8s.io/v1", "leases"): "leases",
    ("apis/policy/v1", "poddisruptionbudgets"): "poddisruptionbudgets",
    ("api/v1", "podtemplates"): "podtemplates",
    ("apis/autoscaling.x-k8s.io/v1", "provisioningrequests"): "provisioningrequests",
    ("apis/autoscaling.x-k8s.io/v1beta1", "capacitybuffers"): "capacitybuffers",
    ("apis/apps/v1", "deployments"): "deployments",
}
LIST_KIND = {"pods": "PodList", "nodes": "NodeList", "poddisruptionbudgets": "PodDisruptionBudgetList",
             "events": "EventList", "configmaps": "ConfigMapList", "leases": "LeaseList",
             "persistentvolumeclaims": "PersistentVolumeClaimList", "persistentvolumes": "PersistentVolumeList",
             "namespaces": "NamespaceList", "storageclasses": "StorageClassList", "csinodes": "CSINodeList",
             "podtemplates": "PodTemplateList", "provisioningrequests": "ProvisioningRequestList",
             "capacitybuffers": "CapacityBufferList", "deployments": "DeploymentList",
             "deviceclasses": "DeviceClassList", "resourceclaims": "ResourceClaimList",
             "resourceclaimtemplates": "ResourceClaimTemplateList", "resourceslices": "ResourceSliceList",
             "devicetaintrules": "DeviceTaintRuleList"}
DRA = ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices", "devicetaintrules")


def _status(code: int, reason: str, message: str, **extra: Any) -> JSON:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code, **extra}


class FakeKube:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rv = 1000
        self.store: dict[str, dict[str, JSON]] = {k: {} for k in LIST_KIND}
        self.history: list[tuple[int, str, str, JSON]] = []  # (rv, resource, type, object)
        self.compacted = 0  # watches from a resourceVersion below this get 410 Gone
        self.generation = 0  # bumped to cut every open watch
        self.down = False
        self.broken: set[str] = set()  # cluster-wide lists/watches answering 503 (e.g. {"pods"})
        self.absent: set[str] = set()  # collections the server does not serve: 404 (e.g. set(DRA): before 1.34)
        self.requests: list[tuple[str, str]] = []
        self.lists: list[tuple[str, int]] = []  # (resource, offset) of every list page served
        self.pages: dict[str, list[JSON]] = {}
        self.page_rv: dict[str, int] = {}
        self.evictions: list[tuple[str, int]] = []  # (ns/name, HTTP code)
        self.recreate_evicted = False  # act as the ReplicaSet controller: an evicted pod comes back pending
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- lifecycle ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeKube:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.cond:
            self.generation += 1
            self.down = True
            self.cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "scaler", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "scaler"}}],
        }))
        return path

    def set_down(self, down: bool) -> None:
        with self.cond:
            self.down = down
            self.generation += 1
            self.cond.notify_all()

    def expire_watches(self) -> None:
        """Compact history and cut open watches: clients must relist (410 Gone)."""
        with self.cond:
            self.rv += 1  # the store moves on (as etcd's revision does)
            self.compacted = self.rv  # a watch from before now gets 410; a fresh list's version is fine
            self.generation += 1
            self.cond.notify_all()

    # --- the store ----------------------------------------------------------------------------
    def put(self, resource: str, obj: JSON, *, quiet: bool = False) -> JSON:
        """Store an object and tell the watchers; `quiet`: the watchers are not told (a lagging watch)."""
        with self.cond:
            self.rv += 1
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(self.rv)
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            key = f"{meta.get('namespace', '')}/{meta['name']}"
            kind = "MODIFIED" if key in self.store[resource] else "ADDED"
            self.store[resource][key] = obj
            if not quiet:
                self.history.append((self.rv, resource, kind, copy.deepcopy(obj)))
            self.cond.notify_all()
            return obj

    def delete(self, resource: str, key: str) -> JSON | None:
        with self.cond:
            obj = self.store[resource].pop(key, None)
            if obj is not None:
                self.rv += 1
                obj["metadata"]["resourceVersion"] = str(self.rv)
                self.history.append((self.rv, resource, "DELETED", copy.deepcopy(obj)))
                self.cond.notify_all()
            return obj

    def get(self, resource: str, key: str) -> JSON | None:
        with self.cond:
            obj = self.store[resource].get(key)
            return copy.deepcopy(obj) if obj else None

    def objects(self, resource: str) -> list[JSON]:
        with self.cond:
            return [copy.deepcopy(o) for o in self.store[resource].values()]

    # --- the HTTP side --------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, code: int, body: JSON) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> JSON:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"{}")

            def _guard(self) -> bool:
                fake.requests.append((self.command, self.path))
                if fake.down:
                    self._send(503, _status(503, "ServiceUnavailable", "the server is currently unable to handle "
                                                                        "the request"))
                    return False
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._send(401, _status(401, "Unauthorized", "Unauthorized"))
                    return False
                return True

            def do_GET(self) -> None:
                if not self._guard():
                    return
                url = urlparse(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                resource = CLUSTER_LISTS.get(url.path)
                if resource in fake.broken:
                    self._send(503, _status(503, "ServiceUnavailable", "etcdserver: request timed out"))
                    return
                if resource in fake.absent:
                    self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
                    return
                if resource is not None:
                    if q.get("watch") in ("true", "True", "1"):
                        self._watch(resource, int(q.get("resourceVersion") or 0), float(q.get("timeoutSeconds") or 60))
                    else:
                        # Paginated as the API server does: `limit` items, then a `continue` token.
                        start = int(q.get("continue") or 0)
                        with fake.cond:
                            if start:
                                items, rv = fake.pages[resource][start:], fake.page_rv[resource]
                            else:
                                items = [copy.deepcopy(o) for o in fake.store[resource].values()]
                                rv = fake.rv
                                fake.pages[resource], fake.page_rv[resource] = items, rv
                        limit = int(q.get("limit") or 0) or len(items) or 1
                        meta: JSON = {"resourceVersion": str(rv)}
                        if len(items) > limit:
                            meta["continue"] = str(start + limit)
                        fake.lists.append((resource, start))
                        self._send(200, {"kind": LIST_KIND[resource], "apiVersion": "v1", "metadata": meta,
                                         "items": items[:limit]})
                    return
                target = self._target(url.path)
                if target is None:
                    self._send(404, _status(404, "NotFound", f"no route {url.path}"))
                    return
                resource, key, _ = target
                if key.endswith("/"):  # a namespaced collection, with the field selectors the API server knows
                    want = [f.split("=", 1) for f in q.get("fieldSelector", "").split(",") if f]
                    items = [o for o in fake.objects(resource) if o["metadata"].get("namespace") == key[:-1]
                             and all(_field(o, path) == value for path, value in want)]
                    self._send(200, {"kind": LIST_KIND[resource], "apiVersion": "v1",
                                     "metadata": {"resourceVersion": str(fake.rv)}, "items": items})
                    return
                obj = fake.get(resource, key)
                if obj is None:
                    self._send(404, _status(404, "NotFound", f'{resource} "{key}" not found'))
                else:
                    self._send(200, obj)

            def _watch(self, resource: str, since: int, timeout: float) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def write(event: JSON) -> None:
                    data = json.dumps(event).encode() + b"\n"
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()

                with fake.cond:
                    gen = fake.generation
                    if since and since < fake.compacted:
                        pending: list[JSON] = [{"type": "ERROR", "object": _status(
                            410, "Expired", f"too old resource version: {since} ({fake.compacted})")}]
                        done = True
                    else:
                        pending = [{"type": t, "object": o} for rv, r, t, o in fake.history if r == resource
                                   and rv > since]
                        done = False
                    last = fake.rv
                try:
                    deadline = threading.Event()
                    timer = threading.Timer(timeout, deadline.set)
                    timer.start()
                    while True:
                        for ev in pending:
                            write(ev)
                        if done or deadline.is_set():
                            break
                        with fake.cond:
                            fake.cond.wait(0.2)
                            if fake.generation != gen or fake.down or resource in fake.broken:
                                break
                            pending = [{"type": t, "object": o} for rv, r, t, o in fake.history
                                       if r == resource and rv > last]
                            last = fake.rv
                    timer.cancel()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    return

            def _target(self, path: str) -> tuple[str, str, str] | None:
                """(resource, key, subresource) of an object path."""
                parts = path.strip("/").split("/")
                if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
                    return "nodes", f"/{parts[3]}", ""
                for (prefix, res), resource in NAMESPACED.items():
                    p = prefix.split("/")
                    if parts[:len(p)] == p and len(parts) >= len(p) + 3 and parts[len(p)] == "namespaces" \
                            and parts[len(p) + 2] == res:
                        rest = parts[len(p) + 3:]
                        ns = parts[len(p) + 1]
                        return resource, f"{ns}/{rest[0]}" if rest else f"{ns}/", rest[1] if len(rest) > 1 else ""
                return None

            def do_POST(self) -> None:
                if not self._guard():
                    return
                target = self._target(urlparse(self.path).path)
                body = self._body()
                if target is None:
                    self._send(404, _status(404, "NotFound", "no route"))
                    return
                resource, key, sub = target
                if sub == "eviction":
                    self._evict(key)
                    return
                ns = key.split("/")[0]
                meta = body.setdefault("metadata", {})
                meta["namespace"] = ns
                if not meta.get("name") and meta.get("generateName"):
                    meta["name"] = meta["generateName"] + uuid.uuid4().hex[:10]
                if fake.get(resource, f"{ns}/{meta.get('name')}") is not None:
                    self._send(409, _status(409, "AlreadyExists", f'{resource} "{meta["name"]}" already exists'))
                    return
                self._send(201, fake.put(resource, body))

            def _evict(self, key: str) -> None:
                pod = fake.get("pods", key)
                if pod is None:
                    fake.evictions.append((key, 404))
                    self._send(404, _status(404, "NotFound", f'pods "{key}" not found'))
                    return
                ns = key.split("/", maxsplit=1)[0]
                labels = pod["metadata"].get("labels") or {}
                for pdb in fake.objects("poddisruptionbudgets"):
                    sel = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
                    if pdb["metadata"].get("namespace") != ns or not sel or \
                            any(labels.get(k) != v for k, v in sel.items()):
                        continue
                    if int((pdb.get("status") or {}).get("disruptionsAllowed") or 0) < 1:
                        fake.evictions.append((key, 429))
                        self._send(429, _status(
                            429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                            details={"causes": [{"reason": "DisruptionBudget", "message":
                                                 f"The disruption budget {pdb['metadata']['name']} needs 1 healthy "
                                                 "pods and has 1 currently"}]}))
                        return
                    pdb["status"]["disruptionsAllowed"] -= 1
                    fake.put("poddisruptionbudgets", pdb)
                fake.evictions.append((key, 201))
                fake.delete("pods", key)
                if fake.recreate_evicted:
                    again = copy.deepcopy(pod)
                    again["metadata"] = {k: v for k, v in again["metadata"].items()
                                         if k in ("namespace", "labels", "annotations", "ownerReferences")}
                    again["metadata"]["name"] = pod["metadata"]["name"] + "-r"
                    again["spec"].pop("nodeName", None)
                    again["status"] = unschedulable_status()
                    fake.put("pods", again)
                self._send(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                 "code": 201})

            def do_PUT(self) -> None:
                if not self._guard():
                    return
                target = self._target(urlparse(self.path).path)
                body = self._body()
                if target is None:
                    self._send(404, _status(404, "NotFound", "no route"))
                    return
                resource, key, sub = target
                current = fake.get(resource, key)
                if current is None:
                    self._send(404, _status(404, "NotFound", f'{resource} "{key}" not found'))
                    return
                if sub == "status":  # the status subresource: only the status changes
                    body = {**current, "metadata": {**current["metadata"], **(body.get("metadata") or {})},
                            "status": body.get("status")}
                want = (body.get("metadata") or {}).get("resourceVersion")
                if want and want != current["metadata"]["resourceVersion"]:
                    self._send(409, _status(409, "Conflict", "the object has been modified; please apply your "
                                                             "changes to the latest version and try again"))
                    return
                body.setdefault("metadata", {})["namespace"] = current["metadata"].get("namespace")
                body["metadata"]["uid"] = current["metadata"]["uid"]
                self._send(200, fake.put(resource, body))

            def do_DELETE(self) -> None:
                if not self._guard():
                    return
                target = self._target(urlparse(self.path).path)
                obj = fake.delete(target[0], target[1]) if target else None
                if obj is None:
                    self._send(404, _status(404, "NotFound", "not found"))
                else:
                    self._send(200, obj)

            def do_PATCH(self) -> None:
                if not self._guard():
                    return
                target = self._target(urlparse(self.path).path)
                patch = self._body()
                if target is None:
                    self._send(404, _status(404, "NotFound", "no route"))
                    return
                resource, key, sub = target
                if sub == "status":  # the status subresource: only the status changes
                    patch = {"status": patch.get("status")}
                kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                if kind == "application/json-patch+json" and not isinstance(patch, list):
                    # What the API server answers a JSON Patch that is not a list of operations.
                    self._send(400, _status(400, "BadRequest", "json: cannot unmarshal object into Go value of "
                                                               "type jsonpatch.Patch"))
                    return
                if kind != "application/merge-patch+json":
                    self._send(415, _status(415, "UnsupportedMediaType", f"the fake serves merge patches only: {kind}"))
                    return
                with fake.cond:
                    current = fake.get(resource, key)
                    if current is None:
                        self._send(404, _status(404, "NotFound", f'{resource} "{key}" not found'))
                        return
                    want = (patch.get("metadata") or {}).get("resourceVersion")
                    if want and want != current["metadata"].get("resourceVersion"):
                        self._send(409, _status(
                            409, "Conflict", f'Operation cannot be fulfilled on {resource} "{key}": the object has '
                            "been modified; please apply your changes to the latest version and try again"))
                        return
                    self._send(200, fake.put(resource, _merge(current, patch)))

        return Handler


def _field(obj: JSON, path: str) -> str:
    """A field selector's value of an object (`involvedObject.name`, `reason`, ...)."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _merge(obj: JSON, patch: JSON) -> JSON:
    """JSON merge patch (lists replace, null deletes): what a node's spec.taints patch needs."""
    out = dict(obj)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


# --- object builders (the shapes kubectl get -o json shows) ------------------------------------
def unschedulable_status() -> JSON:
    return {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]}


def node(name: str, *, pool: str | None = None, provider_id: str = "", gpus: int = 0, cpu: str = "4",
         memory: str = "16Gi", labels: dict[str, str] | None = None, taints: list[JSON] | None = None,
         ready: bool = True) -> JSON:
    lab = {"kubernetes.io/hostname": name, **(labels or {})}
    if pool:
        lab["gpuburst.io/pool"] = pool
    alloc = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": lab},
            "spec": {"providerID": provider_id, "taints": taints or []},
            "status": {"allocatable": alloc, "capacity": alloc,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pool_node(pool: Pool, zone: str, name: str, provider_id: str) -> JSON:
    """The Node a pool's instance registers as: labels, taints and allocatable from the pool (as its bootstrap
    gives them), Ready."""
    tmpl = pool.template_node(zone)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {**tmpl.labels, "kubernetes.io/hostname": name}},
            "spec": {"providerID": provider_id, "taints": [{"key": t.key, "value": t.value, "effect": t.effect}
                                                           for t in pool.node_taints()]},
            "status": {"allocatable": format_resources(tmpl.allocatable), "capacity": format_resources(pool.capacity()),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, *, namespace: str = "default", node_name: str | None = None, gpus: int = 0, cpu: str = "500m",
        labels: dict[str, str] | None = None, owner: str | None = "ReplicaSet", pending: bool = False,
        tolerations: list[JSON] | None = None, node_selector: dict[str, str] | None = None) -> JSON:
    req = {"cpu": cpu, "memory": "1Gi"}
    lim: dict[str, str] = {}
    if gpus:
        req["nvidia.com/gpu"] = str(gpus)
        lim["nvidia.com/gpu"] = str(gpus)
    meta: JSON = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
                                    "uid": str(uuid.uuid4()), "controller": True}]
    spec: JSON = {"containers": [{"name": "main", "image": "busybox",
                                  "resources": {"requests": req, **({"limits": lim} if lim else {})}}],
                  "tolerations": tolerations or [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                  "effect": "NoSchedule"}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if node_name:
        spec["nodeName"] = node_name
    status = unschedulable_status() if pending else {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def pdb(name: str, selector: dict[str, str], allowed: int, namespace: str = "default") -> JSON:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": selector}, "minAvailable": 1},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1,
                       "expectedPods": 1, "observedGeneration": 1}}
