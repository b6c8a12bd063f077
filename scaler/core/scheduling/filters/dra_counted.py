"""Pods whose claims are plain counts, placed by the count (`scaler.core.planning.constrained.Filtered.counted`).

A claim made from a template of one ExactCount request, without constraints or firstAvailable, on a node
every device of which its request may take (complete, valid pools of the node's own slices, no device on
counters, every device passing the class's and the request's selectors): there the allocator allocates it
exactly when the node has that many free devices, and takes the first free ones in pool order. So the
packer places such pods by their count of devices (keys.RES_DRA_DEVICES), like nvidia.com/gpu pods, and
the devices each pod gets are chosen only when a later pod asks about the node (`settle`): most nodes are
never asked in a pass. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scaler.core.model.dra import DeviceID, ResourceSlice
from scaler.core.model.objects import Node, Pod, PodResourceClaim

if TYPE_CHECKING:  # the allocator (and its CEL runtime) loads with the first claim a pass allocates
    from scaler.core.dra.allocator import Allocator
    from scaler.core.dra.simple import Candidates
    from scaler.core.scheduling.filters.dra import DraState

Shape = tuple[object, ...]


class CountedClaims:
    """One pass's plain-claim pods of a DraState: which pods, which nodes, and the devices they owe."""

    def __init__(self, state: DraState) -> None:
        self.state = state
        self.owed: dict[str, list[tuple[Pod, tuple[int, ...]]]] = {}  # node -> pods placed, devices not chosen
        self._owed_at: dict[int, str] = {}  # id(pod) -> its node, while owed
        self._selectors: Allocator | None = None  # over every slice: its pools and selector results
        # (id(node's own slices), class, request selectors) -> (those slices, every device may be taken)
        self._uniform: dict[tuple[int, str, tuple[str, ...]], tuple[object, bool]] = {}
        # (the slices' shape: `_shape`, class, request selectors) -> every device may be taken
        self._by_shape: dict[tuple[Shape, str, tuple[str, ...]], bool] = {}
        self._specs: dict[tuple[str, tuple[PodResourceClaim, ...]], tuple[int, ...] | None] = {}

    def specs(self, pod: Pod) -> tuple[int, ...] | None:
        """The spec ids of the pod's claims when each is made from a template whose spec is plain
        (`scaler.core.dra.simple.is_simple`) and names classes that exist, else None."""
        key = (pod.namespace, pod.resource_claims)  # pods of a workload ask the same: once per pass
        if key in self._specs:
            return self._specs[key]
        hit = self._specs[key] = self._resolve(pod)
        return hit

    def _resolve(self, pod: Pod) -> tuple[int, ...] | None:
        from scaler.core.dra.simple import is_simple  # noqa: PLC0415 - see the TYPE_CHECKING import

        state, out = self.state, []
        for ref in pod.resource_claims:
            if not ref.template_name or ref.claim_name or ref.generated:
                return None
            tmpl = state.objects.templates.get(f"{pod.namespace}/{ref.template_name}")
            if tmpl is None or not is_simple(tmpl.spec):
                return None
            spec_id, missing, _ = state.spec_info(tmpl.spec)
            if missing:
                return None
            out.append(spec_id)
        return tuple(out) if out else None

    def uniform(self, node: Node, specs: tuple[int, ...]) -> bool:
        """Every device the node's slices publish is one the specs' request may take. Once per (node's
        slices, class and selectors), and the selectors once per shape of slices (the nodes of a pool)."""
        state = self.state
        if state.anywhere:
            return False
        own = state.own(node)
        if not own:
            return True
        for spec_id in specs:
            exact = state.by_id[spec_id].requests[0].exactly
            assert exact is not None
            key = (id(own), exact.device_class_name, exact.selectors)
            hit = self._uniform.get(key)
            if hit is None or hit[0] is not own:
                hit = self._uniform[key] = (own, self._all_match(node, own, exact.device_class_name, exact.selectors))
            if not hit[1]:
                return False
        return True

    def _all_match(self, node: Node, own: Sequence[ResourceSlice], class_name: str, selectors: tuple[str, ...]) -> bool:
        from scaler.core.dra.allocator import Allocator  # noqa: PLC0415 - see the TYPE_CHECKING import
        from scaler.core.dra.celkey import reads  # noqa: PLC0415
        from scaler.core.dra.pools import gather_pools  # noqa: PLC0415
        from scaler.core.dra.search import AllocationError  # noqa: PLC0415

        state = self.state
        expressions = (*state.objects.classes[class_name].selectors, *selectors)
        read = [reads(e) for e in expressions]
        names = [n for n in read if n is not None]
        shape = _shape(own, frozenset().union(*names)) if len(names) == len(read) else None
        key = (shape, class_name, selectors) if shape is not None else None
        if key is not None and key in self._by_shape:
            return self._by_shape[key]
        if self._selectors is None:  # selector results only (cached per device): no node's allocator needed
            self._selectors = Allocator(state.objects.classes, state.objects.slices, shared=state.first)
            state.first = state.first or self._selectors
        allocator = self._selectors
        pools = gather_pools(own, allocator.by_pool, state.node_ref(node))
        ok = not any(p.incomplete or p.invalid for p in pools)
        found = [(d, s) for p in pools for s in p.slices for d in s.devices]
        ok = ok and len(found) == sum(len(s.devices) for s in own)
        try:
            ok = ok and all(not s.per_device_node_selection and not d.consumes_counters
                            and all(allocator.selector_matches(e, s.driver, d, "plain", i)
                                    for i, e in enumerate(expressions)) for d, s in found)
        except AllocationError:
            ok = False
        if key is not None:
            self._by_shape[key] = ok
        return ok

    def slices_changed(self) -> None:
        self._selectors = None

    # --- placements --------------------------------------------------------------------------------
    def place(self, pod: Pod, node: Node, specs: tuple[int, ...]) -> None:
        """A pod of plain claims placed by the count on a node `uniform` for them."""
        self.owed.setdefault(node.name, []).append((pod, specs))
        self._owed_at[id(pod)] = node.name
        self.state.forget(node.name)

    def settle(self, node: Node) -> None:
        """Give the node's owed pods their devices, in the order they were placed: the first free ones in
        pool order, as the allocator would (`dra.simple`)."""
        state, name = self.state, node.name
        order: Candidates | None = None
        for pod, specs in self.owed.pop(name, ()):
            self._owed_at.pop(id(pod), None)
            used = state.in_use(node)
            if order is None:
                order = _in_pool_order(state.own(node))
            devices: set[DeviceID] = set()
            for spec_id in specs:
                exact = state.by_id[spec_id].requests[0].exactly
                assert exact is not None
                devices.update([d for d, _, _ in order if d not in used and d not in devices][:exact.count])
            state.given.setdefault(name, set()).update(devices)
            state.by_pod[id(pod)] = (name, [], devices)
            used |= devices
            state.free_count[name] -= len(devices)

    def unplace(self, pod: Pod) -> bool:
        """Forget an owed pod (True), or say it is not one."""
        name = self._owed_at.pop(id(pod), None)
        if name is None:
            return False
        self.owed[name] = [o for o in self.owed[name] if o[0] is not pod]
        return True


