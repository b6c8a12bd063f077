"""The GPUs a DRA node's pods hold through their allocated ResourceClaims: what scale-down counts as used
on a `gpu_allocation: dra` node, whose allocatable has no nvidia.com/gpu. Pure.

A claim shared by several pods holds its devices once. A MIG device busies the GPU it is carved from
(the counter set it consumes, as the NVIDIA driver publishes it), a whole GPU busies itself; only the
GPU driver's devices count (a pool's size is in GPUs).
"""

from __future__ import annotations

from collections.abc import Iterable

from scaler.core.dra.nvidia import DRIVER
from scaler.core.model.dra import DraObjects
from scaler.core.model.objects import Pod
from scaler.core.model.workload import active
from scaler.core.scheduling.filters.dra import claim_keys

Unit = tuple[str, str, str]  # (driver, pool, GPU): the device itself, or the counter set it consumes


class DraUse:
    """One pass's answer to "how many GPUs do these pods hold", over the snapshot's DRA objects."""

    def __init__(self, objects: DraObjects) -> None:
        self.objects = objects
        # (driver, pool, device): a DeviceID's fields (it is a tuple) -> its unit; MIG devices only (a
        # whole GPU is its own unit); built on the first DRA node asked about
        self._unit: dict[tuple[str, str, str], Unit] | None = None

    def _unit_of(self, device: tuple[str, str, str]) -> Unit:
        if self._unit is None:
            self._unit = {(s.driver, s.pool.name, d.name): (s.driver, s.pool.name, d.consumes_counters[0].counter_set)
                          for s in self.objects.slices for d in s.devices if d.consumes_counters}
        return self._unit.get(device, device)

    def gpus_in_use(self, pods: Iterable[Pod]) -> int:
        """GPUs the allocated claims of the active pods hold, each claim (and each GPU) once."""
        claims = {key for p in pods if active(p) for _, key in claim_keys(p) if not key.startswith("template:")}
        units: set[Unit] = set()
        for key in claims:
            claim = self.objects.claims.get(key)
            if claim is None or claim.allocation is None:
                continue
            units.update(self._unit_of((r.driver, r.pool, r.device)) for r in claim.allocation.results
                         if r.driver == DRIVER)
        return len(units)
