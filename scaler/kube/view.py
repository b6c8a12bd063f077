"""Converted pods and nodes into one pass's view: nodes with the pods bound to them, and the pending pods.

`cluster_view` converts the API's lists at once (`python -m scaler plan`); the watch-fed cache keeps a
`PodIndex` up to date as each pod's event arrives, so that a pass reads each node's pods and the pending
ones without walking every pod of the cluster. Both give the same view (`assemble` is the reference).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from scaler.core.model.objects import Node, Pod
from scaler.core.model.workload import TERMINATED_PHASES
from scaler.kube.convert import JSON, SnapshotError, is_unschedulable, node_from_json, pod_from_json


@dataclass(slots=True)
class Converted:
    """Nodes with the pods bound to them, and the pending pods, as the planner's Snapshot takes them."""

    pending: list[Pod] = field(default_factory=list)  # PodScheduled=False, reason Unschedulable
    nodes: dict[str, Node] = field(default_factory=dict)
    waiting: int = 0  # pods with no node the scheduler has not marked Unschedulable (yet)
    lost: list[Pod] = field(default_factory=list)  # pods bound to a node that is not in the view


PodEntry = tuple[Pod, bool]  # a pod and whether the scheduler marked it Unschedulable

_NODE_FIELDS = operator.attrgetter(*(f.name for f in fields(Node)))


def with_pods(node: Node, pods: Iterable[Pod]) -> Node:
    """A copy of the node holding a list of its own of the pods (`dataclasses.replace`, at a fifth of its cost:
    a pass makes one per node)."""
    copy = Node(*_NODE_FIELDS(node))
    copy.pods = list(pods)
    return copy


def pod_entry(obj: JSON) -> PodEntry | None:
    """A pod as the view takes it, None for a terminated one (it holds nothing and is left out unread).
    Raises SnapshotError."""
    if (obj.get("status") or {}).get("phase") in TERMINATED_PHASES:
        return None
    return pod_from_json(obj), is_unschedulable(obj)


def cluster_view(nodes: Iterable[JSON], pods: Iterable[JSON], pool_label: str | None = None,
                 skip: Callable[[SnapshotError, JSON], None] | None = None) -> Converted:
    """The one conversion of the API's nodes and pods into the core's view (`python -m scaler plan`; the
    watch-fed cache converts each object once, as its event arrives, and keeps a `PodIndex`). Terminated pods
    hold nothing and are left out. An object that does not convert raises SnapshotError, or, with `skip`,
    is handed to it and left out."""
    converted: list[Node] = []
    for obj in nodes:
        try:
            converted.append(node_from_json(obj, pool_label))
        except SnapshotError as err:
            if skip is None:
                raise
            skip(err, obj)
    entries: list[PodEntry] = []
    for obj in pods:
        try:
            entry = pod_entry(obj)
        except SnapshotError as err:
            if skip is None:
                raise
            skip(err, obj)
            continue
        if entry is not None:
            entries.append(entry)
    return assemble(converted, entries)


def assemble(nodes: Iterable[Node], pods: Iterable[PodEntry]) -> Converted:
    """Converted nodes and pods into one pass's view. Each node is a copy with a list of its own, so that
    converted objects can be kept from pass to pass; the pods are shared."""
    out = Converted()
    for node in nodes:
        out.nodes[node.name] = with_pods(node, ())
    for pod, unschedulable in pods:
        if pod.node_name:
            host = out.nodes.get(pod.node_name)
            if host is None:
                out.lost.append(pod)
            else:
                host.pods.append(pod)
        elif unschedulable:
            out.pending.append(pod)
        else:
            out.waiting += 1
    return out


@dataclass(slots=True)
class IndexView:
    """What a pass reads of the pods (`PodIndex.view`): lists it may keep, never changed afterwards."""

    bound: dict[str, list[Pod]]  # node name -> its pods
    pending: list[Pod]
    waiting: int
    errors: list[tuple[SnapshotError, JSON]]  # the pods that did not convert, and their objects


_FIRST = operator.itemgetter(0)
_LEFT_OUT, _BOUND, _PENDING, _WAITING, _ERROR = range(5)  # where a key's pod is in the view


class PodIndex:
    """The converted pods of an informer as `assemble` sorts them, kept up to date per watch event: each
    node's pods, the pending ones, the count of those waiting, and the ones that did not convert. Every list
    is in the informer's order (of each key's first arrival, as `assemble` reads the informer's dict): each
    key keeps the number of its arrival. Not locked: its informer calls it under its own lock."""

    def __init__(self) -> None:
        self._arrivals = 0
        self._entries: dict[str, tuple[int, int, str, object]] = {}  # key -> (arrival, where, its node, model)
        self._bound: dict[str, dict[str, tuple[int, Pod]]] = {}  # node name -> key -> (arrival, pod)
        self._lists: dict[str, list[Pod]] = {}  # node name -> its pods in order, as last asked for
        self._dirty: set[str] = set()  # nodes whose list is not up to date
        self._pending: dict[str, tuple[int, Pod]] = {}
        self._pending_list: list[Pod] | None = []  # None: not up to date
        self._waiting: set[str] = set()
        self._errors: dict[str, tuple[int, SnapshotError, JSON]] = {}

    def put(self, key: str, model: PodEntry | SnapshotError | None, obj: JSON) -> None:
        """The object under the key is now this one (its model, or why it did not convert)."""
        old = self._entries.get(key)
        if old is not None and old[3] is model:
            return  # the same version delivered again: where it was
        if old is None:
            arrival = self._arrivals
            self._arrivals += 1
        else:
            arrival = old[0]
            self._drop(key, old)
        node = ""
        if isinstance(model, SnapshotError):
            self._errors[key] = (arrival, model, obj)
            where = _ERROR
        elif model is None:
            where = _LEFT_OUT  # terminated
        elif model[0].node_name:
            where, node = _BOUND, model[0].node_name
            self._bound.setdefault(node, {})[key] = (arrival, model[0])
            self._dirty.add(node)
        elif model[1]:
            self._pending[key] = (arrival, model[0])
            self._pending_list, where = None, _PENDING
        else:
            self._waiting.add(key)
            where = _WAITING
        self._entries[key] = (arrival, where, node, model)

    def delete(self, key: str) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._drop(key, old)

    def _drop(self, key: str, old: tuple[int, int, str, object]) -> None:
        _, where, node, _ = old
        if where == _BOUND:
            del self._bound[node][key]
            self._dirty.add(node)
        elif where == _PENDING:
            del self._pending[key]
            self._pending_list = None
        elif where == _WAITING:
            self._waiting.discard(key)
        elif where == _ERROR:
            del self._errors[key]

    def view(self) -> IndexView:
        for name in self._dirty:
            bucket = self._bound.get(name)
            if bucket:
                self._lists[name] = [p for _, p in sorted(bucket.values(), key=_FIRST)]
            else:
                self._bound.pop(name, None)
                self._lists.pop(name, None)
        self._dirty.clear()
        if self._pending_list is None:
            self._pending_list = [p for _, p in sorted(self._pending.values(), key=_FIRST)]
        errors = [(err, obj) for _, err, obj in sorted(self._errors.values(), key=_FIRST)]
        return IndexView(dict(self._lists), list(self._pending_list), len(self._waiting), errors)



def index_of(models: Iterable[tuple[str, Any, JSON]]) -> PodIndex:
    """A PodIndex of (key, model, object) in the informer's order (after a relist)."""
    out = PodIndex()
    for key, model, obj in models:
        out.put(key, model, obj)
    return out
