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
from decimal import Decimal

from scaler.core.dra import simple
from scaler.core.dra.allocator import Allocator
from scaler.core.dra.celkey import content_key, reads
from scaler.core.dra.extended import extended_resource_claim, served
from scaler.core.dra.pools import NodeRef, gather_pools
from scaler.core.dra.search import AllocationError
from scaler.core.dra.simple import Candidates, is_simple
from scaler.core.model.dra import (
    BLOCKING_EFFECTS,
    EXACT_COUNT,
    FIRST_AVAILABLE_MAX_SIZE,
    Allocation,
    ClaimSpec,
    Device,
    DeviceID,
    DeviceRequest,
    DeviceResult,
    DeviceToleration,
    DraObjects,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
    blocking_taints,
)
from scaler.core.model.objects import Node, Pod, PodResourceClaim
from scaler.core.model.selectors import term_matches


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
        self.held = held_devices(objects)  # held whole; shared devices' shares: `shared`
        self.shared: dict[DeviceID, dict[str, Decimal]] = shared_use(objects)
        self.extended = served(objects.classes.values())  # extended resource -> the DeviceClass serving it
        # devices `node_devices` does not count: a NoSchedule/NoExecute taint keeps them from most claims
        self.blocked = {DeviceID(s.driver, s.pool.name, d.name) for s in objects.slices for d in s.devices
                        if d.taints and _blocked(d)}
        self.given: dict[str, set[DeviceID]] = {}  # node -> devices this pass gave
        self.given_shares: dict[int, tuple[str, list[DeviceResult]]] = {}  # pod id -> (node, its shares)
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

    def asks_extended(self, pod: Pod) -> bool:
        """The pod requests an extended resource a DeviceClass serves (then the DRA filter has a say)."""
        extended = self.extended  # (most pods request none of them: that is told in C, per pod of the pass)
        requests = pod.requests
        return (bool(extended) and not extended.keys().isdisjoint(requests)
                and any(v > 0 and r in extended for r, v in requests.items()))

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
        devices = {r.device_id for a in allocations for r in a.results if r.share_id is None}
        shares = [r for a in allocations for r in a.results if r.share_id is not None]
        if shares:
            self.given_shares[id(pod)] = (node.name, shares)
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
        self.given_shares.pop(id(pod), None)
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
        own = self.own(node)
        if self.anywhere:  # devices not of one node: which it may use depends on the node's labels
            return None
        hit = self.simple_cands.get((id(own), spec))
        if hit is None:
            cands = self.candidates(node, claim.spec) if own else None
            hit = self.simple_cands[(id(own), spec)] = (own, cands)
        return simple.pick(claim, hit[1], self.in_use(node)) if hit[1] is not None else None

    def candidates(self, node: Node, spec: ClaimSpec) -> Candidates | None:
        return simple.candidates(self.allocator(node), self.node_ref(node), ResourceClaim("", "plain", spec))

    def node_ref(self, node: Node) -> NodeRef:
        """A node opened from a template allocates from the template's slices, under their node name."""
        own = node.slices or self.expected.get(node.name)
        return NodeRef(own[0].node_name or node.name if own else node.name, node.labels)

    def consumed(self, node: Node) -> dict[DeviceID, dict[str, Decimal]]:
        """Shared devices (allowMultipleAllocations) and what their shares consume: the allocated claims'
        (status.allocation.devices.results[].consumedCapacity) and those the pass gave on the node."""
        given = [r for name, shares in self.given_shares.values() if name == node.name for r in shares]
        if not given:
            return self.shared
        out = {k: dict(v) for k, v in self.shared.items()}
        _add_shares(out, given)
        return out

    def allocator(self, node: Node) -> Allocator:
        hit = self._allocators.get(node.name)
        if hit is None:
            hit = Allocator(self.objects.classes, self.slices(node), self.in_use(node), shared=self.first,
                            consumed=self.consumed(node))
            self.first = self.first or hit
            self._allocators[node.name] = hit
        return hit