def _shape(own: Sequence[ResourceSlice], names: frozenset[str]) -> Shape | None:
    """What `_all_match` reads of a node's slices, the same for the nodes of a pool (their devices differ in
    attributes the selectors do not read, their pools in name): None when the slices select nodes by labels
    or per device (then each node is asked)."""
    from scaler.core.dra.celkey import content_key  # noqa: PLC0415 - see the TYPE_CHECKING import

    target = own[0].node_name
    pools: dict[tuple[str, str], int] = {}
    out: list[object] = []
    for s in own:
        if s.node_name != target or s.node_selector is not None or s.all_nodes or s.per_device_node_selection \
                or s.shared_counters:
            return None
        devices = tuple((d.name, bool(d.consumes_counters), content_key(s.driver, d, names)) for d in s.devices)
        out.append((s.driver, pools.setdefault((s.driver, s.pool.name), len(pools)), s.pool.generation,
                    s.pool.resource_slice_count, devices))
    return tuple(out)


def _in_pool_order(own: Sequence[ResourceSlice]) -> Candidates:
    """The node's devices as the allocator visits them: pools sorted by (driver, name), slices and devices
    as published (`scaler.core.dra.pools.gather_pools`, on a node whose own slices are complete pools)."""
    ordered = sorted(range(len(own)), key=lambda i: (own[i].driver, own[i].pool.name))  # stable: slices in order
    return [(DeviceID(own[i].driver, own[i].pool.name, d.name), d, own[i]) for i in ordered for d in own[i].devices]
