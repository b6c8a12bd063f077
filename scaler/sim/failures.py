"""Broken GPUs and lost work in the simulator (`--gpu-failure-rate`, `--checkpoint-interval`).

Each healthy GPU of a node fails at `rate` per GPU-hour (seeded; exponential times between failures, as
independent faults give). A failed GPU is no longer advertised by the device plugin: the node's
allocatable GPUs drop by one while its capacity stays, which is the signal the scaler's repair reads
(`scaler.core.planning.repair`). If a pod held that GPU (a GPU of the node drawn at random, pods holding
as many as they asked for) its job stops and its pod is created again pending, like an evicted one.
Only whole-GPU device-plugin nodes fail here (a time-sliced or MIG node's devices are shares of one GPU).

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
    repair_delays: list[float] = field(default_factory=list)  # first failure -> removed, repaired nodes
    unrepaired_delays: list[float] = field(default_factory=list)  # the same, nodes removed otherwise
    _due: list[tuple[float, str]] = field(default_factory=list)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"gpu-failures-{self.seed}")  # noqa: S311 - a reproducible simulation

    def watch(self, node: Node, now: float) -> None:
        """Draw the next failure among the node's healthy GPUs (whole-GPU device-plugin nodes only)."""
        gpus = node.allocatable.get(keys.RES_GPU, 0)
        if self.rate > 0 and gpus > 0 and node.capacity.get(keys.RES_GPU, 0) and \
                not node.labels.get(keys.LABEL_GPU_SHARING_STRATEGY):
            heapq.heappush(self._due, (now + self._rng.expovariate(self.rate * gpus) * HOUR, node.name))

    def next_time(self) -> float:
        return self._due[0][0] if self._due else math.inf

    def break_gpus(self, binder: Binder, now: float) -> list[Pod]:
        """The failures due by `now`: each node's device plugin stops advertising the GPU (its capacity stays);
        returns the pods that held one, unbound (their jobs stop)."""
        out = []
        while self._due and self._due[0][0] <= now:
            node = binder.nodes.get(heapq.heappop(self._due)[1])
            if node is None:
                continue
            self.failures += 1
            self.failed_at.setdefault(node.name, now)
            pod = self.victim(node)
            if pod is not None:
                binder.unbind(pod)
                out.append(pod)
            binder.publish(node.name, keys.RES_GPU, -1, healthy=False)
            self.watch(node, now)  # the next failure among the GPUs left
        return out

    def victim(self, node: Node) -> Pod | None:
        """The pod holding the GPU that failed, or None when it was a free one."""
        gpus = node.allocatable.get(keys.RES_GPU, 0)
        pick = self._rng.randrange(gpus) if gpus else 0
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