class DraCheck:
    """One pod's claims against a DraState: the PreFilter (resolve the claims) and the Filter."""

    __slots__ = ("claims", "extended", "generated", "keys", "needed", "pinned", "pod", "pod_reason", "prioritized",
                 "spec", "state")

    def __init__(self, state: DraState, pod: Pod) -> None:
        self.state, self.pod = state, pod
        self.pod_reason: str | None = None
        # extended resources a DeviceClass serves: on a node without them, an implicit claim (`claims_on`)
        self.extended = {r: v for r, v in pod.requests.items() if v > 0 and r in state.extended}
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
        if not self.extended:
            return self._allocate(node, self.claims, self.keys, self.spec, self.needed) if self.claims else None
        claims, spec = self.claims_on(node)
        if not claims:
            return None
        if len(claims) == len(self.claims):
            return self._allocate(node, claims, self.keys, spec, self.needed)
        implicit = claims[-1]
        least = self.state.spec_info(implicit.spec)[2]
        return self._allocate(node, claims, (*self.keys, implicit.key), spec, self.needed + least)

    def claims_on(self, node: Node) -> tuple[list[ResourceClaim], tuple[int, ...]]:
        """The claims to allocate on the node and their spec ids: with the claim standing for the pod's
        extended resources the node does not advertise itself (`scaler.core.dra.extended`)."""
        implicit = (extended_resource_claim(self.pod.key, self.extended, node.allocatable, self.state.extended)
                    if self.extended else None)
        if implicit is None:
            return self.claims, self.spec
        return [*self.claims, implicit], (*self.spec, self.state.spec_info(implicit.spec)[0])

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

    def _allocate(self, node: Node, claims: list[ResourceClaim], keys: tuple[str, ...], spec: tuple[int, ...],
                  needed: int) -> str | None:
        """Whether the claims allocate on the node: the allocator depends on the claims' specs and the
        node's free devices only, so a verdict is reused for the next pod whose claims share the specs
        (the reason names this pod's claims)."""
        state = self.state
        per_node = state.verdicts.get(node.name)
        if per_node is None:
            per_node = state.verdicts[node.name] = {}
        else:
            hit = per_node.get(spec)
            if hit is not None:
                reason, named, _ = hit
                if reason is not None and named != keys:
                    for old, new in zip(named, keys, strict=True):
                        reason = reason.replace(old, new)
                return reason
        free = state.free(node)
        if free < needed:  # the allocator would say so after a search (and an explanation)
            reason = (f"cannot allocate the pod's ResourceClaims: {', '.join(keys)}: {needed} device(s) "
                      f"needed, {free} free on the node")
            per_node[spec] = (reason, keys, None)
            return reason
        if len(claims) == 1:
            allocation = state.simple(node, claims[0], spec[0])
            if allocation is not None:
                per_node[spec] = (None, keys, (allocation,))
                return None
        outcome = state.allocator(node).allocate(state.node_ref(node), claims)
        if outcome.ok:
            reason = None
        else:
            first = outcome.reason.strip().splitlines()[0] if outcome.reason.strip() else "no devices"
            reason = f"cannot allocate the pod's ResourceClaims: {first}"
        per_node[spec] = (reason, keys, outcome.allocations)
        return reason


def devices_at_least(objects: DraObjects, pod: Pod, untainted: bool = False) -> int:
    """The fewest devices the pod's claims made from templates take on its node (claims of their own:
    no other pod shares them). A lower bound the packer counts per node to skip nodes with fewer free
    devices before asking the allocator; claims by name (maybe shared, maybe allocated) count 0.
    `untainted`: of the devices without a NoSchedule/NoExecute taint (a request tolerating a taint: 0)."""
    n = 0
    for ref in pod.resource_claims:
        if ref.template_name and not ref.claim_name and not ref.generated:
            tmpl = objects.templates.get(f"{pod.namespace}/{ref.template_name}")
            if tmpl is not None:
                n += sum(_least(q) for q in tmpl.spec.requests if not (untainted and _tolerates(q)))
    return n


