"""How long one planner pass takes on a big cluster, and how much memory it needs.

Builds a synthetic snapshot: N pending pods (mixed GPU / CPU, node selectors, tolerations, gangs),
2,000 registered nodes with running pods (all of them unneeded for long, so the scale-down planner
works too) and 100 pools, then times one `scaler.core.planning.planner.plan` pass on it (wall clock).
Each size runs in a fresh subprocess so that `rss_mb` (peak resident set of that process, snapshot
included) is not inflated by a previous size. Prints one line per size, the 10,000-pod one last:

    plan_p50_s=<x> plan_max_s=<y> rss_mb=<z> pods=<n> nodes=<m> pools=<k>

Then the same 10,000-pod pass with the *constrained* mix (`mix=constrained` on its line): a fifth of
the workloads carry kube-scheduler constraints the planner must honour (zone topology spread,
hostname anti-affinity or hostname spread, hard), a tenth use a zonal volume per pod (a PV bound in
one zone, or an unbound WaitForFirstConsumer claim whose class allows one zone), and some of their
pods already run, so the counts start from the cluster.

`--mix dra`: the 10,000-pod pass with every GPU pool `gpu_allocation: dra` and every GPU pod asking
through a ResourceClaim (running ones hold allocated claims; bench/plan_scale_dra.py), `mix=dra`.

`--digest`: instead of timing, a sha256 of each pass's Plan and State in a canonical form (dataclasses as
their fields, dicts and sets sorted, floats exact), for each mix at 2,000 pods and three passes of the xl
bench cut to a tenth: equal digests before and after a refactor mean the same decisions on these
snapshots (under PYTHONHASHSEED=0, which --digest sets). Prints `digest <what> <sha256>` lines; a
`<mix>-2000-decisions` line digests the plan without the verdicts' reasons (the decisions alone).

`--scale xl`: the whole pass at 100,000 pods (15,000 pending), 15,000 nodes, 100 pools: the watch-fed
cache fed by synthetic watch events, then `Reconciler.run` (bench/plan_scale_xl.py); prints
`pass_p50_s=<x> plan_p50_s=<y> cpu_p50_s=<z> rss_mb=<m> pods=100000 nodes=15000 pools=100`
(target: cpu_p50_s <= 1.0, rss <= 1 GB).

Usage: python bench/plan_scale.py [--repeat R] [--seed S] [--workloads W] [--mix plain|constrained|both|dra]
                                  [--scale default|xl]
(target on a 2-core machine: p50 <= 0.5 s, rss <= 300 MB at 10,000 pods, every mix)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from doc_blocks import quoting

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model import keys
from scaler.core.model.objects import (
    ClaimRef,
    LabelSelector,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinityTerm,
    SelectorRequirement,
    SpreadConstraint,
    StorageClass,
    Toleration,
)
from scaler.core.model.resources import parse_resources
from scaler.core.model.storage import Storage
from scaler.core.planning.context import planning_context
from scaler.core.planning.planner import plan
from scaler.core.planning.snapshot import PoolObservation, Snapshot
from scaler.core.planning.state import State
from scaler.core.scheduling.predicates import effective_request
from scaler.reconcile import no_cycle_collection

SIZES = (1000, 5000, 20000, 10000)  # the acceptance figure (10k) is printed last
NODES = 2000
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
TEAMS = ("ml", "research", "batch", "infer")
GPU_TYPES = ("g6.xlarge", "g6.4xlarge", "g6.12xlarge", "g6.48xlarge", "g5.xlarge", "g5.12xlarge", "g5.48xlarge",
             "p4d.24xlarge", "p5.48xlarge", "g6e.xlarge")
CPU_TYPES = ("m6i.xlarge", "m6i.2xlarge", "m6i.4xlarge", "c6i.2xlarge", "c6i.4xlarge")
GPU_TOL = Toleration(keys.TAINT_GPU, "Exists", "", "NoSchedule")
MIN_TOL = Toleration(keys.TAINT_MIN_GPUS, "Exists", "", "NoSchedule")
TEAM_KEY = "example.com/team"


def pools() -> list[dict[str, Any]]:
    """100 pools: 10 GPU types x 2 teams x (3 per-zone spot pools + an on-demand fallback) = 80, plus
    5 CPU types x 4 teams x (a spot pool + its on-demand fallback) = 40, cut at 100."""
    out: list[dict[str, Any]] = []
    for gi, itype in enumerate(GPU_TYPES):
        for team in TEAMS[:2]:
            od = f"g{gi}-{team}-od"
            for zone in ZONES:
                if len([p for p in out if p["name"].startswith(f"g{gi}-{team}")]) >= 3:
                    break
                out.append({"name": f"g{gi}-{team}-spot-{zone[-1]}", "capacity_type": "spot", "instance_types": [itype],
                            "zones": [zone], "max": 500, "fallback": od, "labels": {TEAM_KEY: team},
                            "min_pod_gpus": 2 if itype.endswith(("12xlarge", "48xlarge", "24xlarge")) else 0})
            out.append({"name": od, "instance_types": [itype], "zones": list(ZONES), "max": 500,
                        "labels": {TEAM_KEY: team},
                        "min_pod_gpus": 2 if itype.endswith(("12xlarge", "48xlarge", "24xlarge")) else 0})
    for ci, itype in enumerate(CPU_TYPES):
        for team in TEAMS:
            od = f"c{ci}-{team}-od"
            out.append({"name": f"c{ci}-{team}-spot", "role": "general", "capacity_type": "spot",
                        "instance_types": [itype], "zones": list(ZONES), "max": 500, "fallback": od,
                        "labels": {TEAM_KEY: team}})
            out.append({"name": od, "role": "general", "instance_types": [itype], "zones": list(ZONES), "max": 500,
                        "labels": {TEAM_KEY: team}})
    return out[:100]


def make_config() -> ScalerConfig:
    # The per-pass node cap is lifted so that the planner does the whole packing work being measured.
    return parse_config({"cluster": "bench", "cloud": "aws", "region": "us-east-1", "pools": pools(),
                         "limits": {"max_nodes_per_pass": 100000}}, "bench")


def _pod(rng: random.Random, name: str, node: str | None = None) -> Pod:
    team = rng.choice(TEAMS)
    gpu = rng.random() < 0.4
    selector: dict[str, str] = {}
    affinity: tuple[tuple[SelectorRequirement, ...], ...] = ()
    if rng.random() < 0.5:
        selector[TEAM_KEY] = team
    if rng.random() < 0.2:
        affinity = ((SelectorRequirement(keys.LABEL_ZONE, "In", tuple(rng.sample(ZONES, 2))),),)
    if gpu:
        gpus = rng.choice((1, 1, 1, 2, 4, 8))
        raw: dict[str, str | int] = {"cpu": rng.choice(("1", "2", "4", "8")),
                                     "memory": rng.choice(("4Gi", "8Gi", "16Gi")), keys.RES_GPU: gpus}
        tols = (GPU_TOL, MIN_TOL) if gpus >= 2 else (GPU_TOL,)
    else:
        raw = {"cpu": rng.choice(("250m", "500m", "1", "2", "4")),
               "memory": rng.choice(("512Mi", "1Gi", "2Gi", "4Gi", "8Gi"))}
        tols = ()
    return Pod(name=name, namespace=team, requests=effective_request([parse_resources(raw)]), node_selector=selector,
               required_affinity=affinity, tolerations=tols, owner_kind="ReplicaSet", node_name=node,
               phase="Running" if node else "Pending", labels={"app": name.rsplit("-", 1)[0]})


def _constrain(rng: random.Random, tpl: Pod) -> Pod:
    """A fifth of the workloads get a hard spread or anti-affinity, a tenth a zonal volume per pod."""
    app = LabelSelector((SelectorRequirement("app", "In", (tpl.labels["app"],)),))
    r = rng.random()
    if r < 0.10:
        return dataclasses.replace(tpl, spread=(SpreadConstraint(1, keys.LABEL_ZONE, app),))
    if r < 0.15:
        return dataclasses.replace(tpl, pod_anti_affinity=(PodAffinityTerm(app, keys.LABEL_HOSTNAME,
                                                                           (tpl.namespace,)),))
    if r < 0.20:
        return dataclasses.replace(tpl, spread=(SpreadConstraint(1, keys.LABEL_HOSTNAME, app),))
    if r < 0.30:
        return dataclasses.replace(tpl, claims=(ClaimRef("zonal"),))  # a claim of its own, named per pod
    return tpl


def _volume(rng: random.Random, pod: Pod, storage: Storage) -> Pod:
    """Give a pod of a zonal-volume workload its own claim: bound in a zone, or WaitForFirstConsumer."""
    claim = f"{pod.name}-data"
    zone = rng.choice(ZONES)
    if rng.random() < 0.5:
        pv = PersistentVolume(f"pv-{claim}", {keys.LABEL_ZONE: zone},
                              ((SelectorRequirement(keys.LABEL_ZONE, "In", (zone,)),),),
                              "gp3", 100 << 30, ("ReadWriteOnce",), f"{pod.namespace}/{claim}", "Bound",
                              keys.CSI_EBS, f"vol-{claim}")
        storage.volumes[pv.name] = pv
        pvc = PersistentVolumeClaim(claim, pod.namespace, pv.name, "gp3", ("ReadWriteOnce",), 100 << 30, "Bound",
                                    True)
    else:
        pvc = PersistentVolumeClaim(claim, pod.namespace, "", f"gp3-{zone}", ("ReadWriteOnce",), 100 << 30)
    storage.claims[pvc.key] = pvc
    return dataclasses.replace(pod, claims=(ClaimRef(claim),))


def make_snapshot(n_pods: int, cfg: ScalerConfig, seed: int, workloads: int = 500, mix: str = "plain") -> Snapshot:
    rng = random.Random(seed)
    constrained = mix == "constrained"
    storage = Storage(classes={
        f"gp3-{z}": StorageClass(f"gp3-{z}", keys.CSI_EBS, "WaitForFirstConsumer",
                                 ((SelectorRequirement(keys.LABEL_ZONE, "In", (z,)),),)) for z in ZONES})
    crng = random.Random(seed + 1)
    running_templates = [_constrain(crng, _pod(crng, f"wl{w}")) for w in range(workloads)] if constrained else []
    nodes: list[Node] = []
    registered: dict[str, int] = {}
    for i in range(NODES):
        pool = cfg.pools[i % len(cfg.pools)]
        zone = pool.zones[i % len(pool.zones)]
        tmpl = pool.template_node(zone, cfg.region)
        name = f"node-{i}"
        node = Node(name, {**tmpl.labels, keys.LABEL_HOSTNAME: name}, tmpl.taints, dict(tmpl.allocatable),
                    provider_id=f"aws:///{zone}/i-{i:08x}", pool=pool.name, created_at=1.0, pods=list(tmpl.pods))
        free = dict(tmpl.allocatable)
        for p in tmpl.pods:
            for r, v in p.requests.items():
                free[r] = free.get(r, 0) - v
        for j in range(rng.randint(3, 12)):  # running pods that fit, taints and selectors ignored
            p = _pod(rng, f"run-{i}-{j}", node=name)
            if running_templates and rng.random() < 0.2:  # some pods of the constrained workloads run
                tpl = rng.choice(running_templates)
                p = dataclasses.replace(tpl, name=f"run-{i}-{j}", node_name=name, phase="Running")
                if p.claims:
                    p = _volume(rng, p, storage)
            if all(free.get(r, 0) >= v for r, v in p.requests.items()):
                node.pods.append(p)
                for r, v in p.requests.items():
                    free[r] -= v
        nodes.append(node)
        registered[pool.name] = registered.get(pool.name, 0) + 1
    # Pending pods come from 500 workloads (Deployments / Jobs with replicas), as in a real cluster,
    # plus gangs of 8-GPU pods; --workloads 0 makes every pod's spec random (the worst case).
    templates = [_pod(rng, f"wl{w}") for w in range(workloads)]
    if constrained:  # the same workloads as the running ones (same random draws), so counts add up
        crng = random.Random(seed + 1)
        templates = [_constrain(crng, _pod(crng, f"wl{w}")) for w in range(workloads)]
    pending: list[Pod] = []
    gang_n = 0
    while len(pending) < n_pods:
        if rng.random() < 0.01:  # a gang: 2-8 pods of 8 GPUs each
            size = min(rng.randint(2, 8), n_pods - len(pending))
            gang_n += 1
            team = rng.choice(TEAMS)
            for k in range(size):
                pending.append(Pod(
                    name=f"gang{gang_n}-{k}", namespace=team,
                    requests=effective_request([parse_resources({"cpu": "16", "memory": "64Gi", keys.RES_GPU: 8})]),
                    labels={keys.LABEL_POD_GROUP: f"gang{gang_n}"}, tolerations=(GPU_TOL, MIN_TOL),
                    owner_kind="Job"))
        elif templates:
            p = dataclasses.replace(rng.choice(templates), name=f"pend-{len(pending)}")
            pending.append(_volume(rng, p, storage) if p.claims else p)
        else:
            pending.append(_pod(rng, f"pend-{len(pending)}"))
    obs = {p.name: PoolObservation(p, registered.get(p.name, 0), registered.get(p.name, 0)) for p in cfg.pools}
    return Snapshot(now=10_000.0, pending=pending, nodes=nodes, pools=obs, storage=storage)


def run_one(n_pods: int, repeat: int, seed: int, workloads: int, mix: str = "plain") -> str:
    cfg = make_config()
    snap = make_snapshot(n_pods, cfg, seed, workloads, mix)
    if mix == "dra":
        from plan_scale_dra import dra_config, to_dra  # noqa: PLC0415 - bench/ is on the path when run

        cfg = dra_config(pools())
        snap = to_dra(snap, cfg)
    # Every node has been under the threshold for long: the pass also runs the scale-down planner's
    # drain simulation (budget 10% of the nodes), not only the scale-up.
    state = State(unneeded_since={n.name: 0.0 for n in snap.nodes})
    ctx = planning_context(cfg)
    times, cpu = [], []
    for _ in range(repeat):
        gc.collect()  # start each pass from a clean heap (the snapshot's construction left garbage behind)
        t0, c0 = time.perf_counter(), time.process_time()
        with no_cycle_collection():  # as every pass runs in production (scaler/reconcile.py, Reconciler.run)
            result, _ = plan(snap, state, ctx)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        assert len(result.verdicts) == len(snap.pending)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux
    # On a shared machine the wall clock includes waiting for a core: say how busy it was (stderr).
    print(f"pods={len(snap.pending)} mix={mix}: cpu_p50_s={statistics.median(cpu):.3f} "
          f"loadavg_1m={os.getloadavg()[0]:.1f} cores={os.cpu_count()}", file=sys.stderr)
    tail = f" mix={mix}" if mix != "plain" else ""
    return (f"plan_p50_s={statistics.median(times):.3f} plan_max_s={max(times):.3f} rss_mb={rss_mb:.0f} "
            f"pods={len(snap.pending)} nodes={len(snap.nodes)} pools={len(snap.pools)}{tail}")


def canonical(obj: Any) -> Any:
    """Plain JSON-able data that does not depend on dict, set or hash order."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # an empty collection field is left out, so
        fields = ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj))  # adding one keeps digests
        return [type(obj).__name__, {k: canonical(v) for k, v in fields if not (isinstance(v, dict | list) and not v)}]
    if isinstance(obj, dict):
        return sorted(([canonical(k), canonical(v)] for k, v in obj.items()), key=repr)
    if isinstance(obj, set | frozenset):
        return sorted((canonical(v) for v in obj), key=repr)
    if isinstance(obj, list | tuple):
        return [canonical(v) for v in obj]
    if isinstance(obj, float):
        return repr(obj)
    if obj is None or isinstance(obj, str | int | bool):
        return obj
    return repr(obj)


