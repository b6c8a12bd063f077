"""Small builders for planner tests: pods, nodes and snapshots on the example AWS pools."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scaler.configfile import load_config
from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod, SelectorRequirement, Toleration
from scaler.core.model.resources import parse_resources
from scaler.core.planning import planner
from scaler.core.planning.context import planning_context
from scaler.core.planning.decisions import Plan
from scaler.core.planning.memo import Memo
from scaler.core.planning.snapshot import LaunchFailure, PoolObservation, Snapshot
from scaler.core.planning.state import State
from scaler.core.scheduling.predicates import effective_request

ROOT = Path(__file__).resolve().parents[3]
GPU_TOL = Toleration(keys.TAINT_GPU, "Exists", "", "NoSchedule")
MIN_GPUS_TOL = Toleration(keys.TAINT_MIN_GPUS, "Exists", "", "NoSchedule")


# The planner tests' own pools (the shape of examples/pools-aws.yaml, frozen here so that tuning the
# example does not move these tests): per-zone GPU spot pools with an on-demand fallback, 8-GPU
# pools behind the min-gpus taint, a CPU spot pool falling back to on-demand, a system pool.
POOLS: list[dict[str, Any]] = [
    {"name": "system", "role": "system", "instance_types": ["m6i.large"], "zones": ["us-east-1a", "us-east-1b"],
     "min": 2, "max": 4},
    {"name": "cpu-spot", "role": "general", "capacity_type": "spot", "instance_types": ["m6i.2xlarge"],
     "zones": ["us-east-1a", "us-east-1b"], "max": 50, "fallback": "cpu-od"},
    {"name": "cpu-od", "role": "general", "instance_types": ["m6i.2xlarge"], "zones": ["us-east-1a", "us-east-1b"],
     "max": 50},
    {"name": "gpu1-spot-a", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"],
     "max": 40, "fallback": "gpu1-od"},
    {"name": "gpu1-spot-b", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1b"],
     "max": 40, "fallback": "gpu1-od"},
    {"name": "gpu1-od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a", "us-east-1b"], "max": 40},
    {"name": "gpu8-spot-a", "capacity_type": "spot", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"],
     "min_pod_gpus": 2, "max": 10, "fallback": "gpu8-od"},
    {"name": "gpu8-spot-b", "capacity_type": "spot", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1b"],
     "min_pod_gpus": 2, "max": 10, "fallback": "gpu8-od"},
    {"name": "gpu8-od", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a", "us-east-1b"], "min_pod_gpus": 2,
     "max": 10},
]


def example_config(**overrides: Any) -> ScalerConfig:
    return config(POOLS, **overrides)


def shipped_example() -> ScalerConfig:
    return load_config(ROOT / "examples" / "pools-aws.yaml")


FIXED_UNNEEDED = 600.0  # the planner tests' unneeded time: fixed, as a user sets it (test_idle_time: the adaptive one)


def config(pools: list[dict[str, Any]], *, adaptive: bool = False, **extra: Any) -> ScalerConfig:
    if not adaptive:
        extra["timings"] = {"unneeded_time": FIXED_UNNEEDED, **extra.get("timings", {})}
    return parse_config({"cluster": "c1", "cloud": "aws", "region": "us-east-1", "pools": pools, **extra}, "test")


def pod(name: str, cpu: str = "1", memory: str = "1Gi", gpu: int = 0, *, ns: str = "default",
        tolerations: tuple[Toleration, ...] | None = None, selector: dict[str, str] | None = None,
        affinity: tuple[tuple[SelectorRequirement, ...], ...] = (), owner: str | None = "ReplicaSet",
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        node: str | None = None, extra: dict[str, str | int] | None = None) -> Pod:
    raw: dict[str, str | int] = {"cpu": cpu, "memory": memory, **(extra or {})}
    if gpu:
        raw[keys.RES_GPU] = gpu
    if tolerations is None:
        tolerations = (GPU_TOL, MIN_GPUS_TOL) if gpu else ()
    return Pod(
        name=name, namespace=ns, requests=effective_request([parse_resources(raw)]),
        labels=labels or {}, annotations=annotations or {}, node_selector=selector or {},
        required_affinity=affinity, tolerations=tolerations, owner_kind=owner, node_name=node,
        phase="Running" if node else "Pending",
    )


def daemonset_pod(node: str) -> Pod:
    return Pod(name=f"ds-{node}", namespace="kube-system",
               requests=effective_request([parse_resources({"cpu": "200m", "memory": "256Mi"})]),
               owner_kind="DaemonSet", node_name=node, phase="Running")


def node_of(cfg: ScalerConfig, pool: str, name: str, pods: list[Pod] | None = None, *, zone: str | None = None,
            gpus: int | None = None, ready: bool = True, created_at: float = 1.0) -> Node:
    """A registered node of a pool, as the template says it looks (its own name and pods)."""
    p = cfg.pool(pool)
    tmpl = p.template_node(zone, cfg.region)
    labels = {**tmpl.labels, keys.LABEL_HOSTNAME: name}
    alloc = dict(tmpl.allocatable)
    if gpus is not None:
        alloc[keys.RES_GPU] = gpus
    node = Node(name=name, labels=labels, taints=tmpl.taints, allocatable=alloc, provider_id=f"aws:///{name}",
                pool=pool, ready=ready, created_at=created_at)
    node.pods = [daemonset_pod(name)] + [
        Pod(**{**{s: getattr(x, s) for s in Pod.__slots__}, "node_name": name, "phase": "Running"})  # type: ignore[arg-type]
        for x in (pods or [])
    ]
    return node


def snapshot(cfg: ScalerConfig, pending: list[Pod], nodes: list[Node] | None = None, *, now: float = 1000.0,
             desired: dict[str, int] | None = None, instances: dict[str, int] | None = None,
             failures: dict[str, list[LaunchFailure]] | None = None, fresh: bool = True) -> Snapshot:
    nodes = nodes or []
    registered: dict[str, int] = {}
    for n in nodes:
        if n.pool:
            registered[n.pool] = registered.get(n.pool, 0) + 1
    desired = {**registered, **(desired or {})}
    pools = {
        p.name: PoolObservation(p, desired.get(p.name, 0), (instances or {}).get(p.name, desired.get(p.name, 0)),
                                list((failures or {}).get(p.name, [])))
        for p in cfg.pools
    }
    return Snapshot(now=now, pending=pending, nodes=nodes, pools=pools, fresh=fresh)


def plan(snapshot: Snapshot, state: State, config: ScalerConfig, memo: Memo | None = None,
         placeholders: Sequence[Pod] = ()) -> tuple[Plan, State]:
    """The planner's pass on a config, its settings read as `decide` reads them (`planning_context`)."""
    return planner.plan(snapshot, state, planning_context(config, memo), memo, placeholders)
