"""The DRA objects (resource.k8s.io/v1) the watch cache holds -> the Snapshot's `DraObjects`, one object at a
time: one that does not convert is skipped with its reason (a pod whose claim or class is left out is
told so by the DynamicResources filter), never a failed pass."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from scaler.core.dra import convert as dra_convert
from scaler.core.dra.extended import clashes
from scaler.core.dra.taints import with_rules
from scaler.core.model.dra import DraObjects
from scaler.kube.convert import SnapshotError

T = TypeVar("T")
Skip = Callable[[str, SnapshotError, Mapping[str, Any]], None]  # (the object's kind, why, the object)


def _each(kind: str, objs: Iterable[dict[str, Any]], convert: Callable[[dict[str, Any]], T], skip: Skip) -> list[T]:
    out: list[T] = []
    for obj in objs:
        try:
            out.append(convert(obj))
        except dra_convert.DraInputError as err:
            skip(kind, SnapshotError(str(err)), obj)
    return out


def dra_view(classes: Iterable[dict[str, Any]], claims: Iterable[dict[str, Any]],
             templates: Iterable[dict[str, Any]], slices: Iterable[dict[str, Any]], skip: Skip,
             taint_rules: Iterable[dict[str, Any]] = ()) -> DraObjects:
    classes = list(classes)
    served = _each("DeviceClass", classes, dra_convert.device_class, skip)
    raw = {(o.get("metadata") or {}).get("name"): o for o in classes}
    for cls, first in clashes(served):  # the first by name serves it; the other is left out with a Warning
        skip("DeviceClass", SnapshotError(f"DeviceClass {cls.name}: spec.extendedResourceName: "
                                          f"{cls.extended_resource_name} is also served by DeviceClass {first}"),
             raw.get(cls.name, {}))
        served = [c for c in served if c is not cls]
    return DraObjects(
        classes={c.name: c for c in served},
        claims={c.key: c for c in _each("ResourceClaim", claims, dra_convert.resource_claim, skip)},
        templates={f"{t.namespace}/{t.name}": t
                   for t in _each("ResourceClaimTemplate", templates, dra_convert.resource_claim_template, skip)},
        slices=with_rules(_each("ResourceSlice", slices, dra_convert.resource_slice, skip),
                          _each("DeviceTaintRule", taint_rules, dra_convert.device_taint_rule, skip)))
