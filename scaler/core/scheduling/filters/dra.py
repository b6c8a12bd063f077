"""kube-scheduler's DynamicResources filter for the planner: a pod's ResourceClaims (resource.k8s.io/v1)
must be allocatable on the node (`scaler.core.dra`: the structured allocator), or already allocated
where the node is.

`DraObjects` is what a snapshot holds (classes, claims, templates, slices). `DraState` is one pass's
view: the devices claims already hold, and those the pass gives to the pods it places (on existing
nodes, booting ones and nodes opened from a DRA pool's template, whose slices the template carries).
A claim shared by several pods is allocated once: the first placed pod allocates it, the others follow
it to its node. A claim allocated on a node the pass removes (a drain) is allocated again wherever its
pods go, as kube-scheduler does once its pods are gone. A claim or template that does not exist, or a
broken class, refuses the pod with the reason (never an exception).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scaler.core.dra.model import (
    EXACT_COUNT,
    FIRST_AVAILABLE_MAX_SIZE,
    Allocation,
    ClaimSpec,
    DeviceClass,
    DeviceID,
    DeviceRequest,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from scaler.core.model.objects import Node, Pod
from scaler.core.scheduling.filters.dra_counted import CountedClaims
from scaler.core.scheduling.predicates import term_matches

if TYPE_CHECKING:  # the allocator (and its CEL runtime) loads with the first claim a pass allocates
    from scaler.core.dra.allocator import Allocator, NodeRef
    from scaler.core.dra.simple import Candidates


@dataclass(slots=True)
class DraObjects:
    """The DRA objects of a snapshot, by name (claims and templates by namespace/name)."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    slices: list[ResourceSlice] = field(default_factory=list)

    def published(self) -> set[str]:
        """Nodes some driver published a slice for."""
        return {s.node_name for s in self.slices if s.node_name}


def pinned_node(allocation: Allocation | None) -> str | None:
    """The one node an allocation's selector names by metadata.name, if it does."""
    if allocation is None or not allocation.node_selector or len(allocation.node_selector) != 1:
        return None
    for req in allocation.node_selector[0]:
        if req.field and req.key == "metadata.name" and req.operator == "In" and len(req.values) == 1:
            return req.values[0]
    return None


def claim_keys(pod: Pod) -> list[tuple[str, str]]:
    """(pod claim name, the ResourceClaim's namespace/name or "template:" namespace/name)."""
    out = []
    for ref in pod.resource_claims:
        if ref.claim_name:
            out.append((ref.name, f"{pod.namespace}/{ref.claim_name}"))
        elif ref.generated:
            out.append((ref.name, f"{pod.namespace}/{ref.generated}"))
        else:
            out.append((ref.name, f"template:{pod.namespace}/{ref.template_name}"))
    return out


Verdict = tuple[str | None, tuple[str, ...], tuple[Allocation, ...] | None]


