"""A list + watch cache of pods, nodes, PodDisruptionBudgets, storage and DRA objects (the official
client's Watch).

One thread per resource: list (paginated) to get a resourceVersion, then watch from it; a watch
that ends is resumed from the last resourceVersion seen, a 410 Gone (or an ERROR event) relists,
and a failed connection marks the resource unsynced and retries with bounded, jittered backoff.
`Snapshot.fresh` is True while pods and nodes are synced, `Snapshot.pdbs_fresh` while the PDBs are:
the planner never removes capacity on data it could not refresh, and a failing PDB watch stops
drains only. An optional resource (DRA's resource.k8s.io/v1) the API server does not serve (404) is
empty and synced, and looked for again every few minutes.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from scaler.core.model import keys
from scaler.core.model.objects import Node
from scaler.core.planning.buffers import CapacityBuffer
from scaler.core.planning.provreq import ProvisioningRequest
from scaler.kube import buffers as kube_buffers
from scaler.kube import convert_buffers
from scaler.kube.convert import SnapshotError, node_from_json, pdb_from_json
from scaler.kube.convert_dra import dra_view
from scaler.kube.convert_storage import storage_view
from scaler.kube.provreq import ProvisioningRequests
from scaler.kube.view import IndexView, PodIndex, index_of, pod_entry, with_pods
from scaler.ports import ClusterView, KubeError, Skipped

log = logging.getLogger(__name__)
JSON = dict[str, Any]
# The first word of a SnapshotError (scaler.kube.convert) -> the kind of the object it is about.
KINDS = {"pod": "Pod", "node": "Node", "poddisruptionbudget": "PodDisruptionBudget",
         "persistentvolumeclaim": "PersistentVolumeClaim", "persistentvolume": "PersistentVolume",
         "storageclass": "StorageClass", "csinode": "CSINode", "capacitybuffer": "CapacityBuffer",
         # scaler.core.dra.convert names the object by its kind
         **{k: k for k in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")}}
_NAMING = ("name", "namespace", "uid", "resourceVersion")  # the metadata a slim Informer keeps
ABSENT_RECHECK = 300.0  # seconds between looks for an optional API the server did not serve




class Informer:
    """The current objects of one resource, kept by list + watch in a background thread."""

    def __init__(self, kind: str, list_fn: Callable[..., Any], *, watch_timeout: int = 300,
                 backoff_initial: float = 0.5, backoff_max: float = 30.0, page_size: int = 500,
                 optional: bool = False, convert: Callable[[JSON], Any] | None = None, slim: bool = False,
                 index: bool = False) -> None:
        """`optional`: a 404 (the API server does not serve the resource) is an empty, synced resource.
        `convert`: each object is converted as its event arrives (what it returns, or the SnapshotError it
        raises, is kept beside the object: `models`); an object whose resourceVersion did not change is not
        converted again. `slim`: of an object that converted only the metadata that names it is kept (`items`
        gives that), the model holds what the passes read (a pod's JSON is several times its model). `index`
        (pods): the converted pods are also kept sorted as a pass's view takes them (`view`)."""
        self.kind = kind
        self._convert = convert
        self._slim = slim and convert is not None
        self._models: dict[str, Any] = {}
        self._index = PodIndex() if index and convert is not None else None
        self.optional = optional
        self._list_fn = list_fn
        self._watch_timeout = watch_timeout
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._page_size = page_size
        self._lock = threading.Lock()
        self._objects: dict[str, JSON] = {}
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread: threading.Thread | None = None
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.relists = 0
        self.errors = 0

    # --- reading ----------------------------------------------------------------------------
    def items(self) -> list[JSON]:
        with self._lock:
            return list(self._objects.values())

    def models(self) -> list[tuple[Any, JSON]]:
        """(the converted object or the SnapshotError its conversion raised, the object), in `items` order."""
        with self._lock:
            return [(self._models[k], obj) for k, obj in self._objects.items()]

    def view(self) -> IndexView:
        """The converted pods as a pass's view takes them (an informer made with `index`)."""
        assert self._index is not None
        with self._lock:
            return self._index.view()

    def _kept(self, obj: JSON, model: Any) -> JSON:
        """What is kept of the object: all of it, or (slim) the metadata naming it when it converted (one
        that did not is kept whole, for the pass to report)."""
        if not self._slim or isinstance(model, SnapshotError):
            return obj
        meta = obj.get("metadata") or {}
        return {"metadata": {k: meta[k] for k in _NAMING if k in meta}}

    def _model(self, obj: JSON, before: JSON | None, model: Any) -> Any:
        """The converted object: the one kept for `before` when it is the same version of the object."""
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if before is not None and rv and (before.get("metadata") or {}).get("resourceVersion") == rv:
            return model
        try:
            return self._convert(obj)  # type: ignore[misc]
        except SnapshotError as err:
            return err

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self, wait: float = 0.5) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()  # type: ignore[no-untyped-call]
        if self._thread is not None and wait > 0:
            self._thread.join(timeout=wait)  # a daemon: a watch blocked in a read ends with the process

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            just_listed = False
            try:
                if self.resource_version is None:
                    self._relist()
                    just_listed = True  # a 410 on a version the server just gave us: back off, do not spin
                self._watch_once()
                failures = 0
            except ApiException as err:
                if err.status == 410 and not just_listed:  # Gone: our version was compacted away; relist now
                    log.info("watch %s expired (410 Gone), relisting", self.kind)
                    self.resource_version = None
                    continue
                if err.status == 404 and self.optional:
                    self._absent()
                    continue
                failures = self._failed(failures, f"HTTP {err.status}: {err.reason}")
            except Exception as err:
                failures = self._failed(failures, f"{err.__class__.__name__}: {err}")

    def _absent(self) -> None:
        if not self.synced.is_set() or self._objects:
            log.info("%s: not served by the API server (404); empty until it is", self.kind)
        with self._lock:
            self._objects, self._models = {}, {}
            if self._index is not None:
                self._index = PodIndex()
        self.resource_version = None
        self.synced.set()
        self._stop.wait(ABSENT_RECHECK)

    def _failed(self, failures: int, why: str) -> int:
        self.synced.clear()
        self.resource_version = None  # events may have been missed: relist on reconnect
        self.errors += 1
        delay = min(self._backoff_max, self._backoff_initial * 2 ** failures)
        delay *= random.uniform(0.8, 1.2)  # noqa: S311 -- jitter, not cryptography
        log.warning("%s cache: %s; retrying in %.1fs", self.kind, why, delay)
        self._stop.wait(delay)
        return failures + 1

    def _relist(self) -> None:
        objects: dict[str, JSON] = {}
        cont: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": self._page_size, "_preload_content": False}
            if cont:
                kwargs["_continue"] = cont
            resp = self._list_fn(**kwargs)
            body = json.loads(resp.data)
            for obj in body.get("items") or ():
                objects[_key(obj)] = obj
            meta = body.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                break
        models: dict[str, Any] = {}
        if self._convert is not None:
            for k, obj in objects.items():
                models[k] = self._model(obj, self._objects.get(k), self._models.get(k))
                objects[k] = self._kept(obj, models[k])
        index = index_of((k, models[k], obj) for k, obj in objects.items()) if self._index is not None else None
        with self._lock:
            self._objects, self._models, self._index = objects, models, index
        self.resource_version = str(meta.get("resourceVersion"))
        self.relists += 1
        self.synced.set()
        log.debug("%s cache: listed %d at resourceVersion %s", self.kind, len(objects), self.resource_version)

    def _watch_once(self) -> None:
        self._watch = RawWatch()  # type: ignore[no-untyped-call]
        stream = self._watch.stream(  # type: ignore[no-untyped-call]
            self._list_fn, resource_version=self.resource_version, allow_watch_bookmarks=True,
            timeout_seconds=self._watch_timeout, _request_timeout=(10, self._watch_timeout + 30),
        )
        # The client raises ApiException(410) for an expired resourceVersion (no retry: timeout given).
        for event in stream:
            kind, obj = event["type"], event["raw_object"]
            if kind == "ERROR":
                code = int(obj.get("code") or 500)
                raise ApiException(status=code, reason=obj.get("message", ""))
            self.apply(kind, obj)
            if self._stop.is_set():
                break


    def apply(self, kind: str, obj: JSON) -> None:
        """One watch event (ADDED, MODIFIED, DELETED; BOOKMARK only moves the resourceVersion)."""
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        key = _key(obj)
        if kind in ("ADDED", "MODIFIED"):
            if self._convert is not None:  # converted here, in the watch's thread, not by the pass
                model = self._model(obj, self._objects.get(key), self._models.get(key))
                obj = self._kept(obj, model)
            with self._lock:
                self._objects[key] = obj
                if self._convert is not None:
                    self._models[key] = model
                if self._index is not None:
                    self._index.put(key, model, obj)
        elif kind == "DELETED":
            with self._lock:
                self._objects.pop(key, None)
                self._models.pop(key, None)
                if self._index is not None:
                    self._index.delete(key)
        if rv:
            self.resource_version = str(rv)


