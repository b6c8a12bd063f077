"""What the Packer (`scaler.core.planning.packing`) works on: bins (nodes' free resources as vectors), node
groups, pod classes, the slots new nodes open in, and the vector helpers the planners share. Pure."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from scaler.core.config.pool import Pool
from scaler.core.model.objects import Node, Pod

BinKind = Literal["existing", "coming", "in-flight", "new"]
FRESH = "fresh"  # in the kinds a placement may use: the fresh bins too, whatever their kind (Bin.fresh)


@dataclass(slots=True, eq=False)
class Bin:
    """A node's free capacity as a resource vector: a real node, a booting one, or a template."""

    free: list[int]
    kind: BinKind
    name: str
    pool: str | None
    zone: str | None
    group: Group
    node: Node
    alloc: list[int] | None = None  # allocatable of an existing / coming node (what the scheduler scores)
    version: int = 0  # bumped whenever `free` changes: a score computed earlier is stale
    removed: bool = False  # chosen for removal by the scale-down planner
    touched: bool = False  # received pods in this pass
    # a node that came up and is still empty: matched against with the nodes still coming, not bet on in the
    # scheduler's queue order (`capacity.is_fresh`)
    fresh: bool = False


class Group:
    """Nodes the static predicates cannot tell apart."""

    __slots__ = ("bins", "bound", "epoch", "label_id", "node", "real", "sky", "start", "taint_id", "unsched")

    def __init__(self, label_id: int, taint_id: int, unsched: bool, node: Node) -> None:
        self.label_id = label_id
        self.taint_id = taint_id
        self.unsched = unsched
        self.node = node  # a representative: its labels and taints are the group's
        self.bins: list[Bin] = []
        self.bound: list[int] | None = None  # elementwise max of free over bins, None = unknown
        self.start = 0  # bins before this one are too full for any pod of the pass
        self.real = False  # existing and coming nodes only
        self.epoch = 0  # bumped when a bin is added or gets room back (a rollback)
        # A real group's skyline (`skyline`) when last computed (a cover of its bins' free), None = unknown
        self.sky: list[tuple[int, ...]] | None = None


class PodClass:
    """Interchangeable pods."""

    __slots__ = ("gang", "gpus", "nz", "origin", "pods", "priority", "rep", "sort_key", "static_id")

    def __init__(self, rep: Pod, nz: tuple[tuple[int, int], ...], static_id: int, gang: str | None) -> None:
        self.rep = rep
        self.nz = nz  # (resource index, amount) of the non-zero requests
        self.static_id = static_id
        self.gang = gang
        self.pods: list[Pod] = []
        self.gpus = 0
        self.priority = rep.priority
        self.sort_key: tuple[float, ...] = ()
        self.origin: PodClass | None = None  # the class this one is a part of (split by queue position)


@dataclass(slots=True)
class Slot:
    """A (pool, zone) a scale-up can open nodes in, with its template node."""

    pool: Pool
    zone: str
    group: Group
    empty: list[int]  # free resources of a new node (allocatable minus the pool's DaemonSets)
    price: float
    spot: bool
    shape: int = 0  # slots with equal `empty` share a shape
    devices: int = 0  # DRA devices a new node publishes (its keys.RES_DRA_DEVICES once opened; `empty` has none)




Placement = list[tuple[Bin, int]]
Scores = dict[Sequence[int], int]  # allocatable then free of the resources a profile scores -> the score


def dominant(nz: Iterable[tuple[int, int]], scale: Sequence[int]) -> float:
    return max((a / scale[i] for i, a in nz if scale[i] > 0), default=0.0)


def skyline(vectors: Iterable[Sequence[int]]) -> list[tuple[int, ...]]:
    """The vectors no other one covers (>= in every resource): some vector has room for a request iff one
    of these has. A group of similar nodes has a few dozen, against hundreds of nodes."""
    out: list[tuple[int, ...]] = []
    last: tuple[int, ...] = ()  # the one that covered (or was) the vector before: likely to cover this one
    for v in sorted(map(tuple, vectors), reverse=True):  # one that covers v sorts before it
        if last and all(map(operator.ge, last, v)):
            continue
        for o in out:
            if all(map(operator.ge, o, v)):
                last = o
                break  # covered
        else:
            out.append(v)
            last = v
    return out


def with_room(bins: Iterable[Bin], nz: tuple[tuple[int, int], ...]) -> list[Bin]:
    """The bins with room for one pod of the request, in order (unrolled for up to 4 resources: a pass asks
    this of ~100k bins)."""
    if len(nz) == 4:
        (i, a), (j, b), (k, c), (m, d) = nz
        return [x for x in bins if (f := x.free)[i] >= a and f[j] >= b and f[k] >= c and f[m] >= d]
    if len(nz) == 3:
        (i, a), (j, b), (k, c) = nz
        return [x for x in bins if (f := x.free)[i] >= a and f[j] >= b and f[k] >= c]
    if len(nz) == 2:
        (i, a), (j, b) = nz
        return [x for x in bins if (f := x.free)[i] >= a and f[j] >= b]
    if len(nz) == 1:
        ((i, a),) = nz
        return [x for x in bins if x.free[i] >= a]
    return [x for x in bins if all(x.free[i] >= a for i, a in nz)]


def fit_count(free: list[int], nz: tuple[tuple[int, int], ...], limit: int) -> int:
    k = limit
    for i, a in nz:
        q = free[i] // a
        if q < k:
            if q <= 0:
                return 0
            k = q
    return k
