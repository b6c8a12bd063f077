"""The capacity a pass can place pods on: existing nodes, coming ones (registered, not ready yet),
in-flight ones (asked for, not registered) and one template slot per (pool, zone) for new nodes. Pure."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from scaler.core.config.pool import Pool
from scaler.core.dra.extended import served
from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod
from scaler.core.model.podgroup import gang_of
from scaler.core.model.workload import TERMINATED_PHASES, gpu_devices, is_daemonset, is_mirror, node_pool
from scaler.core.planning.advance import Advanced, may_still_boot
from scaler.core.planning.context import PlanningContext
from scaler.core.planning.memo import Memo
from scaler.core.planning.packing import Bin, Group, Packer, Slot
from scaler.core.planning.snapshot import Snapshot
from scaler.core.scheduling import predicates
from scaler.core.scheduling.filters import DraState, own_constraints
from scaler.core.scheduling.filters.dra import devices_at_least, node_devices

MAX_IN_FLIGHT_BINS = 1000  # per pool: beyond that many booting nodes the detail stops mattering
# keys.RES_DRA_DEVICES of a template slot: the DRA filter explains a pool whose nodes have too few devices
UNCOUNTED = 1 << 40
K = TypeVar("K")


def _resource_names(snapshot: Snapshot, templates: Iterable[Mapping[str, int]], on_nodes: set[str]) -> list[str]:
    names = set(on_nodes)
    for pod in snapshot.pending:
        names.update(pod.requests)
    for res in templates:
        names.update(res)
    first = [keys.RES_GPU, keys.RES_CPU, keys.RES_MEMORY, keys.RES_PODS]
    return [r for r in first if r in names] + sorted(names - set(first))


@dataclass(slots=True)
class Usage:
    """What a pass reads of the pods on the nodes, in one walk over them (100,000 pods on a large cluster)."""

    used: list[dict[str, int]]  # per node, in the snapshot's order: its active pods' requests summed
    requests: set[tuple[tuple[str, int], ...]]  # the distinct requests of the pods a pass may move (not DaemonSets')
    names: set[str]  # every resource a node has or a pod on it requests
    label_keys: set[str]  # the node label keys the pods a pass may move select or prefer (`referenced_keys`)
    gangs: dict[str, int]  # namespace/gang label value -> active pods
    filtered: bool  # some pod asks for kube-scheduler's other filters (filters.own_constraints)


@dataclass(slots=True)
class NodeUsage:
    """One node's part of `Usage` (kept in the planner memo under the node's version: never changed)."""

    used: dict[str, int]
    requests: set[tuple[tuple[str, int], ...]]
    names: set[str]
    label_keys: set[str]
    gangs: dict[str, int]
    filtered: bool


def _walk(node: Node, gang_label: str, into: NodeUsage, seen: set[int]) -> None:
    """Add the node's pods to `into` (its `used` is the node's own; `seen`: `_affinity_keys`')."""
    used, requests, names, label_keys, gangs = into.used, into.requests, into.names, into.label_keys, into.gangs
    names.update(node.allocatable)
    for pod in node.pods:
        req = pod.requests
        if is_daemonset(pod):
            names.update(req)
        else:
            requests.add(tuple(req.items()))
            if pod.node_selector:
                label_keys.update(pod.node_selector)
            if pod.required_affinity or pod.preferred_affinity:
                _affinity_keys(pod, label_keys, seen)
        if pod.phase not in TERMINATED_PHASES:  # (`active`, inlined)
            for r, v in req.items():
                used[r] = used.get(r, 0) + v
            gid = gang_of(pod, gang_label)
            if gid is not None:
                gangs[gid] = gangs.get(gid, 0) + 1
        if not into.filtered and own_constraints(pod):
            into.filtered = True