def node_devices(objects: DraObjects) -> dict[str, tuple[int, int]] | None:
    """Per node, the devices its slices publish that no allocated claim holds, and of those the ones without
    a NoSchedule/NoExecute taint (one walk over the slices); None when some slice's devices are not tied to
    one node (a pod could allocate them anywhere: no per-node bound) or may be shared (allowMultipleAllocations:
    a claim may take a share of a device another holds)."""
    held: dict[tuple[str, str], set[str]] = {}  # (driver, pool) -> the names of its devices held (`held_devices`)
    for c in objects.claims.values():
        if c.allocation:
            for r in c.allocation.results:
                if r.share_id is None:
                    held.setdefault((r.driver, r.pool), set()).add(r.device)
    where: dict[tuple[str, str, str], tuple[list[int], bool]] = {}  # a held device -> its node's counts
    free: dict[str, list[int]] = {}
    for s in objects.slices:
        devices = s.devices
        if not devices:
            continue
        if not s.node_name or any(d.allow_multiple for d in devices):
            return None
        counts = free.get(s.node_name)
        if counts is None:
            counts = free[s.node_name] = [0, 0]
        driver, pool = s.driver, s.pool.name
        counts[0] += len(devices)
        counts[1] += len(devices)
        tainted = [d for d in devices if d.taints]
        if tainted:
            counts[1] -= sum(map(_blocked, tainted))
        names = held.get((driver, pool))
        if names:  # (the last slice to publish a device is where it counts, as a walk of every device finds)
            for d in devices:
                if d.name in names:
                    where[(driver, pool, d.name)] = (counts, not (d.taints and _blocked(d)))
    for counts, clean in where.values():
        counts[0] -= 1
        counts[1] -= clean
    return {name: (n, clean) for name, (n, clean) in free.items()}


def held_devices(objects: DraObjects) -> set[tuple[str, str, str]]:
    """Devices the allocated claims hold whole (their results without a share id), by their DeviceIDs' fields
    (a DeviceID is a tuple of them: equal, same hash, and a plain tuple is quicker to make: thousands a pass)."""
    return {(r.driver, r.pool, r.device) for c in objects.claims.values() if c.allocation
            for r in c.allocation.results if r.share_id is None}


def shared_use(objects: DraObjects) -> dict[DeviceID, dict[str, Decimal]]:
    """Per shared device, what the allocated claims' shares of it consume together (kube-scheduler's
    AggregatedCapacity); a device shared with nothing consumed has an empty entry (its counters charged)."""
    out: dict[DeviceID, dict[str, Decimal]] = {}
    _add_shares(out, [r for c in objects.claims.values() if c.allocation for r in c.allocation.results
                      if r.share_id is not None])
    return out


def _add_shares(into: dict[DeviceID, dict[str, Decimal]], shares: Sequence[DeviceResult]) -> None:
    for r in shares:
        use = into.setdefault(r.device_id, {})
        for name, amount in r.consumed:
            use[name] = use.get(name, Decimal(0)) + amount


def _tolerates(request: DeviceRequest) -> bool:
    """The request tolerates some taint: it may take devices `node_devices` does not count."""
    return any(r.tolerations for r in ([request.exactly] if request.exactly else request.first_available))


def _least(request: DeviceRequest) -> int:
    """The fewest devices the request can be satisfied with (All: unknown here, 0; a capacity request may
    take a share of a device others share: 0)."""
    options = [request.exactly] if request.exactly else list(request.first_available)
    if not options or any(r.allocation_mode != EXACT_COUNT or r.capacity for r in options):
        return 0
    return min(r.count for r in options)


