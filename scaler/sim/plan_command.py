"""`python -m scaler plan | explain`: the plan for a real cluster snapshot, and why for every pending pod.

Input: what `python -m scaler snapshot` writes (every kind below, from the current kubeconfig), or `kubectl get
pods,nodes -A -o json` (a List of Pod and Node objects), and a pools file; the List may also hold the
PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and Namespaces kube-scheduler's volume and
namespaceSelector filters read (`kubectl get pods,nodes,pvc,pv,storageclass,csinode,namespaces -A -o json`), and
the DRA objects kube-scheduler's DynamicResources filter reads (`kubectl get
pods,nodes,resourceclaims,resourceclaimtemplates,deviceclasses,resourceslices -A -o json`), and the
CapacityBuffers with the PodTemplates (or Deployments, ReplicaSets, StatefulSets) they name (`kubectl get
pods,nodes,podtemplates,capacitybuffers -A -o json`): each buffer's placeholders are planned and listed with where
they sit; and the gangs' PodGroups (the Workload API's, scheduler-plugins' and Volcano's,
scaler.core.model.podgroup): each gang gets room for its minimum or nothing. Nodes belong to the pool their
gpuburst.io/pool label names (nodes without it are named in a note); a pool's desired size is taken as its node
count. A node of the other cloud (its providerID aws:// or azure://) refuses the pools file. Pending pods are those
the scheduler marked PodScheduled=False/Unschedulable, as cluster-autoscaler reads them. The snapshot's time is its
latest timestamp (creations, node conditions' transitions), so the same file always gives the same plan. Nodes with
a GPU health signal are listed with what the scaler does about them (repair, wait for the repair budget, wait out
the signal's grace). Nothing is changed anywhere: this only prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

from scaler.configfile import load_config, read_text
from scaler.core.config.catalogue import Cloud
from scaler.core.config.settings import ConfigError, ScalerConfig
from scaler.core.dra import convert as dra_convert
from scaler.core.dra.extended import clashes
from scaler.core.dra.taints import with_rules
from scaler.core.model import keys
from scaler.core.model.buffers import SCALABLE_KINDS, CapacityBuffer
from scaler.core.model.dra import DraObjects
from scaler.core.planning import idle_time
from scaler.core.planning.capacity import zone_hints
from scaler.core.planning.context import planning_context
from scaler.core.planning.decide import decide
from scaler.core.planning.decisions import Plan
from scaler.core.planning.repair import device_taints, published_gpus, signals, withdrawn
from scaler.core.planning.snapshot import PoolObservation, Snapshot
from scaler.core.planning.state import State
from scaler.kube.convert import SnapshotError
from scaler.kube.convert_buffers import buffer_from_json
from scaler.kube.convert_podgroup import pod_group_from_json
from scaler.kube.convert_storage import storage_view
from scaler.kube.view import cluster_view

# The kinds read besides Node and Pod: what the filters of scaler.core.scheduling.filters need.
STORAGE_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode", "Namespace")
DRA_KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceTaintRule")
# CapacityBuffers, with the PodTemplates and workloads they name (kubectl get ...,podtemplates,capacitybuffers).
BUFFER_KINDS = ("CapacityBuffer", "PodTemplate", *SCALABLE_KINDS)
# The gangs' PodGroups (scheduling.k8s.io, scheduling.x-k8s.io, scheduling.volcano.sh: one kind, by apiVersion).
GANG_KINDS = ("PodGroup",)
# Every kind the reader takes (`python -m scaler snapshot` writes each of them).
KINDS = ("Node", "Pod", *STORAGE_KINDS, *DRA_KINDS, *BUFFER_KINDS, *GANG_KINDS)
CLOUDS = get_args(Cloud)  # a node's providerID scheme (aws://..., azure://...) names its cloud


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snapshot", required=True, help="python -m scaler snapshot --output FILE")
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
    by_kind: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    latest = 0.0
    for i, obj in enumerate(data["items"]):
        if not isinstance(obj, dict):
            raise SnapshotError(f"{p}: items[{i}] is not an object")
        kind = obj.get("kind")
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise SnapshotError(f"{p}: items[{i}] ({kind}): metadata.name is missing")
        if not isinstance(meta.get("namespace", ""), str):
            raise SnapshotError(f"{p}: items[{i}] ({kind}): metadata.namespace is not a string")
        namespaced = kind in ("Pod", "ResourceClaim", "ResourceClaimTemplate", *BUFFER_KINDS, *GANG_KINDS)
        where = f"{p}: {kind} {meta.get('namespace', '') + '/' if namespaced else ''}{meta['name']}"
        latest = max(latest, _timestamp(meta.get("creationTimestamp"), f"{where}: metadata.creationTimestamp"),
                     *(_timestamp(c.get("lastTransitionTime"), f"{where}: status.conditions")
                       for c in (obj.get("status") or {}).get("conditions") or () if kind == "Node" and
                       isinstance(c, dict)))
        if kind in by_kind:
            by_kind[kind].append(obj)
        else:
            notes.append(f"items[{i}]: kind {kind!r} ignored")
    try:
        view = cluster_view(by_kind["Node"], by_kind["Pod"], keys.LABEL_POOL)
        storage, namespaces = storage_view(
            by_kind["PersistentVolumeClaim"], by_kind["PersistentVolume"], by_kind["StorageClass"],
            by_kind["CSINode"], by_kind["Namespace"] or None)
        dra = dra_view(by_kind)
        buffers = buffers_view(by_kind)
        pod_groups = {g.key: g for g in map(pod_group_from_json, by_kind["PodGroup"])}
    except SnapshotError as err:
        raise SnapshotError(f"{p}: {err}") from None
    pools = {pool.name for pool in config.pools}
    for node in view.nodes.values():
        cloud = node.provider_id.partition("://")[0]
        if cloud in CLOUDS and cloud != config.cloud:
            raise SnapshotError(f"{p}: node {node.name}: providerID {node.provider_id!r} is an {cloud} node, but "
                                f"the pools file's cloud is {config.cloud}: give the pools file of this cluster")
    unpooled = sorted(n.name for n in view.nodes.values() if n.pool is None)
    if unpooled:
        shown = ", ".join(unpooled[:10]) + (f" and {len(unpooled) - 10} more" if len(unpooled) > 10 else "")
        notes.append(f"{len(unpooled)} node(s) without a {keys.LABEL_POOL} label belong to no pool: {shown}; "
                     "their pods are planned where they run, but no pool's size counts them (label each with "
                     "its pool's name for a pool's desired size to be right)")
    for node in view.nodes.values():
        if node.pool is not None and node.pool not in pools:
            notes.append(f"node {node.name}: pool {node.pool!r} is not in the pools file; not managed")
            node.pool = None
    notes.extend(f"pod {pod.key}: bound to node {pod.node_name}, which is not in the snapshot" for pod in view.lost)
    if view.waiting:
        notes.append(f"{view.waiting} pod(s) without a node are not marked Unschedulable yet: the scheduler has "
                     "not tried them, so they ask for nothing")
    nodes = view.nodes
    observed = {
        pool.name: PoolObservation(pool, sum(1 for n in nodes.values() if n.pool == pool.name),
                                   sum(1 for n in nodes.values() if n.pool == pool.name))
        for pool in config.pools
    }
    return Snapshot(now=latest, pending=view.pending, nodes=list(nodes.values()), pools=observed, storage=storage,
                    namespaces=namespaces, dra=dra, buffers=buffers, pod_groups=pod_groups), notes


def buffers_view(by_kind: dict[str, list[dict[str, Any]]]) -> list[CapacityBuffer]:
    """The List's CapacityBuffers with the PodTemplates and workloads of the List they name."""
    def key(o: dict[str, Any]) -> tuple[str, str]:
        return str(o["metadata"].get("namespace") or "default"), str(o["metadata"]["name"])

    templates = {"/".join(key(o)): o for o in by_kind["PodTemplate"]}
    workloads = {(kind, *key(o)): o for kind in SCALABLE_KINDS for o in by_kind[kind]}
    return [buffer_from_json(o, templates, lambda k, ns, n: workloads.get((k, ns, n)))
            for o in by_kind["CapacityBuffer"]]