class DraState:
    """One pass's devices: held by allocated claims, and given by the pass to the pods it places."""

    def __init__(self, objects: DraObjects, expected: Mapping[str, tuple[ResourceSlice, ...]] | None = None) -> None:
        """`expected`: slices of registered nodes whose driver has not published yet (coming nodes)."""
        self.objects = objects
        self.expected = dict(expected or {})
        self.by_node: dict[str, list[ResourceSlice]] = {}
        self.anywhere: list[ResourceSlice] = []
        for s in objects.slices:
            (self.by_node.setdefault(s.node_name, []) if s.node_name else self.anywhere).append(s)
        self.held = {r.device_id for c in objects.claims.values() if c.allocation for r in c.allocation.results}
        self.given: dict[str, set[DeviceID]] = {}  # node -> devices this pass gave
        self.allocated: dict[str, tuple[str, Allocation, int]] = {}  # claim -> (node, allocation, pod id)
        self.by_pod: dict[int, tuple[str, list[str], set[DeviceID]]] = {}
        self.removed: set[str] = set()
        self._allocators: dict[str, Allocator] = {}
        self.free_count: dict[str, int] = {}  # node -> devices its allocator has not allocated (any class)
        # node -> (the claims' spec ids) -> (reason or None, the claim keys it names, the allocations when
        # they fit): the verdict for pods asking the same (a workload's template) on an unchanged node,
        # computed once
        self.verdicts: dict[str, dict[tuple[int, ...], Verdict]] = {}
        self.spec_ids: dict[ClaimSpec, int] = {}  # equal specs (one template per namespace) share an id
        self.by_id: dict[int, ClaimSpec] = {}
        self.counted = CountedClaims(self)  # pods of plain claims placed by the count
        self.first: Allocator | None = None  # its selector cache is shared by the others
        self._spec_info: dict[int, tuple[ClaimSpec, tuple[int, tuple[str, ...], int]]] = {}
        self.last: DraCheck | None = None  # the latest pod's check, for its placement (nothing changed since)
        self._ids: dict[int, tuple[object, frozenset[DeviceID]]] = {}  # id(node's own slices) -> their devices
        self._in_use: dict[str, set[DeviceID]] = {}  # node -> its devices held or given
        # (id(node's own slices), spec id) -> (those slices, the one claim's candidates or None: dra.simple)
        self.simple_cands: dict[tuple[int, int], tuple[object, Candidates | None]] = {}

    def spec_info(self, spec: ClaimSpec) -> tuple[int, tuple[str, ...], int]:
        """(its id: equal specs share one, the classes it names that do not exist, the fewest devices it
        takes), once per spec object (a template's spec is shared by its pods' claims)."""
        hit = self._spec_info.get(id(spec))
        if hit is None or hit[0] is not spec:
            ids = self.spec_ids
            missing = tuple(r.device_class_name for q in spec.requests
                            for r in ([q.exactly] if q.exactly else q.first_available)
                            if r.device_class_name not in self.objects.classes)
            spec_id = ids.setdefault(spec, len(ids))
            self.by_id.setdefault(spec_id, spec)
            hit = self._spec_info[id(spec)] = (spec, (spec_id, missing, sum(_least(q) for q in spec.requests)))
        return hit[1]

    # --- the pass's changes -----------------------------------------------------------------------
    def place(self, pod: Pod, node: Node, claims: list[ResourceClaim], generated: set[str],
              spec: tuple[int, ...] = ()) -> None:
        """`generated`: the claims made from templates for this pod (no other pod follows them); `spec`:
        their spec ids (DraCheck.spec), whose allocation on the node the filter may have found already."""
        if not claims:
            return
        hit = self.verdicts.get(node.name, {}).get(spec) if spec else None
        allocations = hit[2] if hit is not None else None
        if allocations is None and len(claims) == 1 and spec:
            allocation = self.simple(node, claims[0], spec[0])
            allocations = (allocation,) if allocation is not None else None
        if allocations is None:
            allocations = self.allocator(node).allocate(self.node_ref(node), claims).allocations
            if allocations is None:
                return
        devices = {r.device_id for a in allocations for r in a.results}
        self.given.setdefault(node.name, set()).update(devices)
        keys = []
        for claim, allocation in zip(claims, allocations, strict=True):
            if claim.key not in generated:
                self.allocated[claim.key] = (node.name, allocation, id(pod))
                keys.append(claim.key)
        self.by_pod[id(pod)] = (node.name, keys, devices)
        used = self._in_use.get(node.name)
        self.forget(node.name)
        if used is not None:  # kept up to date: the node's other devices are as they were
            self.free_count[node.name] -= len(devices - used)
            self._in_use[node.name] = used | devices

    def unplace(self, pod: Pod) -> None:
        if self.counted.unplace(pod):
            return
        hit = self.by_pod.pop(id(pod), None)
        if hit is None:
            return
        name, keys, devices = hit
        self.given.get(name, set()).difference_update(devices)
        for key in keys:
            self.allocated.pop(key, None)
        self.forget(name)

    def forget(self, name: str) -> None:
        """The node's devices changed: its allocator and verdicts are out of date."""
        self.last = None
        self._allocators.pop(name, None)
        self.verdicts.pop(name, None)
        self._in_use.pop(name, None)

    def publish(self, name: str, slices: Sequence[ResourceSlice]) -> None:
        """A node's driver published its slices (the simulator's nodes)."""
        self.objects.slices.extend(slices)
        self.by_node[name] = list(slices)
        self.counted.slices_changed()
        self.forget(name)

    def unpublish(self, name: str) -> None:
        self.objects.slices = [s for s in self.objects.slices if s.node_name != name]
        self.counted.slices_changed()
        self.by_node.pop(name, None)
        self.forget(name)

    def remove_node(self, name: str) -> None:
        self.removed.add(name)
        self.last = None

    def restore_node(self, name: str) -> None:
        if name in self.removed:  # (a node the pass opens is added, not restored: checks stay valid)
            self.removed.discard(name)
            self.last = None

    # --- per node -------------------------------------------------------------------------------------
    def slices(self, node: Node) -> list[ResourceSlice]:
        own = node.slices or self.expected.get(node.name) or self.by_node.get(node.name) or ()
        return [*own, *self.anywhere] if self.anywhere else list(own)

    def own(self, node: Node) -> Sequence[ResourceSlice]:
        return node.slices or self.expected.get(node.name) or self.by_node.get(node.name) or ()

    def in_use(self, node: Node) -> set[DeviceID]:
        """The node's devices held by allocated claims or given by the pass."""
        hit = self._in_use.get(node.name)
        if hit is None:
            own = self.own(node)
            cached = self._ids.get(id(own))
            if cached is None:
                cached = self._ids[id(own)] = (own, frozenset(
                    DeviceID(s.driver, s.pool.name, d.name) for s in self.slices(node) for d in s.devices))
            hit = self._in_use[node.name] = {i for i in cached[1] if i in self.held}
            hit.update(self.given.get(node.name, ()))
            self.free_count[node.name] = len(cached[1]) - len(hit & cached[1])
            if node.name in self.counted.owed:
                self.counted.settle(node)
        return hit

    def free(self, node: Node) -> int:
        """Devices of the node no claim holds: no request for more can be allocated there."""
        self.in_use(node)
        return self.free_count[node.name]

    def simple(self, node: Node, claim: ResourceClaim, spec: int) -> Allocation | None:
        """The claim's allocation on the node without a search (`scaler.core.dra.simple`), or None: ask
        the allocator."""
        from scaler.core.dra import simple  # noqa: PLC0415 - see the TYPE_CHECKING import

        own = self.own(node)
        if self.anywhere:  # devices not of one node: which it may use depends on the node's labels
            return None
        hit = self.simple_cands.get((id(own), spec))
        if hit is None:
            cands = self.candidates(node, claim.spec) if own else None
            hit = self.simple_cands[(id(own), spec)] = (own, cands)
        return simple.pick(claim, hit[1], self.in_use(node)) if hit[1] is not None else None

    def candidates(self, node: Node, spec: ClaimSpec) -> Candidates | None:
        from scaler.core.dra import simple  # noqa: PLC0415 - see the TYPE_CHECKING import

        return simple.candidates(self.allocator(node), self.node_ref(node), ResourceClaim("", "plain", spec))

    def node_ref(self, node: Node) -> NodeRef:
        """A node opened from a template allocates from the template's slices, under their node name."""
        from scaler.core.dra.pools import NodeRef  # noqa: PLC0415 - see the TYPE_CHECKING import
        own = node.slices or self.expected.get(node.name)
        return NodeRef(own[0].node_name or node.name if own else node.name, node.labels)

    def allocator(self, node: Node) -> Allocator:
        hit = self._allocators.get(node.name)
        if hit is None:
            from scaler.core.dra.allocator import Allocator  # noqa: PLC0415 - see the TYPE_CHECKING import

            hit = Allocator(self.objects.classes, self.slices(node), self.in_use(node), shared=self.first)
            self.first = self.first or hit
            self._allocators[node.name] = hit
        return hit


