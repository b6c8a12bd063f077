"""Kubernetes JSON to the core's model: the storage objects and namespaces kube-scheduler's volume and
namespaceSelector filters read (PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes,
Namespaces). Pure; the pods and nodes are `scaler.kube.convert`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from scaler.core.model import keys
from scaler.core.model.errors import FieldError, render_path
from scaler.core.model.objects import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    SelectorRequirement,
    StorageClass,
)
from scaler.core.model.resources import parse_resources
from scaler.core.model.storage import Storage, csi_driver
from scaler.kube import validate
from scaler.kube.convert import JSON, SnapshotError, selector_term


def _storage_bytes(raw: Any) -> int:
    return parse_resources({"storage": raw})["storage"] if raw is not None else 0


def pvc_from_json(obj: JSON) -> PersistentVolumeClaim:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    ann = meta.get("annotations") or {}
    owners = [o for o in meta.get("ownerReferences") or () if o.get("controller")]
    try:
        return PersistentVolumeClaim(
            name=meta["name"], namespace=meta.get("namespace", "default"),
            volume_name=spec.get("volumeName") or "",
            storage_class=spec.get("storageClassName") or "",
            access_modes=tuple(spec.get("accessModes") or ()),
            request=_storage_bytes(((spec.get("resources") or {}).get("requests") or {}).get("storage")),
            phase=(obj.get("status") or {}).get("phase", "Pending"),
            bind_completed=keys.ANNOTATION_BIND_COMPLETED in ann,
            selected_node=ann.get(keys.ANNOTATION_SELECTED_NODE, ""),
            terminating=bool(meta.get("deletionTimestamp")),
            owner_uid=owners[0].get("uid", "") if owners else "",
        )
    except (KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"persistentvolumeclaim {meta.get('namespace', '?')}/{meta.get('name', '?')}: "
                            f"{err.__class__.__name__}: {err}") from None


def pv_from_json(obj: JSON) -> PersistentVolume:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    try:
        ref = spec.get("claimRef") or {}
        required = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
        driver, handle = "", ""
        if spec.get("csi"):
            driver, handle = spec["csi"]["driver"], spec["csi"].get("volumeHandle", "")
        elif spec.get("awsElasticBlockStore"):
            driver, handle = keys.CSI_EBS, spec["awsElasticBlockStore"].get("volumeID", "")
        elif spec.get("azureDisk"):
            driver, handle = keys.CSI_AZURE_DISK, spec["azureDisk"].get("diskURI", "")
        return PersistentVolume(
            name=meta["name"], labels=dict(meta.get("labels") or {}),
            node_affinity=tuple(selector_term(t, f"spec.nodeAffinity.required.nodeSelectorTerms[{i}]")
                                for i, t in enumerate(required or ())),
            storage_class=spec.get("storageClassName") or "",
            capacity=_storage_bytes((spec.get("capacity") or {}).get("storage")),
            access_modes=tuple(spec.get("accessModes") or ()),
            claim=f"{ref.get('namespace', '')}/{ref['name']}" if ref.get("name") else "",
            phase=(obj.get("status") or {}).get("phase", "Available"),
            driver=driver, handle=handle,
        )
    except FieldError as err:
        raise SnapshotError(f"persistentvolume {meta.get('name', '?')}: {render_path(err.path)}: {err.message}") \
            from None
    except (KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"persistentvolume {meta.get('name', '?')}: {err.__class__.__name__}: {err}") from None


def storage_class_from_json(obj: JSON) -> StorageClass:
    meta = obj.get("metadata") or {}
    try:
        validate.binding_mode(obj)
        topologies = tuple(
            tuple(SelectorRequirement(e["key"], "In", tuple(e.get("values") or ()))
                  for e in t.get("matchLabelExpressions") or ())
            for t in obj.get("allowedTopologies") or ())
        return StorageClass(
            name=meta["name"], provisioner=obj.get("provisioner") or "",
            binding_mode=obj.get("volumeBindingMode") or "Immediate",
            allowed_topologies=tuple(t for t in topologies if t),
        )
    except FieldError as err:
        raise SnapshotError(f"storageclass {meta.get('name', '?')}: {render_path(err.path)}: {err.message}") from None
    except (KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"storageclass {meta.get('name', '?')}: {err.__class__.__name__}: {err}") from None


def csinode_from_json(obj: JSON) -> CSINode:
    meta = obj.get("metadata") or {}
    try:
        limits = {}
        for d in (obj.get("spec") or {}).get("drivers") or ():
            count = (d.get("allocatable") or {}).get("count")
            if count is not None:
                limits[csi_driver(d["name"])] = int(count)
        return CSINode(meta["name"], limits)
    except (KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"csinode {meta.get('name', '?')}: {err.__class__.__name__}: {err}") from None


def namespace_labels_from_json(obj: JSON) -> tuple[str, dict[str, str]]:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    return name, {keys.LABEL_NAMESPACE_NAME: name, **(meta.get("labels") or {})}



def storage_view(claims: Iterable[JSON], volumes: Iterable[JSON], classes: Iterable[JSON], csinodes: Iterable[JSON],
                 namespaces: Iterable[JSON] | None = None, *,
                 skip: Callable[[str, SnapshotError, JSON], None] | None = None
                 ) -> tuple[Storage, dict[str, dict[str, str]] | None]:
    """The storage objects and the namespaces' labels as the filters read them (`scaler.core.scheduling.filters`).
    An object that does not convert raises SnapshotError, or goes to `skip` and is left out. The
    namespaces are None when none were given (namespaceSelector then sees the name label only)."""
    storage = Storage()
    kinds: list[tuple[str, Iterable[JSON], Callable[[JSON], Any], Callable[[Any], None]]] = [
        ("PersistentVolumeClaim", claims, pvc_from_json, lambda c: storage.claims.__setitem__(c.key, c)),
        ("PersistentVolume", volumes, pv_from_json, lambda v: storage.volumes.__setitem__(v.name, v)),
        ("StorageClass", classes, storage_class_from_json, lambda c: storage.classes.__setitem__(c.name, c)),
        ("CSINode", csinodes, csinode_from_json, lambda n: storage.csinodes.__setitem__(n.name, n)),
    ]
    for kind, objs, fn, put in kinds:
        for obj in objs:
            try:
                put(fn(obj))
            except SnapshotError as err:
                if skip is None:
                    raise
                skip(kind, err, obj)
    labels = None if namespaces is None else dict(namespace_labels_from_json(o) for o in namespaces)
    return storage, labels
