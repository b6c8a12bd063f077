"""The capacity a pass can place pods on: existing nodes, coming ones (registered, not ready yet),
in-flight ones (asked for, not registered) and one template slot per (pool, zone) for new nodes. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaler.core import keys, predicates
from scaler.core.config import ScalerConfig
from scaler.core.model import Node, Pod, SelectorTerm
from scaler.core.packing import BinKind, Group, Packer, Slot
from scaler.core.pool import Pool
from scaler.core.snapshot import Snapshot
from scaler.core.state import Advanced, may_still_boot, node_pool

# Taints a booting node carries until the kubelet / cloud controller is done: not a reason to
# think the node will never take the pod. (Kept here: the scheduler, not gpuburst, owns them.)
STARTUP_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.cloudprovider.kubernetes.io/uninitialized"})
MAX_IN_FLIGHT_BINS = 1000  # per pool: beyond that many booting nodes the detail stops mattering


def _resource_names(snapshot: Snapshot, templates: Iterable[Mapping[str, int]]) -> list[str]:
    names: set[str] = set()
    for pod in snapshot.pending:
        names.update(pod.requests)
    for node in snapshot.nodes:
        names.update(node.allocatable)
        for pod in node.pods:
            names.update(pod.requests)
    for res in templates:
        names.update(res)
    first = [keys.RES_GPU, keys.RES_CPU, keys.RES_MEMORY, keys.RES_PODS]
    return [r for r in first if r in names] + sorted(names - set(first))


def _affinity_keys(terms: tuple[SelectorTerm, ...]) -> Iterable[str]:
    for term in terms:
        for req in term:
            yield req.key


def referenced_keys(pods: Iterable[Pod]) -> set[str]:
    out: set[str] = set()
    seen: set[int] = set()
    for pod in pods:
        out.update(pod.node_selector)
        if pod.required_affinity and id(pod.required_affinity) not in seen:
            seen.add(id(pod.required_affinity))
            out.update(_affinity_keys(pod.required_affinity))
        if pod.preferred_affinity and id(pod.preferred_affinity) not in seen:  # scored, so grouped by
            seen.add(id(pod.preferred_affinity))
            out.update(_affinity_keys(tuple(p.term for p in pod.preferred_affinity)))
    return out


def is_coming(node: Node, pool: Pool | None, now: float, config: ScalerConfig) -> bool:
    """A registered node that will take pods soon: not ready yet, or a GPU node whose device plugin
    has not published its GPUs yet. Only within the provision timeout of its creation."""
    if pool is None:
        return False
    if not may_still_boot(node, now, config):
        return False
    if not node.ready:
        return True
    return pool.gpus > 0 and node.allocatable.get(keys.RES_GPU, 0) <= 0


def build_packer(snapshot: Snapshot, config: ScalerConfig, adv: Advanced) -> tuple[Packer, list[Slot]]:
    """Bins for existing, coming and in-flight nodes, and one template slot per (pool, zone)."""
    now = snapshot.now
    templates: dict[tuple[str, str], Node] = {}
    for name, obs in snapshot.pools.items():
        for zone in obs.pool.zones:
            templates[(name, zone)] = obs.pool.template_node(zone, config.region)
    running = [p for n in snapshot.nodes for p in n.pods if p.owner_kind != "DaemonSet"]
    packer = Packer(
        _resource_names(snapshot, [t.allocatable for t in templates.values()]),
        referenced_keys([*snapshot.pending, *running]),
    )
    packer.set_min_request([*snapshot.pending, *running])
    for node in snapshot.nodes:
        if node.name in adv.leaving:
            continue  # interrupted: its capacity is going, its pods are planned as pending
        pname = node_pool(node)
        seen = snapshot.pools.get(pname) if pname else None
        pool = seen.pool if seen else None
        taints = node.taints
        if is_coming(node, pool, now, config):
            assert pool is not None
            kind: BinKind = "coming"
            alloc = dict(node.allocatable)
            if pool.gpus and alloc.get(keys.RES_GPU, 0) <= 0:
                alloc = pool.allocatable()
            taints = tuple(t for t in taints if t.key not in STARTUP_TAINTS)
        elif node.ready:
            kind, alloc = "existing", node.allocatable
        else:
            continue  # NotReady for long: no capacity, not ours to guess about
        free = packer.vec(alloc)
        vec_alloc = list(free)
        for pod in node.pods:
            if pod.phase not in predicates.TERMINATED_PHASES:
                for r, v in pod.requests.items():
                    free[packer.index[r]] -= v
        group = packer.group_for(node, taints)
        packer.add_bin(node, free, kind, group, pname, node.labels.get(keys.LABEL_ZONE), vec_alloc)
    slots: list[Slot] = []
    shapes: dict[tuple[int, ...], int] = {}
    for name, obs in snapshot.pools.items():
        pool = obs.pool
        price = config.price(pool)
        for zone in pool.zones:
            tmpl = templates[(name, zone)]
            group = packer.group_for(tmpl, tmpl.taints, own=("slot", name, zone))
            empty = packer.vec(predicates.free_resources(tmpl))
            shape = shapes.setdefault(tuple(empty), len(shapes))
            slots.append(Slot(pool, zone, group, empty, price, pool.capacity_type == "spot", shape))
        count = min(adv.in_flight(name), MAX_IN_FLIGHT_BINS)
        if not count:
            continue
        pool_slots = {s.zone: s for s in slots if s.pool.name == name}
        # Booting nodes go in the zone they were asked in; those of unknown zone (a multi-zone pool
        # after a restart) get a template without a zone label: a pod that needs a zone does not
        # count on them.
        single = pool.zones[0] if len(pool.zones) == 1 else None
        by_zone: list[tuple[str | None, int]] = []
        for rec in adv.state.in_flight.get(name, []):
            by_zone.append((rec.zone if rec.zone in pool_slots else single, rec.count))
        known = sum(n for _, n in by_zone)
        if known < count:
            by_zone.append((single, count - known))
        i = 0
        for where, asked in by_zone:
            n = min(asked, count - i)
            if n <= 0:
                break
            if where is not None:
                group, empty = pool_slots[where].group, pool_slots[where].empty
            else:
                group = _zoneless_group(packer, name, templates[(name, pool.zones[0])])
                empty = packer.vec(predicates.free_resources(group.node))
            for _ in range(n):
                b = packer.add_bin(group.node, list(empty), "in-flight", group, name, where)
                b.name = f"in-flight-{name}-{i}"
                i += 1
    return packer, slots


def _zoneless_group(packer: Packer, pool: str, tmpl: Node) -> Group:
    key = ("in-flight", pool)
    for g in packer.in_flight_groups:
        if g.node.name == f"in-flight-{pool}":
            return g
    labels = {k: v for k, v in tmpl.labels.items() if k != keys.LABEL_ZONE}
    node = Node(f"in-flight-{pool}", labels, tmpl.taints, tmpl.allocatable, pool=pool, pods=tmpl.pods,
                is_template=True)
    group = packer.group_for(node, node.taints, own=key)
    packer.in_flight_groups.append(group)
    return group

