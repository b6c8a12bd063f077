"""`python bench/plan_scale.py --scale xl`: the whole pass at the largest clusters' scale.

100,000 pods (15,000 of them pending) on 15,000 nodes in 100 pools, as the API gives them (JSON), fed
to the watch-fed cache (`scaler.kube.cache.ClusterCache`) as list + watch events; then `Reconciler.run`
(observe, plan, a dry-run actuator) pass after pass. Between two passes a batch of watch events
arrives, as on a live cluster (pods bound and deleted, new pending pods, a node relabelled): each
timed pass is that batch's events plus the pass, in CPU time of the whole process (`cpu_p50_s`) and wall
clock (`pass_p50_s`, `plan_p50_s` the planner's part). Every node has been unneeded for long, so the scale-down's
drain simulation runs too (as in the default bench). Prints

    pass_p50_s=<x> plan_p50_s=<y> cpu_p50_s=<z> rss_mb=<m> pods=100000 nodes=15000 pools=100
"""

from __future__ import annotations

import dataclasses
import gc
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from plan_scale import GPU_TOL, MIN_TOL, TEAMS, _pod, make_config
from plan_scale import pools as pool_dicts

from scaler.actuator import Recorder
from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.interruption import Interruption
from scaler.core.model.objects import Node, Pod
from scaler.core.model.resources import format_resources, parse_resources
from scaler.core.planning.decide import decide
from scaler.core.planning.memo import Memo
from scaler.core.planning.snapshot import PoolObservation
from scaler.core.planning.state import State
from scaler.core.scheduling.predicates import effective_request
from scaler.kube.cache import ClusterCache
from scaler.reconcile import Reconciler

PODS, PENDING, NODES = 100_000, 15_000, 15_000
EVENTS = 1_000  # watch events between two passes
JSON = dict[str, Any]
STAMP = "2026-11-01T00:00:00Z"


def pod_json(p: Pod, rv: int) -> JSON:
    requests = {k: v for k, v in format_resources(p.requests).items() if k != keys.RES_PODS}
    spec: JSON = {"containers": [{"name": "main", "image": "registry.example.com/train:1",
                                  "resources": {"requests": requests}}],
                  "schedulerName": "default-scheduler", "priority": p.priority}
    if p.node_selector:
        spec["nodeSelector"] = dict(p.node_selector)
    if p.required_affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": r.key, "operator": r.operator, "values": list(r.values)} for r in term]}
            for term in p.required_affinity]}}}
    if p.tolerations:
        spec["tolerations"] = [{"key": t.key, "operator": t.operator, "effect": t.effect} for t in p.tolerations]
    status: JSON = {"phase": p.phase}
    if p.node_name:
        spec["nodeName"] = p.node_name
    else:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return {"metadata": {"name": p.name, "namespace": p.namespace, "uid": f"uid-{p.name}", "labels": dict(p.labels),
                         "resourceVersion": str(rv), "creationTimestamp": STAMP,
                         "ownerReferences": [{"kind": p.owner_kind or "ReplicaSet", "name": "owner",
                                              "controller": True}]},
            "spec": spec, "status": status}


