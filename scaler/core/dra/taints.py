"""DeviceTaintRules (resource.k8s.io/v1, GA in 1.37): a rule's taint is on every device its selector matches,
as if the driver had published it (kube-scheduler's ResourceSlice tracker merges them the same way), so the
allocator and the repair signals read one list of taints per device."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from scaler.core.model.dra import DeviceTaintRule, ResourceSlice


def with_rules(slices: Sequence[ResourceSlice], rules: Sequence[DeviceTaintRule]) -> list[ResourceSlice]:
    """The slices with each rule's taint added to the devices it selects (untouched slices are the same objects)."""
    if not rules:
        return list(slices)
    out = []
    for s in slices:
        devices = []
        changed = False
        for d in s.devices:
            extra = tuple(r.taint for r in rules if r.selects(s.driver, s.pool.name, d.name))
            changed = changed or bool(extra)
            devices.append(dataclasses.replace(d, taints=d.taints + extra) if extra else d)
        out.append(dataclasses.replace(s, devices=tuple(devices)) if changed else s)
    return out
