"""VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone, as far as a snapshot can tell.

PreFilter (fails the pod on every node, new ones too): a claim that does not exist, is being deleted,
is Lost, or (generic ephemeral volume) belongs to another pod; an unbound claim whose class binds
Immediately (or that has no class), which the PV controller, not a node, must resolve; a
ReadWriteOncePod claim another placed pod uses.

Filter, per node, in the scheduler's order:
- NodeVolumeLimits: per CSI driver, the distinct volumes of the node's pods plus the pod's new ones
  must not exceed the node's limit (its CSINode; for a template, `scaler.core.scheduling.attach`). An unbound
  claim counts for its class's provisioner.
- VolumeBinding: a bound claim's PV must exist and its node affinity must match the node; an unbound
  WaitForFirstConsumer claim needs an available PV of its class that fits and whose node affinity
  matches, or else a class that provisions (a provisioner) in an `allowedTopologies` term the node
  matches; a claim whose provisioning already picked a node (selected-node) fits that node only.
- VolumeZone: the zone / region labels of a bound claim's PV (a `__`-separated set) must contain the
  node's value (a node without any zone / region label passes).

Not modelled: CSIStorageCapacity (capacity per topology segment), PVC label selectors for static
binding, the inline in-tree disks of VolumeRestrictions' disk conflict (deprecated volume types).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from scaler.core.model import keys
from scaler.core.model.objects import (
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
)
from scaler.core.model.selectors import term_matches
from scaler.core.model.storage import Attachment, Storage
from scaler.core.scheduling.attach import template_limits
from scaler.core.scheduling.filters import reasons
from scaler.core.scheduling.filters.index import Placed

RWOP = "ReadWriteOncePod"
ZONE_LABELS = (keys.LABEL_ZONE_BETA, keys.LABEL_REGION_BETA, keys.LABEL_ZONE, keys.LABEL_REGION)
_TO_GA = {keys.LABEL_ZONE_BETA: keys.LABEL_ZONE, keys.LABEL_REGION_BETA: keys.LABEL_REGION}



def node_limits(storage: Storage, node: Node) -> Mapping[str, int]:
    """The node's attach limits per CSI driver: its CSINode's, or for a template the instance type's."""
    csinode = storage.csinodes.get(node.name)
    if csinode is not None:
        return csinode.limits
    if node.is_template:
        return _template_limits(node.labels.get(keys.LABEL_INSTANCE_TYPE))
    return {}


@functools.cache
def _template_limits(instance_type: str | None) -> Mapping[str, int]:
    return template_limits(instance_type)


def _zone_values(pv: PersistentVolume) -> list[tuple[str, frozenset[str]]]:
    out = []
    for key in ZONE_LABELS:
        value = pv.labels.get(key)
        if value:
            out.append((key, frozenset(v.strip() for v in value.split("__") if v.strip())))
    return out


