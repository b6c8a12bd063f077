"""The structured allocator of kube-scheduler's DynamicResources plugin (the stable/GA variant).

Follows kubernetes/kubernetes staging/src/k8s.io/dynamic-resource-allocation/structured/internal/
stable/allocator_stable.go: the claims of one pod are allocated together on one node or not at all, by
a depth-first search that takes, for each device each request needs, the first eligible device in
pool order (pools sorted, slices and devices as published) and backtracks when a later request,
constraint or counter cannot be met. The first full solution wins, as upstream (no scoring).

`Allocator` is built once per snapshot (classes, slices, devices already allocated) and indexes
slices by node; `allocate(node, claims)` is what the planner calls per candidate node. Selector
results are cached per (device, expression) for the Allocator's life: they depend on nothing else; and
per (expression, the device's content the expression can read: `celkey`), so that the nodes of one pool,
whose devices differ in their uuids only, evaluate a selector once.

Consumable capacity: `consumed` holds what the allocated shares of devices that allow multiple allocations
consume; `search.py` and `capacity.py` say how a request shares them.

Device taints (with DeviceTaintRules' merged in: `taints.py`) keep a device from a request that does not
tolerate them (NoSchedule and NoExecute; upstream taintPreventsAllocation). Not modelled (nothing a planner
decides): adminAccess, binding conditions, class and claim configs in the result.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from scaler.core.dra.cel import CelError, compile_selector, device_variable, evaluate
from scaler.core.dra.celkey import content_key, reads
from scaler.core.dra.pools import DevicePool, NodeRef, PoolKey, gather_pools
from scaler.core.dra.search import AllocationError, Outcome, Search
from scaler.core.model.dra import Device, DeviceClass, DeviceID, ResourceClaim, ResourceSlice


class Allocator:
    def __init__(self, classes: Mapping[str, DeviceClass] | Iterable[DeviceClass],
                 slices: Sequence[ResourceSlice], allocated: Collection[DeviceID] = (),
                 shared: Allocator | None = None,
                 consumed: Mapping[DeviceID, Mapping[str, Decimal]] | None = None) -> None:
        """`allocated`: devices held whole; `consumed`: devices that allow multiple allocations and have
        shares, with what those consume together (upstream's AggregatedCapacity). `shared`: an Allocator of
        the same classes whose selector results this one reuses (the planner builds one per node, each with
        the devices the pass has given there)."""
        self.classes = dict(classes) if isinstance(classes, Mapping) else {c.name: c for c in classes}
        self.slices = list(slices)
        self.allocated = frozenset(allocated)
        self.consumed: Mapping[DeviceID, Mapping[str, Decimal]] = consumed or {}
        self._by_node: dict[str, list[ResourceSlice]] = {}
        self._anywhere: list[ResourceSlice] = []  # selector, allNodes, per-device, counter slices
        self.by_pool: dict[PoolKey, list[ResourceSlice]] = {}
        for s in self.slices:
            self.by_pool.setdefault((s.driver, s.pool.name), []).append(s)
            if s.node_name and not s.shared_counters:
                self._by_node.setdefault(s.node_name, []).append(s)
            else:
                self._anywhere.append(s)
        self._variables: dict[int, dict[str, Any]] = shared._variables if shared else {}
        self._matches: dict[tuple[int, str], bool] = shared._matches if shared else {}
        # (expression, celkey.content_key) -> result: devices the expression cannot tell apart
        self._by_content: dict[tuple[str, tuple[object, ...]], bool] = shared._by_content if shared else {}
        self._available: dict[PoolKey, dict[str, dict[str, Decimal]]] = {}

    def pools(self, node: NodeRef) -> list[DevicePool]:
        by_name = self._by_node.get(node.name, [])
        candidates = by_name + self._anywhere if self._anywhere else by_name
        return gather_pools(candidates, self.by_pool, node)

    def allocate(self, node: NodeRef, claims: Sequence[ResourceClaim]) -> Outcome:
        try:
            return Search(self, node, list(claims)).run()
        except AllocationError as err:
            return Outcome(None, str(err), error=True)

    # --- shared, cached across calls -------------------------------------------------------------

    def selector_matches(self, expression: str, driver: str, device: Device, owner: str, index: int) -> bool:
        key = (id(device), expression)
        hit = self._matches.get(key)
        if hit is not None:
            return hit
        names = reads(expression)
        same = (expression, content_key(driver, device, names)) if names is not None else None
        if same is not None:
            hit = self._by_content.get(same)
            if hit is not None:
                self._matches[key] = hit
                return hit
        try:
            selector = compile_selector(expression)
        except CelError as err:
            raise AllocationError(f"{owner}: selector #{index} ({expression}): CEL compile error: {err}") from None
        variable = self._variables.get(id(device))
        if variable is None:
            variable = self._variables[id(device)] = device_variable(driver, device)
        try:
            hit = evaluate(selector, variable)
        except CelError as err:
            raise AllocationError(f"{owner}: selector #{index} ({expression}) on device {driver}/{device.name}: "
                                  f"CEL {err}") from None
        self._matches[key] = hit
        if same is not None:
            self._by_content[same] = hit
        return hit

    def available_counters(self, pool: DevicePool) -> dict[str, dict[str, Decimal]]:
        """The pool's counters less what its devices already allocated consume (may go negative)."""
        have = self._available.get(pool.key)
        if have is not None:
            return have
        have = {name: dict(counters) for name, counters in pool.counter_sets.items()}
        for s in pool.all_slices:
            for d in s.devices:
                if not d.consumes_counters:
                    continue
                did = DeviceID(s.driver, s.pool.name, d.name)
                if did not in self.allocated and did not in self.consumed:  # a shared device: charged once
                    continue
                for use in d.consumes_counters:
                    counters = have.get(use.counter_set, {})
                    for name, amount in use.counters.items():
                        if name in counters:
                            counters[name] -= amount
        self._available[pool.key] = have
        return have


__all__ = ["AllocationError", "Allocator", "NodeRef", "Outcome"]