def node_json(n: Node, rv: int) -> JSON:
    return {"metadata": {"name": n.name, "labels": dict(n.labels), "resourceVersion": str(rv), "uid": f"uid-{n.name}",
                         "creationTimestamp": STAMP},
            "spec": {"providerID": n.provider_id,
                     "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in n.taints]},
            "status": {"allocatable": format_resources(n.allocatable),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def cluster(cfg: ScalerConfig, rng: random.Random, cache: ClusterCache
            ) -> tuple[list[JSON], dict[str, str], list[tuple[str, str]]]:
    """The nodes and running pods, added to the cache as they are made (the API server's copy of 85,000
    pods is not kept, as it is not in the scaler's process): the nodes' JSON, provider id -> pool, and the
    running pods' (namespace, name)."""
    nodes, pool_of, running_keys = [], {}, []
    running = PODS - PENDING
    for i in range(NODES):
        pool = cfg.pools[i % len(cfg.pools)]
        zone = pool.zones[i % len(pool.zones)]
        tmpl = pool.template_node(zone, cfg.region)
        name = f"node-{i}"
        node = Node(name, {**tmpl.labels, keys.LABEL_HOSTNAME: name}, tmpl.taints, dict(tmpl.allocatable),
                    provider_id=f"aws:///{zone}/i-{i:08x}", pool=pool.name)
        pool_of[node.provider_id] = pool.name
        nodes.append(node_json(node, i + 1))
        cache.nodes.apply("ADDED", nodes[-1])
        free = dict(tmpl.allocatable)
        want = running // NODES + (1 if i < running % NODES else 0)
        placed = 0
        while placed < want:  # taints and selectors ignored, as in the default bench
            p = _pod(rng, f"run-{i}-{placed}", node=name)
            if all(free.get(r, 0) >= v for r, v in p.requests.items() if r != keys.RES_PODS):
                for r, v in p.requests.items():
                    free[r] = free.get(r, 0) - v
            cache.pods.apply("ADDED", pod_json(p, 1))
            running_keys.append((p.namespace, p.name))
            placed += 1
    return nodes, pool_of, running_keys


def pending_pods(rng: random.Random, templates: list[Pod], start: int, n: int) -> Iterator[Pod]:
    """Pods of 500 workloads, and gangs of 8-GPU pods (as the default bench)."""
    made = 0
    while made < n:
        i = start + made
        if rng.random() < 0.01:
            team = rng.choice(TEAMS)
            for k in range(min(rng.randint(2, 8), n - made)):
                yield Pod(name=f"gang{i}-{k}", namespace=team, owner_kind="Job",
                          requests=effective_request([parse_resources({"cpu": "16", "memory": "64Gi",
                                                                       keys.RES_GPU: 8})]),
                          labels={keys.LABEL_POD_GROUP: f"gang{i}"}, tolerations=(GPU_TOL, MIN_TOL))
                made += 1
        else:
            tpl = rng.choice(templates)
            yield dataclasses.replace(tpl, name=f"pend-{i}")
            made += 1


class StaticPools:
    """The pools as the cloud reports them: the registered nodes, nothing in flight."""

    def __init__(self, cfg: ScalerConfig, pool_of: dict[str, str]) -> None:
        self.cfg = cfg
        self.by_id = pool_of
        counts: dict[str, int] = {}
        for pool in pool_of.values():
            counts[pool] = counts.get(pool, 0) + 1
        self.counts = counts

    def observe(self, now: float) -> dict[str, PoolObservation]:
        return {p.name: PoolObservation(p, self.counts.get(p.name, 0), self.counts.get(p.name, 0))
                for p in self.cfg.pools}

    def pool_of(self, provider_id: str) -> str | None:
        return self.by_id.get(provider_id)

    def interruptions(self) -> list[Interruption]:
        return []


class Feed:
    """Synthetic watch events for the cache: between passes some pending pods are bound, some running
    ones end, new pending pods arrive, the scheduler rewrites some pending pods' condition and a node is
    relabelled."""

    def __init__(self, cache: ClusterCache, rng: random.Random, templates: list[Pod], pending: list[JSON],
                 running: list[tuple[str, str]], nodes: list[JSON]) -> None:
        self.cache, self.rng, self.templates = cache, rng, templates
        self.pending, self.running, self.nodes = pending, running, nodes
        self.rv = 10
        self.made = PENDING

    def batch(self, n: int) -> None:
        rng, quarter = self.rng, n // 4
        for _ in range(quarter):  # a pending pod is bound (MODIFIED), then runs
            obj = self.pending.pop(rng.randrange(len(self.pending)))
            bound = {**obj, "metadata": {**obj["metadata"], "resourceVersion": self._rv()},
                     "spec": {**obj["spec"], "nodeName": rng.choice(self.nodes)["metadata"]["name"]},
                     "status": {"phase": "Running"}}
            self.running.append((obj["metadata"]["namespace"], obj["metadata"]["name"]))
            self.cache.pods.apply("MODIFIED", bound)
        for _ in range(quarter):  # a running pod ends (DELETED)
            ns, name = self.running.pop(rng.randrange(len(self.running)))
            self.cache.pods.apply("DELETED", {"metadata": {"namespace": ns, "name": name,
                                                           "resourceVersion": self._rv()}})
        for p in pending_pods(rng, self.templates, self.made, quarter):  # new pending pods (ADDED)
            obj = pod_json(p, int(self._rv()))
            self.pending.append(obj)
            self.cache.pods.apply("ADDED", obj)
        self.made += quarter
        for _ in range(n - 3 * quarter):  # the scheduler tried a pending pod again (MODIFIED, same spec)
            i = rng.randrange(len(self.pending))
            obj = self.pending[i]
            tried = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "message": f"0/{NODES} nodes are available (attempt {self.rv})"}]
            self.pending[i] = {**obj, "metadata": {**obj["metadata"], "resourceVersion": self._rv()},
                               "status": {**obj["status"], "conditions": tried}}
            self.cache.pods.apply("MODIFIED", self.pending[i])
        i = rng.randrange(len(self.nodes))  # a node relabelled
        node = self.nodes[i]
        self.nodes[i] = {**node, "metadata": {**node["metadata"], "resourceVersion": self._rv(),
                                              "labels": {**node["metadata"]["labels"], "example.com/rack": self._rv()}}}
        self.cache.nodes.apply("MODIFIED", self.nodes[i])

    def _rv(self) -> str:
        self.rv += 1
        return str(1_000_000 + self.rv)


def run_xl(repeat: int, seed: int, on_pass: Callable[[Any, State], None] | None = None) -> str:
    """`on_pass`: when given, called with each timed pass's Plan and State (bench/plan_scale.py --digest)."""
    from kubernetes import client  # noqa: PLC0415

    cfg = make_config()
    assert len(pool_dicts()) == len(cfg.pools)
    rng = random.Random(seed)
    cache = ClusterCache(client.ApiClient())
    cache.provisioning_requests = list  # type: ignore[method-assign]  # none, and no API server to ask
    for inf in cache.informers:  # the initial list (not timed), then every watch is synced
        inf.synced.set()
    nodes, pool_of, running = cluster(cfg, rng, cache)
    templates = [_pod(rng, f"wl{w}") for w in range(500)]
    pending = [pod_json(p, 1) for p in pending_pods(rng, templates, 0, PENDING)]
    for obj in pending:
        cache.pods.apply("ADDED", obj)
    feed = Feed(cache, rng, templates, pending, running, nodes)
    plan_times: list[float] = []

    def timed_plan(snapshot: Any, state: State, config: ScalerConfig, memo: Memo | None) -> Any:
        t0 = time.perf_counter()
        out = decide(snapshot, state, config, memo)
        plan_times.append(time.perf_counter() - t0)
        return out

    rec = Reconciler(cfg, cache, StaticPools(cfg, pool_of), Recorder(), planner=timed_plan)
    # Every node has been under the threshold for long: the pass runs the drain simulation too.
    rec.state = State(unneeded_since={o["metadata"]["name"]: 0.0 for o in nodes})
    now = 10_000.0
    rec.run(now)  # the first pass after the initial list (not timed)
    plan_times.clear()
    walls, cpus = [], []
    for _ in range(repeat):
        gc.collect()
        now += 10.0
        t0, c0 = time.perf_counter(), time.process_time()
        feed.batch(EVENTS)
        done = rec.run(now)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        assert len(done.plan.verdicts) >= len(feed.pending) - 1
        if on_pass is not None:
            on_pass(done.plan, rec.state)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n_pods = len(feed.pending) + len(feed.running)
    print(f"xl: cpu_p50_s={statistics.median(cpus):.3f} loadavg_1m={os.getloadavg()[0]:.1f} cores={os.cpu_count()}",
          file=sys.stderr)
    return (f"pass_p50_s={statistics.median(walls):.3f} plan_p50_s={statistics.median(plan_times):.3f} "
            f"cpu_p50_s={statistics.median(cpus):.3f} rss_mb={rss_mb:.0f} pods={n_pods} nodes={len(nodes)} "
            f"pools={len(cfg.pools)}")
