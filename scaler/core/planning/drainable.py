"""What a node's own pods say about draining it (`Drainable`), worked out once per node version: the scale-down's
trials read it for every candidate, every pass, and on a large idle cluster most candidates are the same nodes
with the same pods as in the last pass. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scaler.core.model.objects import Node, Pod, Toleration
from scaler.core.model.workload import blocker, to_evict
from scaler.core.planning.memo import Memo

# A pod class's statics and request, by value: (node selector, required affinity, tolerations, the nonzero
# requests by resource name). Within one Packer it names the same classes as (static id, nz) does: static ids
# are given per (selector, affinity, tolerations) and nz is the nonzero request by resource index.
FullKey = tuple[tuple[tuple[str, str], ...], object, tuple[Toleration, ...], tuple[tuple[str, int], ...]]


def full_key(pod: Pod, nz: Sequence[tuple[str, int]] | None = None) -> FullKey:
    """The key of the pod's class (`nz`: its nonzero request by name, when the class says it with its devices)."""
    request = tuple(sorted(nz if nz is not None else ((r, v) for r, v in pod.requests.items() if v > 0)))
    return tuple(sorted(pod.node_selector.items())), pod.required_affinity, pod.tolerations, request


@dataclass(slots=True)
class Drainable:
    """Of a node's pods: why the node may not be drained (`blocker`), the pods a drain evicts (read only), the keys
    of their classes (`full_key`, each once; None when a pod has ResourceClaims: its class counts the devices
    the pass's DRA view gives it) and the last `cheaper_home` answer for them, with the Homes and the pool it
    was worked out with."""

    blocker: str | None
    evict: list[Pod]
    keys: tuple[FullKey, ...] | None
    home: tuple[object, str, str | None] | None = None


def drainable(node: Node, memo: Memo | None) -> Drainable:
    """The node's Drainable, kept in the memo under its version (which changes with any of its pods)."""
    if memo is None or not node.version:
        return _drainable(node.pods)
    key = ("drainable", node.name, node.version)
    hit = memo.find(key)
    if hit is None:
        hit = _drainable(node.pods)
        memo.put(key, hit)
    return hit  # type: ignore[no-any-return]


def _drainable(pods: list[Pod]) -> Drainable:
    why = next((w for w in map(blocker, pods) if w), None)
    evict = to_evict(pods)
    keys = None if any(p.resource_claims for p in evict) else tuple(dict.fromkeys(map(full_key, evict)))
    return Drainable(why, evict, keys)