def dra_view(by_kind: dict[str, list[dict[str, Any]]]) -> DraObjects:
    """The DRA objects of the List; a malformed one is a SnapshotError naming it and the field."""
    try:
        claims = [dra_convert.resource_claim(o) for o in by_kind["ResourceClaim"]]
        templates = [dra_convert.resource_claim_template(o) for o in by_kind["ResourceClaimTemplate"]]
        classes = [dra_convert.device_class(o) for o in by_kind["DeviceClass"]]
        for cls, first in clashes(classes):
            raise SnapshotError(f"DeviceClass {cls.name}: spec.extendedResourceName: {cls.extended_resource_name} is "
                                f"also served by DeviceClass {first} (one class per extended resource)")
        return DraObjects(
            classes={c.name: c for c in classes},
            claims={c.key: c for c in claims},
            templates={f"{t.namespace}/{t.name}": t for t in templates},
            slices=with_rules([dra_convert.resource_slice(o) for o in by_kind["ResourceSlice"]],
                              [dra_convert.device_taint_rule(o) for o in by_kind["DeviceTaintRule"]]))
    except dra_convert.DraInputError as err:
        raise SnapshotError(str(err)) from None


def render(result: Plan, snapshot: Snapshot, notes: list[str], verbose: bool = False) -> str:
    """Text form: the plan, then every pending pod with its outcome; the per-pool reasons are listed for
    pods that get no capacity (all of them with `verbose`)."""
    lines = [f"{len(snapshot.nodes)} node(s), {len(snapshot.pending)} pending pod(s)", "plan:"]
    if result.empty:
        lines.append("  nothing to do")
    for up in result.scale_ups:
        where = up.zone or "the zone the cloud picks"
        lines.append(f"  scale up {up.pool} in {where} by {up.count} (desired -> {up.new_desired}) "
                     f"for {', '.join(up.pods)}")
    for reset in result.resets:
        lines.append(f"  set {reset.pool} desired to {reset.desired}: {reset.reason}")
    for down in result.scale_downs:
        evict = f"; evict {', '.join(down.evict)}" if down.evict else ""
        lines.append(f"  remove node {down.node} of {down.pool}: {down.reason}{evict}")
    lines += health_lines(result, snapshot)
    lines += buffer_lines(result)
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


