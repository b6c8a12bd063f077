"""The storage objects a pass observes: claims, volumes, classes and CSINodes, with the two questions the
volume filters and the binder ask of them (which volumes a class can still bind, which attachments a pod's
claims need on its node)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.core.model import keys
from scaler.core.model.objects import CSINode, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass

_MIGRATED = {keys.INTREE_EBS: keys.CSI_EBS, keys.INTREE_AZURE_DISK: keys.CSI_AZURE_DISK}
Attachment = tuple[str, str]  # (CSI driver, volume handle)


def csi_driver(provisioner: str) -> str:
    """The CSI driver that attaches a provisioner's volumes (in-tree EBS / Azure Disk are migrated)."""
    return _MIGRATED.get(provisioner, provisioner)


@dataclass(slots=True)
class Storage:
    """The storage objects of a cluster: claims by namespace/name, volumes, classes, CSINodes by name."""

    claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    csinodes: dict[str, CSINode] = field(default_factory=dict)
    _by_class: dict[str, list[PersistentVolume]] | None = None

    def available(self, storage_class: str) -> list[PersistentVolume]:
        """PVs of a class a claim could still bind (free, or pre-bound to a claim)."""
        if self._by_class is None:
            self._by_class = {}
            for pv in self.volumes.values():
                if pv.phase in ("Available", "Pending") or (pv.claim and pv.phase != "Bound"):
                    self._by_class.setdefault(pv.storage_class, []).append(pv)
        return self._by_class.get(storage_class, [])

    def attachments(self, pod: Pod) -> list[Attachment]:
        """The (driver, volume) attachments the pod's claims need on its node."""
        out: list[Attachment] = []
        for ref in pod.claims:
            claim = self.claims.get(f"{pod.namespace}/{ref.name}")
            if claim is None:
                continue
            if claim.volume_name:
                pv = self.volumes.get(claim.volume_name)
                if pv is not None and pv.driver:
                    out.append((pv.driver, pv.handle or pv.name))
                continue
            sc = self.classes.get(claim.storage_class)
            if sc is not None and sc.provisioner and sc.provisioner != keys.NO_PROVISIONER:
                out.append((csi_driver(sc.provisioner), claim.key))
        return out