def usage(nodes: Sequence[Node], gang_label: str, memo: Memo | None = None) -> Usage:
    """One walk over the pods on the nodes. A node's part is kept in the memo under its name and version (a
    version changes with the node, its pods or its pool; 0: a copy never kept) with the sums of the parts
    kept, so a pass walks only the pods of nodes that changed and only their parts change the sums."""
    out = Usage([], set(), set(), set(), {}, False)
    whole = NodeUsage({}, out.requests, out.names, out.label_keys, out.gangs, False)  # not kept: straight into out
    seen: set[int] = set()
    kept = None
    if memo is not None:
        kept = memo.find(("usage", gang_label))
        if kept is None:
            kept = _Kept()
            memo.put(("usage", gang_label), kept)
    n_kept = 0
    for node in nodes:
        if kept is None or not node.version:
            whole.used = {}
            _walk(node, gang_label, whole, seen)
            out.used.append(whole.used)
            continue
        n_kept += 1
        entry = kept.parts.get(node.name)
        if entry is None or entry[0] != node.version:
            part = NodeUsage({}, set(), set(), set(), {}, False)
            _walk(node, gang_label, part, set())  # (its own: a part outlives the pass)
            if entry is not None:
                kept.count(entry[1], -1)
            kept.parts[node.name] = (node.version, part)
            kept.count(part, 1)
            entry = kept.parts[node.name]
        out.used.append(entry[1].used)
    if kept is not None:
        if len(kept.parts) > n_kept:  # nodes gone (or not kept this pass)
            for name in kept.parts.keys() - {n.name for n in nodes if n.version}:
                kept.count(kept.parts.pop(name)[1], -1)
        out.requests.update(kept.requests)
        out.names.update(kept.names)
        out.label_keys.update(kept.label_keys)
        for gid, n in kept.gangs.items():
            out.gangs[gid] = out.gangs.get(gid, 0) + n
        whole.filtered = whole.filtered or kept.filtered > 0
    out.filtered = whole.filtered
    for req_items in out.requests:
        out.names.update(r for r, _ in req_items)
    return out


class _Kept:
    """The usage parts of the nodes kept (name -> (version, part)) and their sums: how many parts hold each
    request, resource name and label key, each gang's active pods, how many parts need the filters."""

    __slots__ = ("filtered", "gangs", "label_keys", "names", "parts", "requests")

    def __init__(self) -> None:
        self.parts: dict[str, tuple[int, NodeUsage]] = {}
        self.requests: dict[tuple[tuple[str, int], ...], int] = {}
        self.names: dict[str, int] = {}
        self.label_keys: dict[str, int] = {}
        self.gangs: dict[str, int] = {}
        self.filtered = 0

    def count(self, part: NodeUsage, sign: int) -> None:
        """Add the part to the sums (sign 1) or take it out (-1); what drops to 0 goes."""
        _add(self.requests, dict.fromkeys(part.requests, sign))
        _add(self.names, dict.fromkeys(part.names, sign))
        _add(self.label_keys, dict.fromkeys(part.label_keys, sign))
        _add(self.gangs, {gid: sign * n for gid, n in part.gangs.items()})
        self.filtered += sign * part.filtered


def _add(counts: dict[K, int], more: Mapping[K, int]) -> None:
    for k, n in more.items():
        total = counts.get(k, 0) + n
        if total:
            counts[k] = total
        else:
            del counts[k]


def referenced_keys(pods: Iterable[Pod]) -> set[str]:
    """The node label keys the pods' node selectors and node affinities (required or preferred) look at."""
    out: set[str] = set()
    seen: set[int] = set()
    for pod in pods:
        if pod.node_selector:
            out.update(pod.node_selector)
        if pod.required_affinity or pod.preferred_affinity:
            _affinity_keys(pod, out, seen)
    return out


def _affinity_keys(pod: Pod, out: set[str], seen: set[int]) -> None:
    """Add the label keys of the pod's node affinities to `out`, but those of affinity objects in `seen` (pods
    of a workload share them; a set that lives no longer than the objects it names)."""
    required, preferred = pod.required_affinity, pod.preferred_affinity
    if required and id(required) not in seen:
        seen.add(id(required))
        out.update([r.key for term in required for r in term])
    if preferred and id(preferred) not in seen:  # scored, so grouped by
        seen.add(id(preferred))
        out.update([r.key for p in preferred for r in p.term])


