"""Interruption notices and drains in progress: which nodes are leaving, and which pods need a new home.

Pure. A spot interruption drains its node (forced: the cloud takes it at the deadline anyway), and the
replacement goes where a scale-up would go: the pods of the node are planned as pending by the same
scale-up planner (expander, fallback chain, caps, backoff, unavailable offerings), on capacity that is
not leaving. One reclaim does not mark its offering unavailable: the cloud reclaims single instances
at random; a shortage shows as launch failures, which do (for `timings.unavailable_ttl`), and the
fallback takes over from there. A rebalance recommendation drains only a node
whose pods may all be moved; a node that is already stopping ("terminating") is left to the cloud.
While such a drain is in progress its node's capacity does not count and its pods keep their home.
A Capacity Block's nodes are drained the same way (forced, evictions PodDisruptionBudget-respecting)
from `drain_lead` before the block's end, their replacements planned ahead. A gang (pods sharing
the `gang_label` setting) is moved together: its budget (minAvailable = all its pods, as gang schedulers
create it) refuses every eviction, and EC2 would take its pods at the block's end anyway, losing the
work since its last checkpoint; its pods on the block are deleted at the drain's start instead (their
grace period lets the job checkpoint), and come back pending on the replacements bought on the next rung.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from scaler.core.config.reservation import EC2_BLOCK_TERMINATION
from scaler.core.model.drain import DrainState
from scaler.core.model.interruption import Interruption
from scaler.core.model.objects import Node, Pod
from scaler.core.model.podgroup import gang_of
from scaler.core.model.workload import blocker, node_pool, to_evict
from scaler.core.planning.decisions import NodeEvent, ScaleDown
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import fmt_time


@dataclass(slots=True)
class Leaving:
    nodes: set[str] = field(default_factory=set)  # their capacity is gone for the planners
    displaced: list[Pod] = field(default_factory=list)  # their pods, planned as pending
    drains: list[ScaleDown] = field(default_factory=list)
    handled: list[Interruption] = field(default_factory=list)
    events: list[NodeEvent] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def node_of(notice: Interruption, nodes: dict[str, Node]) -> Node | None:
    """The node a notice names: by its providerID (case-insensitive: Azure ids are), or by the id that
    ends it (an AWS instance id); `nodes` maps both, lower-cased, to nodes."""
    return nodes.get(notice.instance.lower()) or nodes.get(notice.instance.lower().rsplit("/", 1)[-1])


def _index(nodes: list[Node]) -> dict[str, Node]:
    out: dict[str, Node] = {}
    for n in nodes:
        if n.provider_id:
            out[n.provider_id.lower()] = n
            out[n.provider_id.lower().rsplit("/", 1)[-1]] = n
    return out


def _displace(node: Node, out: Leaving) -> None:
    out.nodes.add(node.name)
    out.displaced.extend(dataclasses.replace(p, node_name=None) for p in to_evict(node.pods))


def read_notices(snapshot: Snapshot, notices: list[Interruption], drains: Mapping[str, DrainState],
                 gone: set[str]) -> Leaving:
    """Decide on every notice (the State's: those read and not decided on yet); collect the nodes already
    draining for one and the nodes whose instance is gone (their pods are lost with them)."""
    out = Leaving()
    by_name = {n.name: n for n in snapshot.nodes}
    for name in {*gone, *(n for n, d in drains.items() if d.notice)}:
        if name in by_name:
            _displace(by_name[name], out)
    index = _index(snapshot.nodes) if notices else {}
    for notice in notices:
        out.handled.append(notice)
        node = node_of(notice, index)
        pool = node_pool(node) if node is not None else None
        if node is None or pool is None or pool not in snapshot.pools:
            continue  # not a node of ours (or gone already)
        forced = notice.kind == "spot-interruption"
        current = drains.get(node.name)
        if notice.kind == "terminating" or (current is not None and current.notice and (current.forced or not forced)):
            continue  # already stopping, or already draining for a notice at least as strong
        if not forced:
            why = next((b for b in map(blocker, node.pods) if b), None)
            if why is not None:
                out.events.append(NodeEvent(node.name, "SpotRebalanceIgnored", f"{notice.kind}: not draining: {why}",
                                            warning=True))
                out.notes.append(f"{notice.kind} for node {node.name}: not draining it: {why}")
                continue
        if node.name not in out.nodes:
            _displace(node, out)
        out.drains.append(ScaleDown(pool, node.name, node.provider_id, tuple(p.key for p in to_evict(node.pods)),
                                    f"{notice.kind} of {notice.instance}", deadline=notice.deadline, forced=forced))
        out.events.append(NodeEvent(node.name, "SpotInterrupted", f"{notice.kind}: draining; a replacement is planned "
                                    "ahead of the reclaim", warning=True))
    return out


def ending_blocks(snapshot: Snapshot, drains: Mapping[str, DrainState], out: Leaving, gang_label: str) -> None:
    """Drain the nodes of Capacity Blocks that end within their pool's drain lead (once: a drain in progress
    is already displaced). EC2 starts terminating the instances 30 minutes before the end: that is the
    drain's deadline, the node is removed then whatever is left. Gang pods are deleted, not evicted."""
    for node in snapshot.nodes:
        name = node_pool(node)
        obs = snapshot.pools.get(name) if name else None
        block = obs.pool.reservation if obs is not None and obs.pool.capacity_type == "capacity-block" else None
        if name is None or block is None or block.end is None or node.name in drains:
            continue
        if snapshot.now < block.end - block.drain_lead:
            continue
        if node.name not in out.nodes:
            _displace(node, out)
        reason = f"Capacity Block {block.id} ends at {fmt_time(block.end)}"
        pods = to_evict(node.pods)
        out.drains.append(ScaleDown(name, node.name, node.provider_id, tuple(p.key for p in pods), reason,
                                    deadline=max(snapshot.now, block.end - EC2_BLOCK_TERMINATION), forced=True,
                                    kind="capacity-block-end",
                                    delete=tuple(p.key for p in pods if gang_of(p, gang_label) is not None)))
        out.events.append(NodeEvent(node.name, "CapacityBlockEnding", f"{reason}: draining; replacements are "
                                    "planned on the pool's fallback", warning=True))