class VolumeCheck:
    """The PreFilter state of one pod (`pod_reason` fails it everywhere); `reason(node)` is the Filter."""

    __slots__ = ("attach", "bound", "label_keys", "memo", "missing_pv", "placed", "pod_reason", "storage",
                 "unbound", "zones")

    def __init__(self, placed: Placed, storage: Storage, pod: Pod) -> None:
        self.placed = placed
        self.storage = storage
        self.pod_reason: str | None = None
        self.bound: list[PersistentVolume] = []
        self.missing_pv = False
        self.unbound: list[tuple[PersistentVolumeClaim, StorageClass | None]] = []
        self.zones: list[tuple[str, frozenset[str]]] = []
        self.attach: list[Attachment] = []
        self.label_keys: tuple[str, ...] = ()
        self.memo: dict[tuple[object, ...], str | None] = {}
        immediate = False
        for ref in pod.claims:
            claim = storage.claims.get(f"{pod.namespace}/{ref.name}")
            if claim is None:
                self.pod_reason = (reasons.ephemeral_claim_missing(ref.name) if ref.ephemeral
                                   else reasons.claim_not_found(ref.name))
                return
            if claim.phase == "Lost":
                self.pod_reason = reasons.claim_lost(claim.name, claim.volume_name)
                return
            if claim.terminating:
                self.pod_reason = reasons.claim_deleting(claim.name)
                return
            if ref.ephemeral and pod.uid and claim.owner_uid != pod.uid:
                self.pod_reason = reasons.claim_not_for_pod(claim.name)
                return
            if RWOP in claim.access_modes and placed.claim_users.get(claim.key, 0) > 0:
                self.pod_reason = reasons.RWOP_CONFLICT
                return
            if claim.bound:
                pv = storage.volumes.get(claim.volume_name)
                if pv is None:
                    self.missing_pv = True
                    continue
                self.bound.append(pv)
                self.zones.extend(_zone_values(pv))
                continue
            sc = storage.classes.get(claim.storage_class) if claim.storage_class else None
            if sc is None or sc.binding_mode != "WaitForFirstConsumer" or claim.volume_name:
                immediate = True
                continue
            self.unbound.append((claim, sc))
        if immediate:
            self.pod_reason = reasons.UNBOUND_IMMEDIATE
            return
        self.attach = list(set(storage.attachments(pod)))
        # The verdicts other than the attach limit read these node labels (and the name, for a claim
        # whose provisioning picked a node): nodes alike in them are judged once.
        keys_read: set[str] = set(ZONE_LABELS)
        for pv in self.bound:
            keys_read.update(r.key for t in pv.node_affinity for r in t)
        for claim, sc in self.unbound:
            if sc is not None:
                keys_read.update(r.key for t in sc.allowed_topologies for r in t)
            for pv in storage.available(claim.storage_class):
                keys_read.update(r.key for t in pv.node_affinity for r in t)
        self.label_keys = tuple(sorted(keys_read))

    def reason(self, node: Node) -> str | None:
        if self.attach:
            why = self._limits(node)
            if why is not None:
                return why
        labels = node.labels
        key = (tuple(labels.get(k) for k in self.label_keys),
               node.name if any(c.selected_node for c, _ in self.unbound) else None)
        if key in self.memo:
            return self.memo[key]
        why = self.memo[key] = self._by_labels(node)
        return why

    def label_reason(self, node: Node) -> str | None:
        """The verdicts that depend on the node's labels alone (not its name, hostname or volumes):
        the same for every node a template opens. None when they pass or cannot be told by labels."""
        if keys.LABEL_HOSTNAME in self.label_keys or any(c.selected_node for c, _ in self.unbound):
            return None
        key = (tuple(node.labels.get(k) for k in self.label_keys), None)
        if key not in self.memo:
            self.memo[key] = self._by_labels(node)
        return self.memo[key]

    def _by_labels(self, node: Node) -> str | None:
        labels = node.labels
        for pv in self.bound:
            if pv.node_affinity and not any(term_matches(t, labels) for t in pv.node_affinity):
                return reasons.VOLUME_NODE_CONFLICT
        if self.unbound and not self._bindable(node):
            return reasons.VOLUME_BIND_CONFLICT
        if self.missing_pv:
            return reasons.VOLUME_PV_MISSING
        if self.zones and any(k in labels for k in ZONE_LABELS):
            for key, values in self.zones:
                v = labels.get(key)
                if v is None:
                    v = labels.get(_TO_GA.get(key, key))
                if v is None or v not in values:
                    return reasons.VOLUME_ZONE
        return None

    def _limits(self, node: Node) -> str | None:
        limits = node_limits(self.storage, node)
        if not limits:
            return None
        on = self.placed.attached.get(node.name, {})
        new: dict[str, int] = {}
        for att in self.attach:
            if att not in on:
                new[att[0]] = new.get(att[0], 0) + 1
        used = self.placed.attached_per_driver.get(node.name, {})
        for driver, n in new.items():
            limit = limits.get(driver)
            if limit is not None and used.get(driver, 0) + n > limit:
                return reasons.MAX_VOLUMES
        return None

    def _bindable(self, node: Node) -> bool:
        labels = node.labels
        chosen: set[str] = set()
        for claim, sc in sorted(self.unbound, key=lambda cs: cs[0].request):
            if claim.selected_node:
                if claim.selected_node != node.name:
                    return False
                continue
            pv = self._static(claim, labels, chosen)
            if pv is not None:
                chosen.add(pv.name)
                continue
            if sc is None or not sc.provisioner or sc.provisioner == keys.NO_PROVISIONER:
                return False
            if sc.allowed_topologies and not any(term_matches(t, labels) for t in sc.allowed_topologies):
                return False
        return True

    def _static(self, claim: PersistentVolumeClaim, labels: Mapping[str, str],
                chosen: set[str]) -> PersistentVolume | None:
        for pv in self.storage.available(claim.storage_class):
            if pv.name in chosen or (pv.claim and pv.claim != claim.key):
                continue
            if pv.capacity < claim.request or not set(claim.access_modes) <= set(pv.access_modes):
                continue
            if pv.node_affinity and not any(term_matches(t, labels) for t in pv.node_affinity):
                continue
            return pv
        return None