class DraCheck:
    """One pod's claims against a DraState: the PreFilter (resolve the claims) and the Filter."""

    __slots__ = ("claims", "generated", "keys", "needed", "pinned", "pod", "pod_reason", "prioritized", "spec",
                 "state")

    def __init__(self, state: DraState, pod: Pod) -> None:
        self.state, self.pod = state, pod
        self.pod_reason: str | None = None
        self.claims: list[ResourceClaim] = []  # to allocate on the node
        self.generated: set[str] = set()  # those made from a template for this pod
        self.pinned: list[tuple[str, Allocation | str]] = []  # already allocated: (claim, selector or node)
        objects = state.objects
        for ref_name, key in claim_keys(pod):
            if key.startswith("template:"):
                tmpl = objects.templates.get(key[len("template:"):])
                if tmpl is None:
                    self.pod_reason = f"ResourceClaimTemplate {key[len('template:'):]} not found (claim {ref_name})"
                    return
                made = ResourceClaim(pod.namespace, f"{pod.name}-{ref_name}", tmpl.spec)
                self.claims.append(made)
                self.generated.add(made.key)
                continue
            claim = objects.claims.get(key)
            if claim is None:
                self.pod_reason = f"ResourceClaim {key} not found"
                return
            passed = state.allocated.get(key)
            if passed is not None:
                self.pinned.append((key, passed[0]))
            elif claim.allocation is not None and pinned_node(claim.allocation) not in state.removed:
                self.pinned.append((key, claim.allocation))
            else:
                self.claims.append(claim)
        infos = [state.spec_info(c.spec) for c in self.claims]
        missing = sorted({name for info in infos for name in info[1]})
        if missing:
            self.pod_reason = f"DeviceClass {', '.join(missing)} not found"
        self.keys = tuple(c.key for c in self.claims)
        self.needed = sum(info[2] for info in infos)
        self.spec = tuple(info[0] for info in infos)
        # firstAvailable anywhere in the pod's claims: kube-scheduler then scores nodes by the subrequest each
        # allocates (priority_score)
        self.prioritized = any(q.first_available for c in (*self.claims, *(
            objects.claims[k] for k, _ in self.pinned)) for q in c.spec.requests)
        state.last = self

    def reason(self, node: Node) -> str | None:
        if self.pod_reason is not None:
            return self.pod_reason
        for key, where in self.pinned:
            if isinstance(where, str):
                if where != node.name:
                    return f"ResourceClaim {key} is allocated on node {where}"
            elif where.node_selector and not any(term_matches(t, node.labels, node.name)
                                                 for t in where.node_selector):
                return f"ResourceClaim {key} is allocated on devices this node cannot reach"
        if not self.claims:
            return None
        return self._allocate(node)

    def priority_score(self, node: Node) -> int:
        """DynamicResources' Score before normalisation (kube-scheduler 1.37,
        pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, computeScore): for each
        firstAvailable request of the pod's claims, FirstAvailableDeviceRequestMaxSize (8) less the index of the
        subrequest allocated, for the claims allocated on the node (ask `reason(node)` first) and those
        allocated already."""
        pairs: list[tuple[ResourceClaim, Allocation | None]] = []
        for key, where in self.pinned:
            passed = self.state.allocated.get(key)
            pairs.append((self.state.objects.claims[key],
                          where if isinstance(where, Allocation) else passed[1] if passed else None))
        if self.claims:
            hit = self.state.verdicts.get(node.name, {}).get(self.spec)
            if hit is None or hit[2] is None:
                return 0
            pairs.extend(zip(self.claims, hit[2], strict=True))
        score = 0
        for claim, allocation in pairs:
            if allocation is None:
                continue
            names = {r.request for r in allocation.results}
            for q in claim.spec.requests:
                for i, sub in enumerate(q.first_available):
                    if f"{q.name}/{sub.name}" in names:
                        score += FIRST_AVAILABLE_MAX_SIZE - i
        return score

    def _allocate(self, node: Node) -> str | None:
        """Whether the claims allocate on the node: the allocator depends on the claims' specs and the
        node's free devices only, so a verdict is reused for the next pod whose claims share the specs
        (the reason names this pod's claims)."""
        state, keys = self.state, self.keys
        per_node = state.verdicts.get(node.name)
        if per_node is None:
            per_node = state.verdicts[node.name] = {}
        else:
            hit = per_node.get(self.spec)
            if hit is not None:
                reason, named, _ = hit
                if reason is not None and named != keys:
                    for old, new in zip(named, keys, strict=True):
                        reason = reason.replace(old, new)
                return reason
        free = state.free(node)
        if free < self.needed:  # the allocator would say so after a search (and an explanation)
            reason = (f"cannot allocate the pod's ResourceClaims: {', '.join(keys)}: {self.needed} device(s) "
                      f"needed, {free} free on the node")
            per_node[self.spec] = (reason, keys, None)
            return reason
        if len(self.claims) == 1:
            allocation = state.simple(node, self.claims[0], self.spec[0])
            if allocation is not None:
                per_node[self.spec] = (None, keys, (allocation,))
                return None
        outcome = state.allocator(node).allocate(state.node_ref(node), self.claims)
        if outcome.ok:
            reason = None
        else:
            first = outcome.reason.strip().splitlines()[0] if outcome.reason.strip() else "no devices"
            reason = f"cannot allocate the pod's ResourceClaims: {first}"
        per_node[self.spec] = (reason, keys, outcome.allocations)
        return reason


