"""`python -m scaler plan | explain`: the plan for a real cluster snapshot, and why for every pending pod.

Input: what `kubectl get pods,nodes -o json` prints (a List of Pod and Node objects) and a pools
file; the List may also hold the PersistentVolumeClaims, PersistentVolumes, StorageClasses,
CSINodes and Namespaces kube-scheduler's volume and namespaceSelector filters read (`kubectl get
pods,nodes,pvc,pv,storageclass,csinode,namespaces -A -o json`). Nodes belong to the pool their
gpuburst.io/pool label names; a pool's desired size is taken as its node count. Pending pods are
those the scheduler marked PodScheduled=False/Unschedulable, as cluster-autoscaler reads them. The
snapshot's time is its latest timestamp, so the same file always gives the same plan. Nothing is
changed anywhere: this only prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from scaler.configfile import load_config, read_text
from scaler.core import keys
from scaler.core.config import ConfigError, ScalerConfig
from scaler.core.filters import Storage
from scaler.core.model import Node, Pod
from scaler.core.planner import plan
from scaler.core.snapshot import Plan, PoolObservation, Snapshot, State
from scaler.kube.convert import (
    SnapshotError,
    csinode_from_json,
    is_unschedulable,
    namespace_labels_from_json,
    node_from_json,
    pod_from_json,
    pv_from_json,
    pvc_from_json,
    storage_class_from_json,
)

TERMINATED = ("Succeeded", "Failed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snapshot", required=True, help="kubectl get pods,nodes -o json > FILE")
    parser.add_argument("--pools", required=True, help="pools file (YAML), e.g. examples/pools-aws.yaml")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON instead of text")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="also list why every other pool was not chosen for pods that do get capacity")


def _timestamp(text: Any, where: str) -> float:
    if text is None:
        return 0.0
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise SnapshotError(f"{where}: not an RFC 3339 time: {text!r}") from None


def load_snapshot(path: str | Path, config: ScalerConfig) -> tuple[Snapshot, list[str]]:
    """Read a kubectl JSON List into a Snapshot; returns it and notes (ignored objects, unknown pools)."""
    snapshot, notes, _, _ = load_cluster(path, config)
    return snapshot, notes


def load_cluster(path: str | Path, config: ScalerConfig
                 ) -> tuple[Snapshot, list[str], Storage, dict[str, dict[str, str]] | None]:
    """load_snapshot, plus the storage objects and the namespaces' labels (None: the List had no
    Namespace, namespaceSelector then sees the name label only)."""
    p = Path(path)
    try:
        data = json.loads(read_text(p))
    except ConfigError as err:
        raise SnapshotError(str(err)) from None
    except json.JSONDecodeError as err:
        raise SnapshotError(f"{p}:{err.lineno}:{err.colno}: not valid JSON: {err.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise SnapshotError(f"{p}: expected a List with 'items' (kubectl get pods,nodes -o json)")
    notes: list[str] = []
    storage = Storage()
    namespaces: dict[str, dict[str, str]] | None = None
    nodes: dict[str, Node] = {}
    pods: list[tuple[Pod, dict[str, Any]]] = []
    latest = 0.0
    pools = {pool.name for pool in config.pools}
    for i, obj in enumerate(data["items"]):
        if not isinstance(obj, dict):
            raise SnapshotError(f"{p}: items[{i}] is not an object")
        kind = obj.get("kind")
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise SnapshotError(f"{p}: items[{i}] ({kind}): metadata.name is missing")
        if not isinstance(meta.get("namespace", ""), str):
            raise SnapshotError(f"{p}: items[{i}] ({kind}): metadata.namespace is not a string")
        where = f"{p}: {kind} {meta.get('namespace', '') + '/' if kind == 'Pod' else ''}{meta['name']}"
        created = _timestamp(meta.get("creationTimestamp"), f"{where}: metadata.creationTimestamp")
        latest = max(latest, created)
        try:
            if kind == "Node":
                node = node_from_json(obj, keys.LABEL_POOL)
                if node.pool is not None and node.pool not in pools:
                    notes.append(f"node {node.name}: pool {node.pool!r} is not in the pools file; not managed")
                    node.pool = None
                nodes[node.name] = node
            elif kind == "Pod":
                pod = pod_from_json(obj)
                if pod.phase not in TERMINATED:
                    pods.append((pod, obj))
            elif kind == "PersistentVolumeClaim":
                claim = pvc_from_json(obj)
                storage.claims[claim.key] = claim
            elif kind == "PersistentVolume":
                pv = pv_from_json(obj)
                storage.volumes[pv.name] = pv
            elif kind == "StorageClass":
                sc = storage_class_from_json(obj)
                storage.classes[sc.name] = sc
            elif kind == "CSINode":
                csinode = csinode_from_json(obj)
                storage.csinodes[csinode.name] = csinode
            elif kind == "Namespace":
                name, labels = namespace_labels_from_json(obj)
                namespaces = {**(namespaces or {}), name: labels}
            else:
                notes.append(f"items[{i}]: kind {kind!r} ignored")
        except SnapshotError as err:
            raise SnapshotError(f"{p}: {err}") from None
    pending: list[Pod] = []
    waiting = 0
    for pod, obj in pods:
        if pod.node_name:
            host = nodes.get(pod.node_name)
            if host is None:
                notes.append(f"pod {pod.key}: bound to node {pod.node_name}, which is not in the snapshot")
            else:
                host.pods.append(pod)
        elif is_unschedulable(obj):
            pending.append(pod)
        else:
            waiting += 1
    if waiting:
        notes.append(f"{waiting} pod(s) without a node are not marked Unschedulable yet: the scheduler has "
                     "not tried them, so they ask for nothing")
    observed = {
        pool.name: PoolObservation(pool, sum(1 for n in nodes.values() if n.pool == pool.name),
                                   sum(1 for n in nodes.values() if n.pool == pool.name))
        for pool in config.pools
    }
    snapshot = Snapshot(now=latest, pending=pending, nodes=list(nodes.values()), pools=observed)
    return snapshot, notes, storage, namespaces


def render(result: Plan, snapshot: Snapshot, notes: list[str], verbose: bool = False) -> str:
    """Text form: the plan, then every pending pod with its outcome; the per-pool reasons are listed for
    pods that get no capacity (all of them with `verbose`)."""
    lines = [f"{len(snapshot.nodes)} node(s), {len(snapshot.pending)} pending pod(s)", "plan:"]
    if result.empty:
        lines.append("  nothing to do")
    for up in result.scale_ups:
        lines.append(f"  scale up {up.pool} in {up.zone} by {up.count} (desired -> {up.new_desired}) "
                     f"for {', '.join(up.pods)}")
    for reset in result.resets:
        lines.append(f"  set {reset.pool} desired to {reset.desired}: {reset.reason}")
    for down in result.scale_downs:
        evict = f"; evict {', '.join(down.evict)}" if down.evict else ""
        lines.append(f"  remove node {down.node} of {down.pool}: {down.reason}{evict}")
    if result.verdicts:
        lines.append("pending pods:")
    scheduler = {p.key: p.scheduler_name for p in snapshot.pending}
    for key in sorted(result.verdicts):
        v = result.verdicts[key]
        where = f" on node {v.node}" if v.node else f" in pool {v.pool}" if v.pool else ""
        if v.outcome == "fits-existing" and key in scheduler:
            where += f" (where {scheduler[key]} will bind it)"
        lines.append(f"  {key}: {v.outcome}{where}")
        if v.outcome not in ("unschedulable", "waiting") and not verbose:
            continue
        for pool, reason in sorted(v.reasons.items()):
            lines.append(f"      {pool}: {reason}")
    for note in [*result.notes, *notes]:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def reasons_by_text(reasons: dict[str, str]) -> list[tuple[list[str], str]]:
    """A pod's per-pool reasons with the pools that share a reason together, most pools first."""
    pools: dict[str, list[str]] = {}
    for pool, text in sorted(reasons.items()):
        pools.setdefault(text, []).append(pool)
    return sorted(((names, text) for text, names in pools.items()), key=lambda x: (-len(x[0]), x[1]))


def as_json(result: Plan) -> dict[str, Any]:
    return {
        "scale_ups": [{"pool": u.pool, "zone": u.zone, "count": u.count, "new_desired": u.new_desired,
                       "pods": list(u.pods)} for u in result.scale_ups],
        "resets": [{"pool": r.pool, "desired": r.desired, "reason": r.reason} for r in result.resets],
        "scale_downs": [{"pool": d.pool, "node": d.node, "evict": list(d.evict), "reason": d.reason}
                        for d in result.scale_downs],
        "pods": {k: {"outcome": v.outcome, "pool": v.pool, "node": v.node, "reasons": v.reasons}
                 for k, v in sorted(result.verdicts.items())},
        "notes": result.notes,
    }


def main(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.pools)
        snapshot, notes = load_snapshot(args.snapshot, config)
    except (ConfigError, SnapshotError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    result, _ = plan(snapshot, State(), config)
    if args.json:
        print(json.dumps({**as_json(result), "snapshot_notes": notes}, indent=2))
    else:
        print(render(result, snapshot, notes, args.verbose))
    return 0
