"""What a simulation records: each job's runs, the timeline samples, the fallback episodes, the result."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field

from scaler.core.config.settings import ScalerConfig
from scaler.core.model.objects import Node, Pod
from scaler.core.model.provreq import ProvisioningRequest
from scaler.core.planning.decisions import ScaleUp
from scaler.core.planning.state import State
from scaler.core.scheduling.scoring import ScoringProfile
from scaler.providers.sim import SimProvider
from scaler.sim.failures import GpuFailures
from scaler.sim.prepaid import PrepaidUse
from scaler.sim.trace import Job


@dataclass(slots=True)
class JobRun:
    job: Job
    pods: list[Pod]
    bound: int = 0
    first_start: float | None = None
    run_started: float | None = None  # start of the current run, None while not running
    done_s: float = 0.0  # run time accumulated by earlier runs
    completed_at: float | None = None
    version: int = 0  # bumped when a run stops, so its completion event is ignored
    request: ProvisioningRequest | None = None  # a queued gang's current ProvisioningRequest
    attempts: int = 0  # ProvisioningRequests made for it
    admitted_at: float | None = None  # when its request was Provisioned and its pods created
    rejected: str = ""  # why the queue gave up on it (its last request Failed)


@dataclass(slots=True)
class Sample:
    t: float
    demand_gpus: int
    pending_pods: int
    gpus_by_pool: dict[str, int]  # alive instances (booting included)


@dataclass(slots=True)
class FallbackEpisode:
    pool: str
    failed_at: float
    pods: set[str]
    fallback_at: float | None = None
    fallback_pool: str | None = None


@dataclass(slots=True)
class SimResult:
    config: ScalerConfig
    profile: ScoringProfile
    jobs: list[JobRun]
    provider: SimProvider
    end: float
    samples: list[Sample]
    plan_seconds: list[float]
    passes: int
    passes_planned: int
    episodes: list[FallbackEpisode]
    interruptions: int
    rescheduled_pods: int
    scale_ups: int
    scale_downs: int
    provider_errors: list[str]
    notes: list[str] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)  # the cluster and the planner's state when the run ended
    state: State = field(default_factory=State)
    evictions_refused: int = 0  # evictions a PodDisruptionBudget refused (429)
    gpu_sharing: bool = False  # GPU-sharing jobs asked for shares on the sharing pools (trace.share_request)
    requests: dict[str, int] | None = None  # gangs queued behind ProvisioningRequests: condition -> count
    prepaid: PrepaidUse | None = None  # reserved pools' and Capacity Blocks' use (scaler/sim/prepaid.py)
    failures: GpuFailures = field(default_factory=GpuFailures)  # broken GPUs, repairs, lost work (failures.py)


class Fallbacks:
    """Failed launches and the fallbacks that followed: an episode starts when a launch of a pool fails
    while pods its scale-ups were for are pending, and ends when another pool is asked for them (its
    fallback) or they find room without one."""

    def __init__(self) -> None:
        self.episodes: list[FallbackEpisode] = []
        self.open: dict[str, FallbackEpisode] = {}
        self.promised: dict[str, set[str]] = {}  # pool -> pending pods its last scale-ups were for

    def failed(self, pool: str, at: float, pending: Set[str]) -> None:
        if pool in self.open:
            return
        pods = {k for k in self.promised.get(pool, set()) if k in pending}
        if pods:
            episode = FallbackEpisode(pool, at, pods)
            self.episodes.append(episode)
            self.open[pool] = episode

    def capped(self, quotas: Mapping[str, str], pending: Mapping[str, Pod]) -> None:
        """A pass found a cloud quota exhausted: each waiting pod no pool was asked for yet opens an episode from
        its creation, closed by the scale-up the planner makes for it down the ladder (delay: its wait for that)."""
        if not quotas:
            return
        promised = set().union(*self.promised.values())
        quota = sorted(quotas)[0]
        for key, pod in pending.items():
            if key not in promised and f"{quota}/{key}" not in self.open:
                episode = FallbackEpisode(quota, pod.created_at or 0.0, {key})
                self.episodes.append(episode)
                self.open[f"{quota}/{key}"] = episode

    def asked(self, scale_ups: Iterable[ScaleUp], now: float) -> None:
        for up in scale_ups:
            pods = set(up.pods)
            for other, promised in self.promised.items():
                if other != up.pool:
                    promised.difference_update(pods)
            self.promised.setdefault(up.pool, set()).update(pods)
            for pool, episode in list(self.open.items()):
                if episode.pool != up.pool and episode.pods & pods:
                    episode.fallback_at, episode.fallback_pool = now, up.pool
                    del self.open[pool]

    def settle(self, pending: Set[str]) -> None:
        for pool, episode in list(self.open.items()):
            if not episode.pods & pending:
                del self.open[pool]  # its pods found room without a fallback
