"""Broken GPUs and lost work in the simulator (`--gpu-failure-rate`, `--checkpoint-interval`).

Each healthy whole GPU fails at `rate` per GPU-hour it runs (seeded), independently: across the cluster that is one
Poisson process on the healthy GPU-hours run so far (`exposure_gpu_s`), each failure striking a healthy GPU chosen
uniformly. A failed GPU is no longer advertised by the device plugin: the node's allocatable GPUs drop by one while
its capacity stays, which is the signal the scaler's repair reads (`scaler.core.planning.repair`). If a pod held
that GPU its job stops and its pod is created again pending, like an evicted one. Only whole GPUs fail here (a
time-sliced GPU's replicas or MIG slices are shares of one GPU; a MIG node's GPUs left whole do fail).

The draws are common random numbers on exposure, so that two runs that differ only in a policy (repair on and off)
face the same fault process: one stream, keyed by the seed alone and consumed by nothing else, gives the k-th
failure's exposure (the healthy GPU-hours at which it strikes) and its pick, a number in [0, 1) that chooses the
GPU along every healthy GPU in a fixed order: the GPUs pods hold first, the one whose run since its last
checkpoint is longest first, then the free ones. Any fixed order leaves the choice uniform; this one makes the same
pick strike a running job in both runs when both run about as many, and the one with as much work at stake. So the
runs see the same k-th failure at the same healthy GPU-hours, and a run sees more failures only by running more
healthy GPU-hours (a repair's replacement runs 8 healthy GPUs where a kept broken node runs 7). Keying each GPU's
own stream by its node's place in its pool (the model before) did not: once repair bought a replacement, the k-th
node of a pool was another node at another time, and the runs drew different failures (PHILLY-A at 0.001: 346
with repair, 316 without, for the same work).

With `in_place` (`--restart-policy OnFailure`) the struck pod is not made again: its container restarts in place
on the same GPU, because the kubelet keeps a container's devices across restarts (kubernetes
`pkg/kubelet/cm/devicemanager/manager.go`, `GetDeviceRunContainerOptions` reuses the cached `podDevices`; the health
check that refuses unhealthy devices runs only when they are allocated, at admission). So it crash-loops, holding
all its GPUs and running nothing, and its status reports the device Unhealthy (`UpdateAllocatedResourcesStatus`,
KEP-4680's `allocatedResourcesStatus`) until something deletes it; then its Job makes a new pod.

Every stopped job (a failed GPU, an eviction, a reclaimed node) resumes from its last checkpoint:
training checkpoints every `checkpoint` seconds of its run, and what ran since is lost (0: nothing is
lost, the simulator's assumption before this module).
"""