class RawWatch(watch.Watch):
    """Watch events with the API's JSON only: the client's models validate each object as it arrives, and one
    malformed object would end the watch for all of them (the conversion skips it alone, with a reason)."""

    def get_return_type(self, func: Callable[..., Any]) -> None:
        return None


def _key(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class ClusterCache:
    """Pods, nodes and PDBs of the whole cluster, and the conversion to the core's model: the live
    `scaler.ports.Observer`."""

    def __init__(self, api: client.ApiClient, **informer_options: Any) -> None:
        self.requests = ProvisioningRequests(api)
        core = client.CoreV1Api(api)
        policy = client.PolicyV1Api(api)
        self.pods = Informer("pods", core.list_pod_for_all_namespaces, convert=pod_entry, slim=True, index=True,
                             **informer_options)
        self.nodes = Informer("nodes", core.list_node, convert=lambda obj: node_from_json(obj, keys.LABEL_POOL),
                              **informer_options)
        self.pdbs = Informer("poddisruptionbudgets", policy.list_pod_disruption_budget_for_all_namespaces,
                             **informer_options)
        # What kube-scheduler's volume and namespaceSelector filters read (scaler.core.scheduling.filters).
        storage = client.StorageV1Api(api)
        self.pvcs = Informer("persistentvolumeclaims", core.list_persistent_volume_claim_for_all_namespaces,
                             **informer_options)
        self.pvs = Informer("persistentvolumes", core.list_persistent_volume, **informer_options)
        self.storage_classes = Informer("storageclasses", storage.list_storage_class, **informer_options)
        self.csinodes = Informer("csinodes", storage.list_csi_node, **informer_options)
        self.namespaces = Informer("namespaces", core.list_namespace, **informer_options)
        # What kube-scheduler's DynamicResources filter reads; absent before Kubernetes 1.34 (optional).
        dra = client.ResourceV1Api(api)
        self.device_classes = Informer("deviceclasses", dra.list_device_class, optional=True, **informer_options)
        self.resource_claims = Informer("resourceclaims", dra.list_resource_claim_for_all_namespaces,
                                        optional=True, **informer_options)
        self.claim_templates = Informer("resourceclaimtemplates",
                                        dra.list_resource_claim_template_for_all_namespaces, optional=True,
                                        **informer_options)
        self.resource_slices = Informer("resourceslices", dra.list_resource_slice, optional=True,
                                        **informer_options)
        # CapacityBuffers (optional: a cluster without the CRD has none) and the PodTemplates they name.
        custom = client.CustomObjectsApi(api)
        self.buffers = Informer("capacitybuffers", functools.partial(
            custom.list_cluster_custom_object, convert_buffers.GROUP, convert_buffers.VERSION, convert_buffers.PLURAL),
            optional=True, **informer_options)
        self.pod_templates = Informer("podtemplates", core.list_pod_template_for_all_namespaces, **informer_options)
        self.scalable = kube_buffers.Scalable(api)
        self._last_buffers: list[CapacityBuffer] = []
        self.informers = (self.pods, self.nodes, self.pdbs, self.pvcs, self.pvs, self.storage_classes,
                          self.csinodes, self.namespaces, self.device_classes, self.resource_claims,
                          self.claim_templates, self.resource_slices, self.buffers, self.pod_templates)

    def start(self) -> None:
        for inf in self.informers:
            inf.start()

    def stop(self, wait: float = 0.5) -> None:
        for inf in self.informers:
            inf.stop(wait=0)
        deadline = time.monotonic() + wait
        for inf in self.informers:
            if inf._thread is not None:
                inf._thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float, *, pdbs: bool = True) -> bool:
        """Every watch synced within `timeout`; `pdbs=False`: all but the PodDisruptionBudgets (they matter
        to drains only, and an API without policy/v1 or a role without them would delay every start)."""
        deadline = time.monotonic() + timeout
        return all(inf.synced.wait(max(0.0, deadline - time.monotonic())) for inf in self.informers
                   if pdbs or inf is not self.pdbs)

    @property
    def fresh(self) -> bool:
        """Pods and nodes are synced: what every decision reads. The PodDisruptionBudgets matter to drains
        only, so a failing PDB watch (no policy/v1, an RBAC 403) stops drains and nothing else."""
        return self.pods.synced.is_set() and self.nodes.synced.is_set()

    @property
    def pdbs_fresh(self) -> bool:
        return self.pdbs.synced.is_set()

    def stale(self) -> list[str]:
        return [inf.kind for inf in self.informers if not inf.synced.is_set()]

    def raw_node(self, name: str) -> JSON | None:
        for obj in self.nodes.items():
            if (obj.get("metadata") or {}).get("name") == name:
                return obj
        return None

    def observe(self, pool_of: Callable[[str], str | None]) -> ClusterView:
        """`scaler.ports.Observer`: the pass's view of the cluster. Objects that do not convert are logged,
        left out and listed in the view's `skipped`: one bad object never stops the pass (a pod whose claim
        is left out is planned as the scheduler would: unbound)."""
        skipped: list[Skipped] = []
        skip = self._skipper(skipped)
        fresh, pdbs_fresh, stale = self.fresh, self.pdbs_fresh, self.stale()
        nodes = self._converted(self.nodes, skip)
        pods = self.pods.view()
        for err, obj in pods.errors:
            skip(err, obj)
        view: dict[str, Node] = {}
        for model in nodes:  # each a copy with a list of its own: what one pass does to it stays in that pass
            node = view[model.name] = with_pods(model, pods.bound.get(model.name, ()))
            if node.provider_id:
                node.pool = pool_of(node.provider_id) or node.pool
        pdbs = []
        for obj in self.pdbs.items():
            try:
                pdbs.append(pdb_from_json(obj))
            except SnapshotError as err:
                skip(err, obj)
        storage, namespaces = storage_view(self.pvcs.items(), self.pvs.items(), self.storage_classes.items(),
                                           self.csinodes.items(), self.namespaces.items(), skip=skip)
        dra = dra_view(self.device_classes.items(), self.resource_claims.items(), self.claim_templates.items(),
                       self.resource_slices.items(), skip)
        return ClusterView(pods.pending, list(view.values()), pdbs, fresh, pdbs_fresh, storage,
                           namespaces or {}, stale, skipped, dra, self._buffers(skip))

    def _buffers(self, skip: Callable[[SnapshotError, Mapping[str, Any]], None]) -> list[CapacityBuffer]:
        """The CapacityBuffers with their PodTemplates (and scalable objects, read now); one that does not
        convert is skipped. While either watch is not synced, the last ones read (a template not seen yet
        would read as missing, and a buffer lost from view would give its nodes back)."""
        if not (self.pod_templates.synced.is_set() and self.buffers.synced.is_set()):
            return self._last_buffers
        templates = {_key(t): t for t in self.pod_templates.items()}
        out = []
        for obj in self.buffers.items():
            try:
                out.append(convert_buffers.buffer_from_json(obj, templates, self.scalable))
            except SnapshotError as err:
                skip(err, obj)
            except KubeError as err:
                log.warning("capacity buffer %s left out of this pass: %s", _key(obj), err)
        self._last_buffers = out
        return out

    @staticmethod
    def _converted(informer: Informer, skip: Callable[[SnapshotError, Mapping[str, Any]], None]) -> list[Any]:
        """The informer's converted objects; those that did not convert go to `skip` (every pass, as the
        conversion of the whole list used to)."""
        out = []
        for model, obj in informer.models():
            if isinstance(model, SnapshotError):
                skip(model, obj)
            elif model is not None:
                out.append(model)
        return out

    def provisioning_requests(self) -> list[ProvisioningRequest]:
        """Read when asked (a pass on fresh data), not watched: there are few, and their PodTemplates too.
        Those that do not convert are left out and listed in `skipped_requests()`."""
        return self.requests.read()

    def skipped_requests(self) -> list[Skipped]:
        return list(self.requests.skipped)

    @staticmethod
    def _skipper(into: list[Skipped]) -> Callable[[SnapshotError, Mapping[str, Any]], None]:
        def skip(err: SnapshotError, obj: Mapping[str, Any]) -> None:
            log.warning("skipping %s", err)
            meta = obj.get("metadata") or {}
            kind = KINDS.get(str(err).split(" ", 1)[0], str(obj.get("kind") or "?"))
            into.append(Skipped(kind, str(meta.get("namespace") or ""), str(meta.get("name") or "?"),
                                str(meta.get("uid") or ""), str(err)))
        return skip