def health_lines(result: Plan, snapshot: Snapshot) -> list[str]:
    """Every node with a GPU health signal of its pool, and why it is (or is not yet) repaired."""
    repairs = {r.node: r for r in result.repairs}
    lines = []
    tainted, published = device_taints(snapshot.dra), published_gpus(snapshot.dra)
    for node in snapshot.nodes:
        obs = snapshot.pools.get(node.pool or "")
        gone = (withdrawn(node, obs.pool.gpus, published) if obs.pool.dra else 0, obs.pool.gpus) if obs else (0, 0)
        found = (signals(node, obs.pool.repair, tainted.get(node.name, ()), gone)
                 if obs is not None and obs.pool.repair.enabled else [])
        if not found:
            continue
        r = repairs.get(node.name)
        if r is not None and r.started:
            what = "repair started: cordon, replacement planned ahead, drain, its instance given back"
        elif r is not None:
            why = result.repair_paused.get(r.pool) or ("its pods may not move" if "blocked:" in r.signal else
                                                       "max_per_pass repairs start each pass")
            what = f"not repaired now: {why}"
        else:
            what = "within its grace: repaired if it lasts " + ", ".join(f"{s.grace:g} s" for s in found)
        lines.append(f"  node {node.name} ({node.pool}): {'; '.join(s.text for s in found)}: {what}")
    return ["gpu health:", *lines] if lines else []


def buffer_lines(result: Plan) -> list[str]:
    """Each CapacityBuffer: its placeholders and where each sits, or why it is not served."""
    lines = []
    for key, out in sorted(result.buffers.items()):
        if out.error:
            lines.append(f"  {key}: not served: {out.error}")
            continue
        lines.append(f"  {key}: {out.status.replicas} placeholder pod(s)")
        lines += [f"      {name}: {where}" for name, where in out.where().items()]
    return ["capacity buffers:", *lines] if lines else []


def reasons_by_text(reasons: dict[str, str]) -> list[tuple[list[str], str]]:
    """A pod's per-pool reasons with the pools that share a reason together, most pools first."""
    pools: dict[str, list[str]] = {}
    for pool, text in sorted(reasons.items()):
        pools.setdefault(text, []).append(pool)
    return sorted(((names, text) for text, names in pools.items()), key=lambda x: (-len(x[0]), x[1]))


def main(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.pools)
        snapshot, notes = load_snapshot(args.snapshot, config)
    except (ConfigError, SnapshotError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    result, state = decide(snapshot, State(), config)
    with_nodes = {n.pool for n in snapshot.nodes}
    ctx = planning_context(config)
    notes = [*notes, *zone_hints(config.pools),
             *(f"unneeded time: {idle_time.explain(state, ctx, p)}" for p in config.pools if p.name in with_nodes),
             *(f"warm pool of {name}: {w.ready} of {w.size} {w.state} instances ready to start, each a node in "
               f"{w.ready_in:g} s rather than a boot; it stands at ${w.usd_per_hour:.3f}/h"
               for name, w in sorted(result.warm.items()))]
    if args.json:
        print(json.dumps({**result.to_dict(), "snapshot_notes": notes}, indent=2))
    else:
        print(render(result, snapshot, notes, args.verbose))
    return 0