def is_coming(node: Node, pool: Pool | None, now: float, provision_timeout: float,
              published: Collection[str] = (), gpus: int | None = None) -> bool:
    """A registered node that will take pods soon: not ready yet, or a GPU node whose device plugin
    has not published its GPUs yet (a DRA pool's: whose driver has not published its ResourceSlices,
    the nodes in `published`). Only within the provision timeout of its creation."""
    if pool is None:
        return False
    if node.ready:  # (the cheaper tests first; `gpus`: the node's GPU devices, when known)
        if pool.dra:
            if node.name in published:
                return False
        elif pool.gpus <= 0 or (gpu_devices(node.allocatable) if gpus is None else gpus) > 0:
            return False
    return may_still_boot(node, now, provision_timeout)


def is_fresh(node: Node, now: float, provision_timeout: float) -> bool:
    """A node that registered within the provision timeout and holds no pod but DaemonSet and mirror pods: capacity
    coming like a booting node. Which pending pod kube-scheduler binds to it first depends on the order of its
    queue after retries and on which node registered first, so the pending pods are matched against it and the
    nodes still booting together, however the scheduler will shuffle them, and no node is bought on a guess that
    another pod takes it."""
    if node.created_at <= 0 or now - node.created_at >= provision_timeout:
        return False
    return all(p.phase in TERMINATED_PHASES or is_daemonset(p) or is_mirror(p) for p in node.pods)


def dra_state(snapshot: Snapshot, packer: Packer) -> DraState:
    """The pass's DRA devices; a coming node of a DRA pool allocates from the slices its driver will publish."""
    published = snapshot.dra.published()
    expected = {}
    for b in packer.bins:
        obs = snapshot.pools.get(b.pool) if b.kind == "coming" and b.pool else None
        if obs is not None and obs.pool.dra and b.node.name not in published:
            expected[b.node.name] = obs.pool.dra_slices(b.node.name)
    return DraState(snapshot.dra, expected)


def _counted_devices(snapshot: Snapshot) -> dict[str, tuple[int, int]] | None:
    """Free DRA devices per node, and of those the untainted, when a pending pod's claims made from templates
    need some (the packer then skips nodes with too few before the allocator is asked); else None."""
    if not any(p.resource_claims for p in snapshot.pending):
        return None
    return node_devices(snapshot.dra)


def _devices(node: Node) -> int:
    return sum(len(s.devices) for s in node.slices)


def _template(pool: Pool, region: str) -> Node:
    """The node a scale-up of the pool gets. A pool in one zone promises that zone; a pool across zones
    does not (the Auto Scaling group or scale set picks it), so its template has no zone label and a pod
    that needs a zone is not planned there."""
    tmpl = pool.template_node(pool.zones[0], region)
    if len(pool.zones) == 1:
        return tmpl
    labels = {k: v for k, v in tmpl.labels.items() if k not in (keys.LABEL_ZONE, keys.LABEL_HOSTNAME)}
    return Node(f"template-{pool.name}", labels, tmpl.taints, tmpl.allocatable, pool=pool.name, pods=tmpl.pods,
                is_template=True, slices=tmpl.slices)