# Pods whose claims are plain counts, placed by the count (`scaler.core.planning.constrained.Filtered.counted`).
#
# A claim made from a template of one ExactCount request, without constraints or firstAvailable, on a node
# every device of which its request may take (complete, valid pools of the node's own slices, no device on
# counters, every device passing the class's and the request's selectors): there the allocator allocates it
# exactly when the node has that many free devices, and takes the first free ones in pool order. So the
# packer places such pods by their count of devices (keys.RES_DRA_DEVICES), like nvidia.com/gpu pods, and
# the devices each pod gets are chosen only when a later pod asks about the node (`settle`): most nodes are
# never asked in a pass. Pure.

Shape = tuple[object, ...]
Matching = tuple[str, tuple[str, ...], tuple[DeviceToleration, ...]]  # what `uniform` reads of a request


def _matching(exact: ExactRequest) -> Matching:
    """A request's class, selectors and tolerations: requests alike in them but their count (a workload's
    templates of 1, 2, 4, 8 GPUs) share the answer."""
    return (exact.device_class_name, exact.selectors, exact.tolerations)


class CountedClaims:
    """One pass's plain-claim pods of a DraState: which pods, which nodes, and the devices they owe."""

    def __init__(self, state: DraState) -> None:
        self.state = state
        self.owed: dict[str, list[tuple[Pod, tuple[int, ...]]]] = {}  # node -> pods placed, devices not chosen
        self._owed_at: dict[int, str] = {}  # id(pod) -> its node, while owed
        self._selectors: Allocator | None = None  # over every slice: its pools and selector results
        # (id(node's own slices), class, request selectors) -> (those slices, every device may be taken)
        self._uniform: dict[tuple[int, Matching], tuple[object, bool]] = {}
        # (the slices' shape: `_shape`, class, request selectors) -> every device may be taken
        self._by_shape: dict[tuple[Shape, Matching], bool] = {}
        self._read: dict[Matching, tuple[tuple[str, ...], frozenset[str] | None]] = {}  # `_expressions`
        self._specs: dict[tuple[str, tuple[PodResourceClaim, ...]], tuple[int, ...] | None] = {}
        self._asks: dict[tuple[int, ...], tuple[Matching, ...]] = {}

    def specs(self, pod: Pod) -> tuple[int, ...] | None:
        """The spec ids of the pod's claims when each is made from a template whose spec is plain
        (`scaler.core.dra.simple.is_simple`) and names classes that exist, else None."""
        key = (pod.namespace, pod.resource_claims)  # pods of a workload ask the same: once per pass
        try:
            return self._specs[key]  # (one lookup: None is an answer too)
        except KeyError:
            hit = self._specs[key] = self._resolve(pod)
            return hit

    def _resolve(self, pod: Pod) -> tuple[int, ...] | None:
        state, out = self.state, []
        for ref in pod.resource_claims:
            if not ref.template_name or ref.claim_name or ref.generated:
                return None
            tmpl = state.objects.templates.get(f"{pod.namespace}/{ref.template_name}")
            if tmpl is None or not is_simple(tmpl.spec) or _tolerates(tmpl.spec.requests[0]):
                return None  # (a claim tolerating a taint is counted no device: `devices_at_least`)
            spec_id, missing, _ = state.spec_info(tmpl.spec)
            if missing:
                return None
            out.append(spec_id)
        return tuple(out) if out else None

    def asks(self, specs: tuple[int, ...]) -> tuple[Matching, ...]:
        """What `uniform` reads of the specs (their requests' class, selectors and tolerations, each once):
        specs alike in it get the same answer on every node."""
        hit = self._asks.get(specs)
        if hit is None:
            out: dict[Matching, None] = {}
            for spec_id in specs:
                exact = self.state.by_id[spec_id].requests[0].exactly
                assert exact is not None
                out[_matching(exact)] = None
            hit = self._asks[specs] = tuple(out)
        return hit

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
            matching = _matching(exact)
            key = (id(own), matching)
            hit = self._uniform.get(key)
            if hit is None or hit[0] is not own:
                hit = self._uniform[key] = (own, self._all_match(node, own, exact, matching))
            if not hit[1]:
                return False
        return True

    def _all_match(self, node: Node, own: Sequence[ResourceSlice], exact: ExactRequest, matching: Matching) -> bool:
        """Every device the node counts untainted (`node_devices`) the request may take, and it takes no
        other: a tainted device is fine only when the request does not tolerate it (then it is neither
        counted nor taken)."""
        state = self.state
        expressions, names = self._expressions(exact, matching)
        shape = _shape(own, names) if names is not None else None
        key = (shape, matching) if shape is not None else None
        known = self._by_shape.get(key) if key is not None else None  # (one lookup: a shape is long to hash)
        if known is not None:
            return known
        if self._selectors is None:  # selector results only (cached per device): no node's allocator needed
            self._selectors = Allocator(state.objects.classes, state.objects.slices, shared=state.first)
            state.first = state.first or self._selectors
        allocator = self._selectors
        pools = gather_pools(own, allocator.by_pool, state.node_ref(node))
        ok = not any(p.incomplete or p.invalid for p in pools)
        found = [(d, s) for p in pools for s in p.slices for d in s.devices]
        ok = ok and len(found) == sum(len(s.devices) for s in own)
        try:
            ok = ok and all(not s.per_device_node_selection and not d.consumes_counters and not d.allow_multiple
                            and (bool(blocking_taints(d.taints, exact.tolerations)) if _blocked(d) else
                                 all(allocator.selector_matches(e, s.driver, d, "plain", i)
                                     for i, e in enumerate(expressions))) for d, s in found)
        except AllocationError:
            ok = False
        if key is not None:
            self._by_shape[key] = ok
        return ok

    def _expressions(self, exact: ExactRequest, matching: Matching) -> tuple[tuple[str, ...], frozenset[str] | None]:
        """The selectors of the request and its class, and the names they read (celkey.reads; None: any),
        once per request alike (not per node)."""
        hit = self._read.get(matching)
        if hit is None:
            expressions = (*self.state.objects.classes[exact.device_class_name].selectors, *exact.selectors)
            read = [reads(e) for e in expressions]
            names = [n for n in read if n is not None]
            hit = self._read[matching] = (expressions, frozenset().union(*names) if len(names) == len(read) else None)
        return hit

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
    target = own[0].node_name
    pools: dict[tuple[str, str], int] = {}
    out: list[object] = []
    for s in own:
        if s.node_name != target or s.node_selector is not None or s.all_nodes or s.per_device_node_selection \
                or s.shared_counters:
            return None
        devices = tuple([(d.name, bool(d.consumes_counters), d.taints, content_key(s.driver, d, names))
                         for d in s.devices])
        out.append((s.driver, pools.setdefault((s.driver, s.pool.name), len(pools)), s.pool.generation,
                    s.pool.resource_slice_count, devices))
    return tuple(out)


def _blocked(device: Device) -> bool:
    """A taint that keeps the device from a claim without tolerations: the device is not counted untainted
    (`node_devices`), and a claim that tolerates it is allocated by the allocator, not by the count."""
    return any(t.effect in BLOCKING_EFFECTS for t in device.taints)


def _in_pool_order(own: Sequence[ResourceSlice]) -> Candidates:
    """The node's devices as the allocator visits them: pools sorted by (driver, name), slices and devices
    as published (`scaler.core.dra.pools.gather_pools`, on a node whose own slices are complete pools)."""
    ordered = sorted(range(len(own)), key=lambda i: (own[i].driver, own[i].pool.name))  # stable: slices in order
    return [(DeviceID(own[i].driver, own[i].pool.name, d.name), d, own[i]) for i in ordered for d in own[i].devices
            if not _blocked(d)]
