"""A list + watch cache of pods, nodes, PodDisruptionBudgets, storage and DRA objects, CapacityBuffers and
the gangs' PodGroups (the official client's Watch).

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
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client

from scaler.core.model import keys
from scaler.core.model.buffers import CapacityBuffer
from scaler.core.model.objects import Node
from scaler.core.model.podgroup import PodGroup
from scaler.core.model.provreq import ProvisioningRequest
from scaler.kube import buffers as kube_buffers
from scaler.kube import convert_buffers
from scaler.kube import convert_podgroup as podgroups
from scaler.kube.client import TIMEOUT
from scaler.kube.convert import SnapshotError, node_from_json, pdb_from_json
from scaler.kube.convert_dra import dra_view
from scaler.kube.convert_storage import storage_view
from scaler.kube.informer import Informer, key_of
from scaler.kube.provreq import ProvisioningRequests
from scaler.kube.view import pod_entry, with_pods
from scaler.ports import ClusterView, KubeError, Skipped

log = logging.getLogger(__name__)
JSON = dict[str, Any]
Skip = Callable[[str, SnapshotError, Mapping[str, Any]], None]  # (the object's kind, why, the object)


class ClusterCache:
    """Pods, nodes and PDBs of the whole cluster, and the conversion to the core's model: the live
    `scaler.ports.Observer`."""

    def __init__(self, api: client.ApiClient, *, timeout: tuple[float, float] = TIMEOUT,
                 **informer_options: Any) -> None:
        """`timeout`: (connect, read) seconds of the calls outside the watches; `informer_options`: the watches'."""
        self.requests = ProvisioningRequests(api, timeout)
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
        self.taint_rules = Informer("devicetaintrules", dra.list_device_taint_rule, optional=True, **informer_options)
        # CapacityBuffers (optional: a cluster without the CRD has none) and the PodTemplates they name.
        custom = client.CustomObjectsApi(api)
        self.buffers = Informer("capacitybuffers", functools.partial(
            custom.list_cluster_custom_object, convert_buffers.GROUP, convert_buffers.VERSION, convert_buffers.PLURAL),
            optional=True, **informer_options)
        self.pod_templates = Informer("podtemplates", core.list_pod_template_for_all_namespaces, **informer_options)
        # The gangs' PodGroups, from each API that serves them (optional: none served is no gang object).
        self.pod_groups = tuple(Informer(
            f"podgroups.{version}.{group}",
            functools.partial(custom.list_cluster_custom_object, group, version, podgroups.PLURAL),
            optional=True, convert=functools.partial(podgroups.from_list, f"{group}/{version}"), **informer_options)
            for group, version in podgroups.SOURCES)
        self.scalable = kube_buffers.Scalable(api, timeout)
        self._last_buffers: list[CapacityBuffer] = []
        # node name -> what its version stands for (converted node, its pods, its pool) and the node handed out
        self._versions: dict[str, tuple[Node, object, str | None, Node]] = {}
        self._version = 0
        self.informers = (self.pods, self.nodes, self.pdbs, self.pvcs, self.pvs, self.storage_classes,
                          self.csinodes, self.namespaces, self.device_classes, self.resource_claims,
                          self.claim_templates, self.resource_slices, self.taint_rules, self.buffers,
                          self.pod_templates,
                          *self.pod_groups)

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
        nodes = self._converted(self.nodes, "Node", skip)
        pods = self.pods.view()
        for err, obj in pods.errors:
            skip("Pod", err, obj)
        view: list[Node] = []
        versions: dict[str, tuple[Node, object, str | None, Node]] = {}
        for model in nodes:
            on = pods.bound.get(model.name, ())
            pool = (pool_of(model.provider_id) or model.pool) if model.provider_id else model.pool
            # The same converted node, list of pods (a new one on any change) and pool: the same version, and
            # the node the last pass was given (a pass changes no node of its view: provreq books on copies).
            last = self._versions.get(model.name)
            if last is None or last[0] is not model or last[1] is not on or last[2] != pool:
                node = with_pods(model, on)  # a copy with a list of its own, the converted node is kept as it is
                node.pool = pool
                self._version += 1
                node.version = self._version
                last = (model, on, pool, node)
            versions[model.name] = last
            view.append(last[3])
        self._versions = versions
        pdbs = []
        for obj in self.pdbs.items():
            try:
                pdbs.append(pdb_from_json(obj))
            except SnapshotError as err:
                skip("PodDisruptionBudget", err, obj)
        storage, namespaces = storage_view(self.pvcs.items(), self.pvs.items(), self.storage_classes.items(),
                                           self.csinodes.items(), self.namespaces.items(), skip=skip)
        dra = dra_view(self.device_classes.items(), self.resource_claims.items(), self.claim_templates.items(),
                       self.resource_slices.items(), skip, self.taint_rules.items())
        groups: dict[str, PodGroup] = {}
        for informer in self.pod_groups:
            groups.update((g.key, g) for g in self._converted(informer, "PodGroup", skip))
        return ClusterView(pods.pending, view, pdbs, fresh, pdbs_fresh, storage,
                           namespaces or {}, stale, skipped, dra, self._buffers(skip), groups)

    def _buffers(self, skip: Skip) -> list[CapacityBuffer]:
        """The CapacityBuffers with their PodTemplates (and scalable objects, read now); one that does not
        convert is skipped. While either watch is not synced, the last ones read (a template not seen yet
        would read as missing, and a buffer lost from view would give its nodes back)."""
        if not (self.pod_templates.synced.is_set() and self.buffers.synced.is_set()):
            return self._last_buffers
        templates = {key_of(t): t for t in self.pod_templates.items()}
        out = []
        for obj in self.buffers.items():
            try:
                out.append(convert_buffers.buffer_from_json(obj, templates, self.scalable))
            except SnapshotError as err:
                skip("CapacityBuffer", err, obj)
            except KubeError as err:
                log.warning("capacity buffer %s left out of this pass: %s", key_of(obj), err)
        self._last_buffers = out
        return out

    @staticmethod
    def _converted(informer: Informer, kind: str, skip: Skip) -> list[Any]:
        """The informer's converted objects; those that did not convert go to `skip` (every pass, as the
        conversion of the whole list used to)."""
        out = []
        for model, obj in informer.models():
            if isinstance(model, SnapshotError):
                skip(kind, model, obj)
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
    def _skipper(into: list[Skipped]) -> Skip:
        def skip(kind: str, err: SnapshotError, obj: Mapping[str, Any]) -> None:
            log.warning("skipping %s", err)
            meta = obj.get("metadata") or {}
            into.append(Skipped(kind, str(meta.get("namespace") or ""), str(meta.get("name") or "?"),
                                str(meta.get("uid") or ""), str(err)))
        return skip