def build_packer(snapshot: Snapshot, ctx: PlanningContext, adv: Advanced, usage: Usage) -> tuple[Packer, list[Slot]]:
    """Bins for existing, coming and in-flight nodes, and one template slot per pool."""
    templates = {name: _template(obs.pool, ctx.region) for name, obs in snapshot.pools.items()}
    devices = _counted_devices(snapshot)
    names = _resource_names(snapshot, [t.allocatable for t in templates.values()], usage.names)
    packer = Packer([keys.RES_DRA_DEVICES, keys.RES_DRA_UNTAINTED, *names] if devices is not None  # devices first:
                    else names, referenced_keys(snapshot.pending) | usage.label_keys)  # the scarcest
    packer.memo = adv.memo
    dev = packer.index.get(keys.RES_DRA_DEVICES)
    if dev is not None:
        dra = snapshot.dra
        least: dict[tuple[str, tuple[object, ...]], tuple[int, int]] = {}  # pods of a workload ask the same

        def counts(pod: Pod) -> tuple[int, int]:
            key = (pod.namespace, pod.resource_claims)
            hit = least.get(key)
            if hit is None:
                hit = least[key] = (devices_at_least(dra, pod), devices_at_least(dra, pod, untainted=True))
            return hit

        packer.claim_counts = counts
    packer.set_min_request([*(p.requests for p in snapshot.pending), *map(dict, usage.requests)])
    delegated = _delegated(packer, snapshot)
    registered = _node_bins(packer, snapshot, ctx.timings.provision_timeout, adv, usage, templates, devices, delegated)
    slots: list[Slot] = []
    shapes: dict[tuple[int, ...], int] = {}
    for name, obs in snapshot.pools.items():
        pool = obs.pool
        tmpl = templates[name]
        zone = pool.zones[0] if len(pool.zones) == 1 else ""
        empty = packer.vec(predicates.free_resources(tmpl))
        if dev is not None:
            empty[dev] = empty[dev + 1] = UNCOUNTED  # (keys.RES_DRA_UNTAINTED follows)
        if pool.dra:
            _delegate(empty, tmpl, delegated)
        slot = Slot(pool, zone, packer.group_for(tmpl, tmpl.taints, own=("slot", name)), empty, ctx.price(pool),
                    pool.capacity_type == "spot", shapes.setdefault(tuple(empty), len(shapes)), _devices(tmpl))
        slots.append(slot)
        count = min(adv.in_flight(name), MAX_IN_FLIGHT_BINS)
        if not count:
            continue
        # A booting instance counts in the zone the cloud put it in (read from the cloud each pass, so a
        # restart keeps it); one not launched yet where the slot promises (its zone, or none).
        booting: dict[str, int] = {}
        if not zone:
            for m in obs.members:
                if m.provider_id not in registered and m.zone in pool.zones:
                    booting[m.zone] = booting.get(m.zone, 0) + 1
        i = 0
        for where, n in [*booting.items(), ("", count)]:
            group = _zonal_group(packer, pool, where, ctx.region) if where else slot.group
            free = packer.vec(predicates.free_resources(group.node)) if where else slot.empty
            if where and pool.dra:
                _delegate(free, group.node, delegated)
            if dev is not None:
                free = [*free[:dev], _devices(group.node), _devices(group.node), *free[dev + 2:]]
            for _ in range(min(n, count - i)):
                b = packer.add_bin(group.node, list(free), "in-flight", group, name, where or zone)
                b.name = f"in-flight-{name}-{i}"
                i += 1
    return packer, slots


def _delegated(packer: Packer, snapshot: Snapshot) -> dict[str, int]:
    """Extended resources a DeviceClass serves that the pass counts (resource -> its index): on a DRA node
    that does not advertise one, kube-scheduler leaves it to DRA (`scaler.core.dra.extended`), so the
    packer does not count it there (UNCOUNTED) and the DRA filter allocates the claim standing for it."""
    if not snapshot.dra.classes:
        return {}
    return {r: packer.index[r] for r in served(snapshot.dra.classes.values()) if r in packer.index}


def _delegate(free: list[int], node: Node, delegated: Mapping[str, int]) -> None:
    for r, i in delegated.items():
        if node.allocatable.get(r, 0) <= 0:
            free[i] = UNCOUNTED


# What an existing node's bin is made of, kept in the memo per (resources, label keys) under the node's name
# and version: (version, free, allocatable, `Packer.group_sig`, GPU devices).
Recipe = tuple[int, tuple[int, ...], tuple[int, ...], tuple[object, ...], int]