from __future__ import annotations

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
    in_place: bool = False  # the struck pod restarts in place on the dead GPU instead of being made again
    failures: int = 0
    lost_gpu_s: float = 0.0  # GPU-seconds of work lost by stopped jobs (every cause)
    lost_failure_gpu_s: float = 0.0  # of which by jobs a failed GPU stopped
    exposure_gpu_s: float = 0.0  # healthy GPU-seconds run so far, every node: the clock failures strike on
    failed_at: dict[str, float] = field(default_factory=dict)  # node -> its first failure, while it exists
    repairing: set[str] = field(default_factory=set)  # nodes the scaler started to repair
    log: list[tuple[float, str, float, float]] = field(default_factory=list)  # (time, node, its age, exposure)
    repair_delays: list[float] = field(default_factory=list)  # first failure -> removed, repaired nodes
    unrepaired_delays: list[float] = field(default_factory=list)  # the same, nodes removed otherwise
    _healthy: dict[str, int] = field(default_factory=dict)  # node -> its GPUs the device plugin advertises
    _running: int = 0  # their sum: GPU-seconds of exposure per second
    _at: float = 0.0  # the time exposure_gpu_s was counted to
    _strike: float = math.inf  # the exposure at which the next failure strikes
    _pick: float = 0.0  # which healthy GPU it strikes (module docstring)
    _rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"gpu-failures-{self.seed}")  # noqa: S311 - reproducible, its own stream
        if self.rate > 0:
            self._draw()

    def _draw(self) -> None:
        self._strike = self.exposure_gpu_s + self._rng.expovariate(self.rate) * HOUR
        self._pick = self._rng.random()

    def _advance(self, now: float) -> None:
        if now > self._at:
            self.exposure_gpu_s += self._running * (now - self._at)
            self._at = now

    def _set(self, name: str, gpus: int, now: float) -> None:
        self._advance(now)
        self._running += gpus - self._healthy.get(name, 0)
        if gpus > 0:
            self._healthy[name] = gpus
        else:
            self._healthy.pop(name, None)

    def watch(self, node: Node, now: float) -> None:
        """A node registered or its device plugin published GPUs: its healthy whole GPUs run from now (nodes of
        time-sliced or MIG GPUs are not watched)."""
        if self.rate <= 0 or not node.capacity.get(keys.RES_GPU, 0) or \
                node.labels.get(keys.LABEL_GPU_SHARING_STRATEGY):
            return
        self._set(node.name, node.allocatable.get(keys.RES_GPU, 0), now)

    def next_time(self) -> float:
        if self._running <= 0 or self._strike == math.inf:
            return math.inf
        return self._at + max(self._strike - self.exposure_gpu_s, 0.0) / self._running

    def break_gpus(self, binder: Binder, now: float) -> list[Pod]:
        """The failures due by `now`: each strikes the healthy GPU its draw picks; that node's device plugin stops
        advertising it (its capacity stays); returns the pods that held one (their jobs stop): unbound, or with
        `in_place` still bound, reporting one more Unhealthy device."""
        out = []
        while self.next_time() <= now + 1e-6:
            self._advance(self.next_time())
            self.exposure_gpu_s = self._strike
            node, pod = self.struck(binder, self._pick)
            self._draw()
            if node is None:
                continue
            self.failures += 1
            self.log.append((self._at, node.name, self._at - (node.created_at or 0.0), self.exposure_gpu_s))
            self.failed_at.setdefault(node.name, self._at)
            if pod is not None:
                if self.in_place:
                    pod.unhealthy_devices += 1
                else:
                    binder.unbind(pod)
                out.append(pod)
            binder.publish(node.name, keys.RES_GPU, -1, healthy=False)
            self._set(node.name, node.allocatable.get(keys.RES_GPU, 0), self._at)
        return out

    def struck(self, binder: Binder, draw: float) -> tuple[Node | None, Pod | None]:
        """The healthy GPU at `draw` (in [0, 1)) along every healthy GPU in a fixed order: the GPUs pods hold
        first, the longest run since its last checkpoint first (then by pod name), then the free ones by node name;
        its node and the pod holding it (None: a free one)."""
        nodes = [binder.nodes[n] for n in sorted(self._healthy) if n in binder.nodes]
        held = sorted(((p, n) for n in nodes for p in n.pods if p.requests.get(keys.RES_GPU)),
                      key=lambda h: (-self._since_checkpoint(h[0]), h[0].key))
        pick = math.floor(draw * sum(self._healthy[n.name] for n in nodes))
        for pod, node in held:
            pick -= pod.requests[keys.RES_GPU]
            if pick < 0:
                return node, pod
        for node in nodes:
            pick -= self._healthy[node.name] - sum(p.requests.get(keys.RES_GPU, 0) for p in node.pods)
            if pick < 0:
                return node, None
        return None, None

    def _since_checkpoint(self, pod: Pod) -> float:
        if pod.started_at is None:
            return 0.0
        run = max(self._at - pod.started_at, 0.0)
        return run - kept_progress(run, self.checkpoint)

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
        self._set(node, 0, now)

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
            "healthy_gpu_hours": round(self.exposure_gpu_s / HOUR, 1),
            "failed_nodes": len(self.repair_delays) + len(self.unrepaired_delays) + len(self.failed_at),
            "repaired_nodes": len(self.repair_delays), "failed_nodes_left": len(self.failed_at),
            "gpu_hours_lost": round(self.lost_gpu_s / HOUR, 1),
            "gpu_hours_lost_to_failures": round(self.lost_failure_gpu_s / HOUR, 1),
            "repair_delay_mean_s": round(sum(delays) / len(delays), 1) if delays else None,
            "repair_delay_max_s": round(max(delays), 1) if delays else None,
            "restart_policy": "OnFailure" if self.in_place else "Never",
        }