def digest(*objs: Any) -> str:
    return hashlib.sha256(json.dumps([canonical(o) for o in objs]).encode()).hexdigest()


DIGEST_PODS = 2000


def decisions(result: Any) -> Any:
    """The plan without its verdicts' reasons (pool -> why not there): where each pod goes, what is bought and
    drained. Equal while the full digest differs: only the explanations changed."""
    return dataclasses.replace(result, verdicts={k: dataclasses.replace(v, reasons={})
                                                 for k, v in result.verdicts.items()})


def run_digests(seed: int, workloads: int) -> None:
    for mix in ("plain", "constrained", "dra"):
        cfg = make_config()
        snap = make_snapshot(DIGEST_PODS, cfg, seed, workloads, "constrained" if mix == "constrained" else "plain")
        if mix == "dra":
            from plan_scale_dra import dra_config, to_dra  # noqa: PLC0415 - bench/ is on the path when run

            cfg = dra_config(pools())
            snap = to_dra(snap, cfg)
        state = State(unneeded_since={n.name: 0.0 for n in snap.nodes})
        result, after = plan(snap, state, planning_context(cfg))
        print(f"digest {mix}-{DIGEST_PODS} {digest(result, after)}", flush=True)
        print(f"digest {mix}-{DIGEST_PODS}-decisions {digest(decisions(result), after)}", flush=True)
    import plan_scale_xl as xl  # noqa: PLC0415 - bench/ is on the path when run

    xl.PODS, xl.PENDING, xl.NODES, xl.EVENTS = xl.PODS // 10, xl.PENDING // 10, xl.NODES // 10, xl.EVENTS // 10
    passes: list[str] = []
    xl.run_xl(3, seed, lambda result, after: passes.append(digest(result, after)))
    for i, sha in enumerate(passes):
        print(f"digest xl/10-pass{i} {sha}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workloads", type=int, default=500, help="distinct pod specs among the pending pods")
    ap.add_argument("--mix", choices=("plain", "constrained", "both", "dra"), default="both",
                    help="plain: every size; constrained: the 10k pass with the constrained mix; both (default); "
                         "dra: the 10k pass with every GPU pod on claims")
    ap.add_argument("--scale", choices=("default", "xl"), default="default",
                    help="xl: the whole pass (watch-fed cache + Reconciler.run) at 100k pods / 15k nodes / 100 pools")
    ap.add_argument("--digest", action="store_true", help="print digests of the plans instead of timings")
    ap.add_argument("--readme", metavar="FILE", help="also write the lines printed into FILE between the markers "
                    "<!-- bench/plan_scale.py[ --scale xl| --mix M]: begin --> and its end marker")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: run one size in this process
    args = ap.parse_args()
    flags = " --scale xl" if args.scale == "xl" else "" if args.mix == "both" else f" --mix {args.mix}"
    with quoting(None if args.digest or args.one else args.readme, f"bench/plan_scale.py{flags}"):
        measure(args)


def measure(args: argparse.Namespace) -> None:
    if args.digest:
        if os.environ.get("PYTHONHASHSEED") != "0":  # set iteration order is part of what is compared
            os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
        run_digests(args.seed, args.workloads)
        return
    if args.scale == "xl":
        from plan_scale_xl import run_xl  # noqa: PLC0415 - bench/ is on the path when run

        print(run_xl(args.repeat, args.seed), flush=True)
        return
    if args.one:
        print(run_one(args.one, args.repeat, args.seed, args.workloads, args.mix))
        return
    runs = [(size, "plain") for size in SIZES] if args.mix in ("plain", "both") else []
    if args.mix in ("constrained", "both"):
        runs.append((10_000, "constrained"))
    if args.mix == "dra":
        runs.append((10_000, "dra"))
    for size, mix in runs:
        out = subprocess.run([sys.executable, __file__, "--one", str(size), "--repeat", str(args.repeat),
                              "--seed", str(args.seed), "--workloads", str(args.workloads), "--mix", mix],
                             check=True, capture_output=True, text=True)
        print(out.stderr.strip(), file=sys.stderr, flush=True)
        print(out.stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
