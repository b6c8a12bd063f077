"""Broken GPUs and lost work in the simulator (`--gpu-failure-rate`, `--checkpoint-interval`).

Each GPU of a node fails at `rate` per GPU-hour (seeded; an exponential time from the node's registration,
as independent faults give), once. A failed GPU is no longer advertised by the device plugin: the node's
allocatable GPUs drop by one while its capacity stays, which is the signal the scaler's repair reads
(`scaler.core.planning.repair`). If a pod held that GPU (pods holding as many healthy GPUs as they asked
for, the failed one's place among them drawn uniformly) its job stops and its pod is created again
pending, like an evicted one. Only whole GPUs fail here (a time-sliced GPU's replicas or MIG slices are
shares of one GPU; a MIG node's GPUs left whole do fail).

The draws are common random numbers: each GPU's failure time and victim come from a stream of its own,
keyed by the seed, the node's pool, the node's place in the order its pool's nodes registered and the
GPU's index, never from a stream the scaler's choices consume. So two runs that differ only in a policy
(repair on and off) see the same failures on the nodes they both have: the k-th node of a pool fails at the
same time after its registration, on the same GPU, in both.

Every stopped job (a failed GPU, an eviction, a reclaimed node) resumes from its last checkpoint:
training checkpoints every `checkpoint` seconds of its run, and what ran since is lost (0: nothing is
lost, the simulator's assumption before this module).
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod
from scaler.core.model.workload import node_pool
from scaler.core.planning.repair import checkpoint_interval
from scaler.core.planning.state import State
from scaler.sim.binder import Binder

HOUR = 3600.0


def kept_progress(progress: float, checkpoint: float) -> float:
    """The run time a job keeps when it stops: up to its last checkpoint."""
    return progress if checkpoint <= 0 else math.floor(progress / checkpoint) * checkpoint


@dataclass(slots=True)
class GpuFailures:
    rate: float = 0.0  # failures per GPU-hour
    seed: int = 0
    checkpoint: float = 1800.0
    failures: int = 0
    lost_gpu_s: float = 0.0  # GPU-seconds of work lost by stopped jobs (every cause)
    lost_failure_gpu_s: float = 0.0  # of which by jobs a failed GPU stopped
    failed_at: dict[str, float] = field(default_factory=dict)  # node -> its first failure, while it exists
    repairing: set[str] = field(default_factory=set)  # nodes the scaler started to repair
    log: list[tuple[float, str, float]] = field(default_factory=list)  # (time, node, its age) of every failure
    repair_delays: list[float] = field(default_factory=list)  # first failure -> removed, repaired nodes
    unrepaired_delays: list[float] = field(default_factory=list)  # the same, nodes removed otherwise
    _due: list[tuple[float, str]] = field(default_factory=list)
    _gpus: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # node -> (fails at, victim draw)
    _registered: dict[str, int] = field(default_factory=dict)  # pool -> nodes seen so far

    def watch(self, node: Node, now: float) -> None:
        """Schedule the node's next GPU failure (nodes with whole GPUs only): its GPUs' times are drawn once,
        when it is first seen, from their own streams (the module's docstring)."""
        if self.rate <= 0 or not node.capacity.get(keys.RES_GPU, 0) or \
                node.labels.get(keys.LABEL_GPU_SHARING_STRATEGY):
            return
        if node.name not in self._gpus:
            pool = node.pool or ""
            ordinal = self._registered[pool] = self._registered.get(pool, 0) + 1
            self._gpus[node.name] = sorted(self._draw(pool, ordinal, i, now)
                                           for i in range(node.capacity[keys.RES_GPU]))
        if self._gpus[node.name] and node.allocatable.get(keys.RES_GPU, 0) > 0:
            heapq.heappush(self._due, (max(now, self._gpus[node.name][0][0]), node.name))

    def _draw(self, pool: str, ordinal: int, gpu: int, now: float) -> tuple[float, float]:
        rng = random.Random(f"gpu-failures-{self.seed}-{pool}-{ordinal}-{gpu}")  # noqa: S311 - reproducible
        return now + rng.expovariate(self.rate) * HOUR, rng.random()

    def next_time(self) -> float:
        return self._due[0][0] if self._due else math.inf

    def break_gpus(self, binder: Binder, now: float) -> list[Pod]:
        """The failures due by `now`: each node's device plugin stops advertising the GPU (its capacity stays);
        returns the pods that held one, unbound (their jobs stop)."""
        out = []
        while self._due and self._due[0][0] <= now:
            name = heapq.heappop(self._due)[1]
            node = binder.nodes.get(name)
            gpus = self._gpus.get(name)
            if node is None or not gpus or gpus[0][0] > now:
                continue  # gone, or an entry a later watch of the node superseded
            _, draw = gpus.pop(0)
            self.failures += 1
            self.log.append((now, name, now - (node.created_at or 0.0)))
            self.failed_at.setdefault(node.name, now)
            pod = self.victim(node, draw)
            if pod is not None:
                binder.unbind(pod)
                out.append(pod)
            binder.publish(node.name, keys.RES_GPU, -1, healthy=False)
            self.watch(node, now)  # the next failure among the GPUs left
        return out

    @staticmethod
    def victim(node: Node, draw: float) -> Pod | None:
        """The pod holding the GPU that failed (its place among the healthy ones: `draw` in [0, 1)), or None
        when it was a free one."""
        pick = math.floor(draw * node.allocatable.get(keys.RES_GPU, 0))
        for pod in sorted((p for p in node.pods if p.requests.get(keys.RES_GPU)), key=lambda p: p.key):
            pick -= pod.requests[keys.RES_GPU]
            if pick < 0:
                return pod
        return None

    def stopped(self, progress: float, gpus: int, *, by_failure: bool = False) -> float:
        """A job stopped after `progress` seconds of run: what it keeps; the rest is charged as lost."""
        kept = kept_progress(progress, self.checkpoint)
        self.lost_gpu_s += (progress - kept) * gpus
        if by_failure:
            self.lost_failure_gpu_s += (progress - kept) * gpus
        return kept

    def gone(self, node: str, now: float) -> None:
        since = self.failed_at.pop(node, None)
        if since is not None:
            (self.repair_delays if node in self.repairing else self.unrepaired_delays).append(now - since)
        self.repairing.discard(node)
        self._gpus.pop(node, None)
        self._due = [d for d in self._due if d[1] != node]
        heapq.heapify(self._due)

    def timers(self, state: State, nodes: dict[str, Node], config: ScalerConfig, now: float) -> list[float]:
        """When the planner could decide differently on an unhealthy node on its own: its grace ends, its hold
        ends (repair.max_hold), or a pod on it checkpoints (what a drain loses drops then)."""
        out = []
        for name, since in state.unhealthy_since.items():
            pool = node_pool(nodes[name]) if name in nodes else None
            if pool is None:
                continue
            spec = config.pool(pool).repair
            out += [since + spec.lost_gpu_grace, since + spec.max_hold]
            for pod in nodes[name].pods:
                interval = checkpoint_interval(pod)
                if pod.started_at is not None and interval:
                    out.append(pod.started_at + (math.floor((now - pod.started_at) / interval) + 1) * interval)
        return out

    def section(self) -> dict[str, object]:
        """The report's figures."""
        delays = self.repair_delays
        return {
            "rate_per_gpu_hour": self.rate, "checkpoint_interval_s": self.checkpoint, "gpu_failures": self.failures,
            "failed_nodes": len(self.repair_delays) + len(self.unrepaired_delays) + len(self.failed_at),
            "repaired_nodes": len(self.repair_delays), "failed_nodes_left": len(self.failed_at),
            "gpu_hours_lost": round(self.lost_gpu_s / HOUR, 1),
            "gpu_hours_lost_to_failures": round(self.lost_failure_gpu_s / HOUR, 1),
            "repair_delay_mean_s": round(sum(delays) / len(delays), 1) if delays else None,
            "repair_delay_max_s": round(max(delays), 1) if delays else None,
        }
