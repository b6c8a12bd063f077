"""Broken GPU nodes: which nodes are unhealthy, which are repaired now, and which wait for the budget.

Pure. A node is unhealthy while it shows one of its pool's signals (`scaler.core.config.repair`): fewer
GPU devices allocatable than its capacity (the device plugin stopped advertising a broken GPU), a health
condition in the status that means broken (`GpuXidError=True`, `AcceleratedHardwareReady=False`), or
Ready not True (its instance still exists: a gone instance is `advance`'s). Past the signal's grace the
node is repaired like an interrupted one: its pods are planned as pending by the scale-up planner (same
pool or its fallback chain: the replacement is bought ahead), and it is drained (cordon, evictions
through the Eviction API, PodDisruptionBudgets honoured; with the pool's `force_evict`, a pod provably on
the broken GPU is deleted instead) and exactly its instance given back. A node that lost GPU devices but
still runs pods on its healthy ones is kept while a drain would lose more work than its dead GPUs have stood
idle since the signal began (`hold_reason`: each pod's GPUs x its run since its last checkpoint, from its start
and its `gpuburst.io/checkpoint-interval`; all its run without one), so it goes when it is idle or just after its
pods checkpoint, and after the pool's `repair.max_hold` at the latest; one that runs no GPU pod is replaced
at once, without waiting for its grace. A pod whose status reports one of its devices Unhealthy (KEP-4680's
`allocatedResourcesStatus`: its container restarts in place on the dead GPU, as the kubelet keeps a container's
devices across restarts) runs nothing: it has no work at stake, its GPUs count as idle, and it is provably on
the broken GPU. At most
the pool's budget of nodes are in repair at once, and `max_per_pass` start per pass; past the budget
the others wait and the pool's repairs are reported paused. A node whose signal clears while its drain
is still running is named `recovered`: the actuator stops the drain and uncordons it.

A DRA GPU tainted NoSchedule or NoExecute with one of the pool's `device_taints` keys (by its driver's
health checks, or a DeviceTaintRule) is a signal beside the conditions, held for `condition_grace` from the
taint's timeAdded.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scaler.core.config.repair import RepairSpec
from scaler.core.dra.nvidia import DRIVER, physical_gpu
from scaler.core.model import keys
from scaler.core.model.dra import BLOCKING_EFFECTS, DeviceTaint, DraObjects
from scaler.core.model.objects import Node, Pod
from scaler.core.model.workload import blocker, gpu_devices, node_pool, to_evict
from scaler.core.planning.decisions import NodeEvent, Repair, ScaleDown
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State, fmt_time
from scaler.core.scheduling.filters.dra import claim_keys


@dataclass(slots=True)
class Repairs:
    nodes: set[str] = field(default_factory=set)  # in repair: their capacity is gone for the planners
    displaced: list[Pod] = field(default_factory=list)  # their pods, planned as pending
    drains: list[ScaleDown] = field(default_factory=list)
    repairs: list[Repair] = field(default_factory=list)
    events: list[NodeEvent] = field(default_factory=list)
    unhealthy: dict[str, int] = field(default_factory=dict)
    paused: dict[str, str] = field(default_factory=dict)
    recovered: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Signal:
    text: str
    since: float  # when it began, as the node says; 0: unknown (the first pass that saw it counts)
    grace: float
    lost_devices: bool = False  # the device plugin advertises fewer GPU devices than the node has


def device_taints(dra: DraObjects) -> dict[str, list[tuple[str, DeviceTaint]]]:
    """Node -> (device, taint) of the devices its slices publish with a taint that blocks allocation."""
    out: dict[str, list[tuple[str, DeviceTaint]]] = {}
    for s in dra.slices:
        if s.node_name:
            for d in s.devices:
                for t in d.taints:
                    if t.effect in BLOCKING_EFFECTS:
                        out.setdefault(s.node_name, []).append((d.name, t))
    return out


def published_gpus(dra: DraObjects) -> dict[str, int]:
    """Node -> the GPUs NVIDIA's DRA driver publishes for it now (a GPU counts once, whole or by its MIG devices,
    by its `uuid` or their `parentUUID`), for the nodes it published a slice for (all the slices of the pool's
    newest generation, as the allocator reads them). A node publishing fewer GPUs than it has lost them: the
    driver lists what NVML enumerates when it starts (a GPU fallen off the bus is missing), and 25.12.0's health
    check withdrew a GPU with a critical XID (0.4.x taints it instead: `device_taints`)."""
    seen: dict[str, set[object]] = {}
    for s in dra.complete():  # (a pool still being published says nothing yet)
        if s.driver == DRIVER and s.node_name:
            seen.setdefault(s.node_name, set()).update(map(physical_gpu, s.devices))
    return {node: len(gpus) for node, gpus in seen.items()}


def withdrawn(node: Node, gpus: int, published: Mapping[str, int]) -> int:
    """GPUs of a DRA node (its pool has `gpus` each) that its driver no longer publishes (`published_gpus`);
    0 before it published any slice."""
    have = published.get(node.name)
    return max(gpus - have, 0) if have is not None else 0


def signals(node: Node, spec: RepairSpec, taints: Sequence[tuple[str, DeviceTaint]] = (),
            gone: tuple[int, int] = (0, 0)) -> list[Signal]:
    """The health signals a node shows now; `taints`: its devices' (`device_taints`); `gone`: (GPUs its DRA
    driver withdrew from its slices, GPUs it has)."""
    out = []
    if node.capacity:  # (not given: nothing to compare)
        capacity, allocatable = gpu_devices(node.capacity), gpu_devices(node.allocatable)
        if allocatable < capacity:
            out.append(Signal(f"{capacity - allocatable} of {capacity} GPU devices not allocatable", 0.0,
                              spec.lost_gpu_grace, lost_devices=True))
    if gone[0] > 0:
        out.append(Signal(f"{gone[0]} of {gone[1]} GPUs withdrawn from its ResourceSlices by the DRA driver", 0.0,
                          spec.lost_gpu_grace, lost_devices=True))
    for cond in node.conditions:
        if spec.conditions.get(cond.type) == cond.status:
            why = f" ({cond.reason})" if cond.reason else ""
            out.append(Signal(f"condition {cond.type}={cond.status}{why}", cond.since, spec.condition_grace))
    for device, taint in taints:
        if taint.key in spec.device_taints:
            out.append(Signal(f"device {device} tainted {taint}", taint.since, spec.condition_grace))
    if not node.ready:
        since = next((c.since for c in node.conditions if c.type == "Ready"), 0.0)
        out.append(Signal("NotReady", since, spec.not_ready_timeout))
    return out


def plan_repairs(snapshot: Snapshot, state: State, gone: set[str]) -> Repairs:
    """Find the unhealthy nodes, start the repairs the budget allows; `state.unhealthy_since` and
    `state.repair_paused` are updated (the caller's copy)."""
    out = Repairs()
    now = snapshot.now
    seen: dict[str, float] = {}
    due: dict[str, list[tuple[float, Node, str]]] = defaultdict(list)
    size: dict[str, int] = defaultdict(int)
    tainted = device_taints(snapshot.dra)
    # (read only where a DRA pool is repaired: a pass over every device of every slice)
    repaired_dra = any(o.pool.dra and o.pool.repair.enabled for o in snapshot.pools.values())
    published = published_gpus(snapshot.dra) if repaired_dra else {}
    dead: dict[str, int] = {}
    for node in snapshot.nodes:
        name = node_pool(node)
        obs = snapshot.pools.get(name) if name else None
        if name is None or obs is None or node.name in gone:
            continue
        size[name] += 1
        drain = state.drains.get(node.name)
        lost = withdrawn(node, obs.pool.gpus, published) if obs.pool.dra else 0
        if lost:
            dead[node.name] = lost
        found = (signals(node, obs.pool.repair, tainted.get(node.name, ()), (lost, obs.pool.gpus))
                 if obs.pool.repair.enabled else [])
        if not found:
            if drain is not None and drain.repair:
                out.recovered.append(node.name)
            continue
        out.unhealthy[name] = out.unhealthy.get(name, 0) + 1
        seen[node.name] = state.unhealthy_since.get(node.name, now)
        # A node that lost GPU devices and runs no GPU pod (or only pods on a broken device) is replaced at once:
        # nothing is lost by it, and its grace would only keep paying for it (scale-down would remove it sooner).
        idle = not any((gpu_devices(p.requests) or p.resource_claims) and not p.unhealthy_devices
                       for p in to_evict(node.pods))
        ready = [(s.since or seen[node.name], s) for s in found
                 if now - (s.since or seen[node.name]) >= s.grace or (idle and s.lost_devices)]
        if ready:
            since, first = min(ready, key=lambda r: r[0])
            due[name].append((since, node, first.text))
    state.unhealthy_since = seen
    for name in sorted(due):
        _pool_repairs(snapshot, state, name, size[name], sorted(due[name], key=lambda d: (d[0], d[1].name)), dead,
                      out)
    newly = sorted(set(out.paused) - state.repair_paused)
    state.repair_paused = frozenset(out.paused)
    for name in newly:
        out.events.extend(NodeEvent(r.node, "GpuRepairPaused", f"repair paused: {out.paused[name]}", warning=True)
                          for r in out.repairs if r.pool == name and not r.started and r.node not in out.nodes)
    return out


def _pool_repairs(snapshot: Snapshot, state: State, name: str, size: int, due: list[tuple[float, Node, str]],
                  dead: Mapping[str, int], out: Repairs) -> None:
    spec = snapshot.pools[name].pool.repair
    in_repair = {n for n, d in state.drains.items() if d.repair and d.pool == name}
    budget = spec.budget(size)
    room, per_pass, waiting, started = budget - len(in_repair), spec.max_per_pass, 0, 0
    for since, node, text in due:
        if node.name in in_repair:
            _displace(node, out)
            out.repairs.append(Repair(node.name, name, text, since, started=False))
            continue
        if node.name in state.drains:
            continue  # draining already (an interruption, a scale-down): going anyway
        why = next((b for b in map(blocker, node.pods) if b), None)
        if why is not None:
            out.notes.append(f"node {node.name} is unhealthy ({text}) but not repaired: {why}")
            out.repairs.append(Repair(node.name, name, f"{text}; blocked: {why}", since, started=False))
            continue
        held = hold_reason(node, since, snapshot.now, spec, dead.get(node.name), snapshot.dra)
        if held is not None:
            out.notes.append(f"node {node.name} is unhealthy ({text}) but kept: {held}")
            out.repairs.append(Repair(node.name, name, f"{text}; kept: {held}", since, started=False))
            continue
        if room <= 0 or per_pass <= 0:
            waiting += room <= 0
            out.repairs.append(Repair(node.name, name, text, since, started=False))
            continue
        room, per_pass, started = room - 1, per_pass - 1, started + 1
        _displace(node, out)
        out.repairs.append(Repair(node.name, name, text, since, started=True))
        reason = f"repair: {text} since {fmt_time(since)}"
        pods = to_evict(node.pods)
        force = tuple(p.key for p in pods if spec.force_evict and on_broken_gpu(p, node))
        out.drains.append(ScaleDown(name, node.name, node.provider_id, tuple(p.key for p in pods), reason,
                                    repair=True, delete=force))
        out.events.append(NodeEvent(node.name, "GpuRepair", f"{reason}: draining; a replacement is planned ahead",
                                    warning=True))
    if waiting:
        out.paused[name] = (f"{len(in_repair) + started} of {size} node(s) in repair, the budget "
                            f"({spec.max_unhealthy_percent:g} %); {waiting} more unhealthy node(s) wait")
        out.notes.append(f"pool {name}: repairs paused: {out.paused[name]}")


def pod_gpus(pod: Pod, dra: DraObjects | None) -> int:
    """The GPU devices a running pod holds: its device plugin resources, or the devices allocated to its
    ResourceClaims (None: no DRA objects observed, so its device plugin resources only)."""
    n = gpu_devices(pod.requests)
    if dra is None or not pod.resource_claims:
        return n
    for _, key in claim_keys(pod):
        claim = dra.claims.get(key)
        if claim is not None and claim.allocation is not None:
            n += len(claim.allocation.results)
    return n


def at_stake(pod: Pod, now: float, dra: DraObjects | None = None) -> float:
    """GPU-seconds of work a drain would cost the pod now: its GPUs (`pod_gpus`) x its run since its last
    checkpoint (its `gpuburst.io/checkpoint-interval`; 0 checkpoints continuously); all its run without one; inf
    when its start is unknown; 0 on a device the kubelet reports Unhealthy (its container cannot run: what it ran
    since its checkpoint is lost already)."""
    gpus = pod_gpus(pod, dra)
    if not gpus or pod.unhealthy_devices:
        return 0.0
    if pod.started_at is None:
        return math.inf
    run = max(now - pod.started_at, 0.0)
    interval = checkpoint_interval(pod)
    return gpus * (run if interval is None else run % interval if interval > 0 else 0.0)


def checkpoint_interval(pod: Pod) -> float | None:
    """The pod's declared seconds of run between checkpoints; None when it declares none (or not a number)."""
    text = pod.annotations.get(keys.ANNOTATION_CHECKPOINT_INTERVAL)
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def hold_reason(node: Node, since: float, now: float, spec: RepairSpec, dead: int | None = None,
                dra: DraObjects | None = None) -> str | None:
    """Why a node that lost GPU devices is kept for the pods running on its healthy ones, or None to drain it:
    idle, past `max_hold`, or when its pods' work at stake is no more than the GPU-seconds its dead devices
    have stood idle since `since` (the ski-rental rule: keep paying for the dead GPU until it has cost what a
    drain would lose, so neither choice costs more than twice the better one). `dead`: the GPUs its DRA driver
    withdrew (`withdrawn`); else the device plugin's count, capacity less allocatable."""
    if dead is None:
        dead = gpu_devices(node.capacity) - gpu_devices(node.allocatable) if node.capacity else 0
    if dead <= 0 or now - since >= spec.max_hold:
        return None
    pods = to_evict(node.pods)
    stalled = [(p, pod_gpus(p, dra)) for p in pods if p.unhealthy_devices]
    # A pod on a broken device runs nothing (it restarts in place on it): all its GPUs stand idle, the dead among them.
    gpus = sum(g for _, g in stalled) + max(dead - sum(min(p.unhealthy_devices, g) for p, g in stalled), 0)
    stake = sum(at_stake(p, now, dra) for p in pods)
    idle = gpus * (now - since)
    if stake <= idle:
        return None
    lose = "all they ran (no checkpoint interval known)" if math.isinf(stake) else \
        f"{stake / 3600:.2f} GPU-h since their last checkpoints"
    return (f"a drain would lose {lose}, more than the {idle / 3600:.2f} GPU-h its {gpus} idle GPU device(s) (dead, "
            f"or held by a pod on a dead one) stood idle; drained by {fmt_time(since + spec.max_hold)} at the latest")


def on_broken_gpu(pod: Pod, node: Node) -> bool:
    """The pod provably holds the broken GPU: the kubelet reports one of its devices Unhealthy (KEP-4680), or it
    holds every GPU device of the node. (Without that status, which pod holds which device is not in the API with
    the device plugin, so a pod holding fewer is never assumed to.)"""
    held = gpu_devices(pod.requests)
    return pod.unhealthy_devices > 0 or (held > 0 and held >= gpu_devices(node.capacity or node.allocatable))


def _displace(node: Node, out: Repairs) -> None:
    out.nodes.add(node.name)
    out.displaced.extend(dataclasses.replace(p, node_name=None) for p in to_evict(node.pods))