def devices_at_least(objects: DraObjects, pod: Pod) -> int:
    """The fewest devices the pod's claims made from templates take on its node (claims of their own:
    no other pod shares them). A lower bound the packer counts per node to skip nodes with fewer free
    devices before asking the allocator; claims by name (maybe shared, maybe allocated) count 0."""
    n = 0
    for ref in pod.resource_claims:
        if ref.template_name and not ref.claim_name and not ref.generated:
            tmpl = objects.templates.get(f"{pod.namespace}/{ref.template_name}")
            if tmpl is not None:
                n += sum(_least(q) for q in tmpl.spec.requests)
    return n


def node_devices(objects: DraObjects) -> dict[str, int] | None:
    """Per node, the devices its slices publish that no allocated claim holds; None when some slice's
    devices are not tied to one node (a pod could allocate them anywhere: no per-node bound)."""
    where: dict[DeviceID, str] = {}
    free: dict[str, int] = {}
    for s in objects.slices:
        if not s.devices:
            continue
        if not s.node_name:
            return None
        free[s.node_name] = free.get(s.node_name, 0) + len(s.devices)
        for d in s.devices:
            where[DeviceID(s.driver, s.pool.name, d.name)] = s.node_name
    held = {r.device_id for c in objects.claims.values() if c.allocation for r in c.allocation.results}
    for device in held:
        node = where.get(device)
        if node is not None:
            free[node] -= 1
    return free


def _least(request: DeviceRequest) -> int:
    """The fewest devices the request can be satisfied with (All: unknown here, 0)."""
    options = [request.exactly] if request.exactly else list(request.first_available)
    if not options or any(r.allocation_mode != EXACT_COUNT for r in options):
        return 0
    return min(r.count for r in options)