def _node_bins(packer: Packer, snapshot: Snapshot, provision_timeout: float, adv: Advanced, usage: Usage,
               templates: Mapping[str, Node], devices: Mapping[str, tuple[int, int]] | None,
               delegated: Mapping[str, int]) -> set[str]:
    """The bins of the existing and coming nodes; returns the provider ids of the registered nodes. An
    existing node's vectors and group signature are kept in the memo under its version (not when the
    pass counts DRA devices: a node's free devices change without it), so a pass only makes the Bin."""
    now, pools, published = snapshot.now, snapshot.pools, snapshot.dra.published()
    index, dev = packer.index, packer.index.get(keys.RES_DRA_DEVICES)
    bins, by_node = packer.bins, packer.by_node
    memo = adv.memo if dev is None and not delegated else None
    ctx = ("bins", tuple(packer.resources), packer.ref_keys)
    old: dict[str, Recipe] = (memo.find(ctx) if memo is not None else None) or {}
    kept: dict[str, Recipe] = {}
    if memo is not None:
        memo.put(ctx, kept)
    registered: set[str] = set()
    for node, used in zip(snapshot.nodes, usage.used, strict=True):
        registered.add(node.provider_id)
        if node.name in adv.leaving:
            continue  # interrupted: its capacity is going, its pods are planned as pending
        pname = node_pool(node)
        seen = pools.get(pname) if pname else None
        pool = seen.pool if seen else None
        r = old.get(node.name)
        if r is not None and r[0] != node.version:
            r = None
        if is_coming(node, pool, now, provision_timeout, published, r[4] if r is not None else None):
            assert pool is not None
            alloc = dict(node.allocatable)
            if pool.gpus and not pool.dra and gpu_devices(alloc) <= 0:
                alloc = pool.allocatable()
            free = packer.vec(alloc)
            if dev is not None and devices is not None:
                free[dev], free[dev + 1] = devices.get(node.name, (0, 0))
                if pool.dra:  # maybe not published yet
                    free[dev] = max(free[dev], _devices(templates[pool.name]))
                    free[dev + 1] = max(free[dev + 1], _devices(templates[pool.name]))
            if pool.dra or node.name in published:
                _delegate(free, node, delegated)
            vec_alloc = list(free)
            for res, v in used.items():
                free[index[res]] -= v
            group = packer.group_for(node, tuple(t for t in node.taints if t.key not in keys.STARTUP_TAINTS))
            b = packer.add_bin(node, free, "coming", group, pname, node.labels.get(keys.LABEL_ZONE), vec_alloc)
            b.fresh = is_fresh(node, now, provision_timeout)
            continue
        if not node.ready:
            continue  # NotReady for long: no capacity, not ours to guess about
        if r is None:
            free = packer.vec(node.allocatable)
            if dev is not None and devices is not None:
                free[dev], free[dev + 1] = devices.get(node.name, (0, 0))
            if node.name in published or (pool is not None and pool.dra):
                _delegate(free, node, delegated)
            alloc_t = tuple(free)
            for res, v in used.items():
                free[index[res]] -= v
            r = (node.version, tuple(free), alloc_t, packer.group_sig(node), gpu_devices(node.allocatable))
        if memo is not None and node.version:
            kept[node.name] = r
        group = packer.real_group(r[3], node)  # (add_bin's, inlined: no placement yet, so no bound nor skyline)
        b = Bin(list(r[1]), "existing", node.name, pname, node.labels.get(keys.LABEL_ZONE), group, node, list(r[2]))
        if pool is not None:
            b.fresh = is_fresh(node, now, provision_timeout)
        group.bins.append(b)
        group.epoch += 1
        bins.append(b)
        by_node[node.name] = b
    return registered


def _zonal_group(packer: Packer, pool: Pool, zone: str, region: str) -> Group:
    """The group of a multi-zone pool's booting instances in one zone (their zone is known)."""
    name = f"in-flight-{pool.name}-{zone}"
    for g in packer.in_flight_groups:
        if g.node.name == name:
            return g
    tmpl = pool.template_node(zone, region)
    node = Node(name, tmpl.labels, tmpl.taints, tmpl.allocatable, pool=pool.name, pods=tmpl.pods, is_template=True,
                slices=tmpl.slices)
    group = packer.group_for(node, node.taints, own=("in-flight", pool.name, zone))
    packer.in_flight_groups.append(group)
    return group


def zone_hints(pools: Sequence[Pool]) -> list[str]:
    """Where a stack mixes zonal and multi-zone pools on a fallback chain: a pool in one zone that falls
    back to a pool across zones. A pod that needs that zone cannot fall back (the group of a pool across
    zones picks the zone of a new node), so its fallback should be the on-demand pool of its zone."""
    by_name = {p.name: p for p in pools}
    out = []
    for pool in pools:
        fallback = by_name.get(pool.fallback or "")
        if fallback is not None and len(pool.zones) == 1 and len(fallback.zones) > 1:
            out.append(f"pools[{pool.name}].fallback: {fallback.name} spans {', '.join(fallback.zones)}, so a pod "
                       f"that needs {pool.zones[0]} cannot fall back there (its group picks the zone); give the "
                       "fallback one zone per pool")
    return out
