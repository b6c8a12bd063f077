"""GPU job traces (the CSV format of ../shared/traces) and the pods each job becomes.

Three formats, told apart by their header:

- PHILLY: ``job_id,submit_s,gpus,duration_s,num_workers``
- ALIBABA (OpenB 2023): ``job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status``
- KUBE (``python -m scaler trace export``, scaler/sim/export.py): ``job_id,submit_s,gpus,duration_s,num_workers,
  cpu,mem_mib``, cpu in cores and memory for the whole job, its pods' requests summed

A job with more GPUs than the largest GPU node becomes a gang: ``ceil(gpus / largest)`` pods of
equal size naming one Workload API PodGroup (``spec.schedulingGroup``, the job's id; `job_group` gives it,
minCount all of them), as Job, JobSet and LeaderWorkerSet declare gangs since Kubernetes 1.35. A job that fits
one node is one pod, whatever ``num_workers`` says (Philly spread jobs over servers because its
scheduler had to, not because the jobs asked for it). A trace without cpu/memory gets requests
proportional to its GPUs (PER_GPU_CPU_M, PER_GPU_MEMORY). Pods tolerate what the documented pod
templates tolerate: the GPU taint (GPU pods), the min-gpus taint of every pool whose minimum they
reach, and AKS's Spot taint when the pools have Azure Spot pools. GPU-sharing pods (``gpu_milli`` < 1000)
ask for one whole GPU: nvidia.com/gpu is an integer resource unless time-slicing is configured.

With ``gpu_sharing`` (``simulate --gpu-sharing``) such a pod asks for a share instead, on the sharing
pools of the pools file (docs/gpu-sharing.md), by this rule: a job of ``gpu_milli`` m takes the smallest
slice count covering m/1000 of a GPU. On time-sliced pools (replicas R; with several, the smallest R)
that is ceil(m x R / 1000) replicas of nvidia.com/gpu, with the sharing taint tolerated and a node
selector on the time-slicing label; without time-sliced pools, on MIG mixed or dynamic pools, it is one device
of the smallest profile whose compute slices cover m (the fewest memory slices among equals; a dynamic pool offers
the profiles a GPU holds at least two of: 1g to 3g on an H100, not 4g.40gb, beside which only a smaller slice fits,
so a job of more than 3/7 of a GPU keeps its whole GPU and any GPU node may take it, where a 4g slice would keep an
8-GPU p5 up for it: docs/gpu-sharing.md); on a MIG single pool (AKS's one profile per agent pool) the slice is one
nvidia.com/gpu, the pool's sharing taint tolerated and its GFD product label selected. A job that no sharing pool
offers keeps its whole GPU.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from scaler.configfile import read_text
from scaler.core.config.pool import Pool
from scaler.core.config.settings import ConfigError, ScalerConfig
from scaler.core.model import keys
from scaler.core.model.objects import Pod, Toleration
from scaler.core.model.podgroup import WORKLOAD, PodGroup
from scaler.core.scheduling.predicates import effective_request

PHILLY_COLUMNS: Final = ("job_id", "submit_s", "gpus", "duration_s", "num_workers")
ALIBABA_COLUMNS: Final = ("job_id", "submit_s", "gpus", "duration_s", "gpu_milli", "cpu", "mem_mib", "qos", "status")
KUBE_COLUMNS: Final = ("job_id", "submit_s", "gpus", "duration_s", "num_workers", "cpu", "mem_mib")
KINDS: Final = {PHILLY_COLUMNS: "philly", ALIBABA_COLUMNS: "alibaba", KUBE_COLUMNS: "kube"}
# Requests of a trace pod without cpu/memory figures, per GPU: what a 1-GPU node of the g6.xlarge /
# NC4as_T4_v3 class still offers once its kubelet reserve and DaemonSets are taken.
PER_GPU_CPU_M: Final = 3000
PER_GPU_MEMORY: Final = 12 * 2**30
CPU_ONLY_CPU_M: Final = 1000  # a 0-GPU job of a trace without cpu figures
CPU_ONLY_MEMORY: Final = 2 * 2**30
SIM_NAMESPACE: Final = "trace"
# Past these a row is a typo, not a job (and the arithmetic downstream would overflow floats).
LIMITS: Final = {"submit_s": 10 * 365 * 86400.0, "duration_s": 10 * 365 * 86400.0, "gpus": 1e6,
                 "num_workers": 1e6, "gpu_milli": 1000, "cpu": 1e6, "mem_mib": 1e9}


class TraceError(ValueError):
    """A malformed trace; the message names the file and the line."""


@dataclass(frozen=True, slots=True)
class Job:
    job_id: str
    submit_s: float
    gpus: int
    duration_s: float
    cpu_m: int | None = None  # per job, None when the trace has no cpu figure
    memory: int | None = None  # bytes
    gpu_milli: int = 1000
    num_workers: int = 1
    line: int = 0


def _number(text: str, column: str, *, integer: bool, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{where}: {column} is {text!r}, not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"{where}: {column} is {text!r}, expected a finite number >= 0")
    if value > LIMITS[column]:
        raise TraceError(f"{where}: {column} is {text!r}, more than {LIMITS[column]:g}")
    if integer and value != int(value):
        raise TraceError(f"{where}: {column} is {text!r}, expected an integer")
    return value


def load_trace(path: str | Path, hours: float | None = None, start_hour: float = 0.0) -> list[Job]:
    """Read a trace CSV; with `start_hour`, from that hour on, its jobs submitted that much earlier (a later slice
    replayed from an empty cluster); with `hours`, only the jobs submitted in the first `hours` hours of it."""
    p = Path(path)
    try:
        content = read_text(p)
    except ConfigError as err:
        raise TraceError(str(err)) from None
    jobs: list[Job] = []
    header: list[str] | None = None
    kind = ""
    seen: set[str] = set()
    last = -math.inf
    for line, text in enumerate(content.splitlines(), start=1):
        if text.startswith("#") or not text.strip():
            continue
        where = f"{p}:{line}"
        try:
            row = next(csv.reader([text]))
        except csv.Error as err:
            raise TraceError(f"{where}: not a CSV row: {err}") from None
        if header is None:
            header = [h.strip() for h in row]
            kind = KINDS.get(tuple(header), "")
            if not kind:
                raise TraceError(f"{where}: unknown header {','.join(header)!r}; expected "
                                 + " or ".join(repr(",".join(c)) for c in KINDS))
            continue
        if len(row) != len(header):
            raise TraceError(f"{where}: {len(row)} fields, the header has {len(header)}")
        rec = dict(zip(header, (c.strip() for c in row), strict=True))
        job_id = rec["job_id"]
        if not job_id:
            raise TraceError(f"{where}: job_id is empty")
        if job_id in seen:
            raise TraceError(f"{where}: job_id {job_id!r} appears twice")
        seen.add(job_id)
        submit = _number(rec["submit_s"], "submit_s", integer=False, where=where)
        gpus = int(_number(rec["gpus"], "gpus", integer=True, where=where))
        duration = _number(rec["duration_s"], "duration_s", integer=False, where=where)
        if submit < last:
            raise TraceError(f"{where}: submit_s {rec['submit_s']} is before the previous row's")
        last = submit
        if submit < start_hour * 3600:
            continue
        submit -= start_hour * 3600
        if hours is not None and submit >= hours * 3600:
            break
        workers = 1
        if kind != "alibaba":
            workers = max(int(_number(rec["num_workers"], "num_workers", integer=True, where=where)), 1)
        if kind == "philly":
            jobs.append(Job(job_id, submit, gpus, duration, num_workers=workers, line=line))
            continue
        milli = int(_number(rec["gpu_milli"], "gpu_milli", integer=True, where=where)) if kind == "alibaba" else 1000
        cpu = _number(rec["cpu"], "cpu", integer=False, where=where)
        mem = _number(rec["mem_mib"], "mem_mib", integer=False, where=where)
        if gpus == 0 and cpu == 0:
            raise TraceError(f"{where}: a job with neither GPUs nor cpu")
        jobs.append(Job(job_id, submit, gpus, duration, cpu_m=math.ceil(cpu * 1000),
                        memory=math.ceil(mem * 2**20), gpu_milli=milli, num_workers=workers, line=line))
    if header is None:
        raise TraceError(f"{p}: empty trace (no header)")
    return jobs


# --- jobs to pods ----------------------------------------------------------------------------
def largest_gpu_node(config: ScalerConfig) -> int:
    return max((p.gpus for p in config.pools), default=0)


def gang_split(gpus: int, largest: int) -> tuple[int, int]:
    """(pods, GPUs per pod) for a job: one pod if it fits the largest node, else an even gang."""
    if gpus <= largest or largest == 0:
        return 1, gpus
    count = math.ceil(gpus / largest)
    return count, math.ceil(gpus / count)


def min_gpu_tolerations(config: ScalerConfig, pod_gpus: int) -> tuple[Toleration, ...]:
    """Tolerate the min-gpus taint of every pool whose minimum the pod reaches (as the pod templates do)."""
    values = sorted({p.min_pod_gpus for p in config.pools if 1 < p.min_pod_gpus <= pod_gpus})
    return tuple(Toleration(keys.TAINT_MIN_GPUS, "Equal", str(v), "NoSchedule") for v in values)


def share_request(milli: int, config: ScalerConfig) -> tuple[dict[str, int], tuple[Toleration, ...], dict[str, str]]:
    """(resources, tolerations, node selector) of a pod that needs `milli`/1000 of one GPU, on the
    config's sharing pools (the rule in this module's docstring); empty resources when none offers it."""
    replicas = [p.gpu_sharing.time_slicing.replicas for p in config.pools
                if p.gpu_sharing is not None and p.gpu_sharing.time_slicing is not None]
    if replicas:
        r = min(replicas)
        return ({keys.RES_GPU: max(1, math.ceil(milli * r / 1000))},
                (Toleration(keys.TAINT_GPU_SHARING, "Equal", keys.SHARING_TIME_SLICING, "NoSchedule"),),
                {keys.LABEL_GPU_SHARING_STRATEGY: keys.SHARING_TIME_SLICING})
    best: tuple[tuple[float, int, bool, str], Pool] | None = None  # ((compute, memory, single, profile), pool)
    for pool in config.pools:
        plan = pool.sharing
        if plan is None or plan.mig_strategy == "none" or pool.gpu_sharing is None:
            continue
        geometry = plan.geometry
        if geometry is None:
            continue
        single = plan.mig_strategy == "single" and not pool.dra  # (a DRA pool's slices are MIG devices)
        for profile in plan.per_gpu:
            if plan.dynamic and geometry.profiles[profile].max_per_gpu < 2:
                continue  # cut per claim: a slice no second one of its size can sit beside (4g) keeps a whole GPU
            fraction = geometry.profiles[profile].compute / geometry.compute
            key = (fraction, geometry.profiles[profile].memory, single, profile)
            if fraction * 1000 >= milli and (best is None or key < best[0]):
                best = (key, pool)
    if best is None:
        return {}, (), {}
    (_, _, single, profile), chosen = best
    if single:  # a single-strategy pool's slices are its nvidia.com/gpu: chosen by the product GFD labels them with
        tolerate = tuple(Toleration(t.key, "Equal", t.value, t.effect) for t in chosen.node_taints()
                         if t.key == keys.TAINT_GPU_SHARING)
        return {keys.RES_GPU: 1}, tolerate, {keys.LABEL_GPU_PRODUCT: chosen.node_labels()[keys.LABEL_GPU_PRODUCT]}
    return {keys.MIG_RESOURCE_PREFIX + profile: 1}, (), {}


def job_pods(job: Job, config: ScalerConfig, scheduler_name: str = "default-scheduler",
             gpu_sharing: bool = False) -> list[Pod]:
    """The pods of one job, as its Job / PyTorchJob / JobSet would create them."""
    count, per_pod = gang_split(job.gpus, largest_gpu_node(config))
    share = 1 / count
    if job.cpu_m is not None and job.memory is not None:
        cpu, memory = math.ceil(job.cpu_m * share), math.ceil(job.memory * share)
    elif per_pod:
        cpu, memory = PER_GPU_CPU_M * per_pod, PER_GPU_MEMORY * per_pod
    else:
        cpu, memory = CPU_ONLY_CPU_M, CPU_ONLY_MEMORY
    container = {keys.RES_CPU: cpu, keys.RES_MEMORY: memory}
    tolerations: tuple[Toleration, ...] = ()
    if any(p.cloud == "azure" and p.capacity_type == "spot" for p in config.pools):
        # Batch work may run on Spot: AKS taints Spot nodes, the pod templates tolerate it.
        tolerations = (Toleration(keys.TAINT_AZURE_SPOT, "Equal", keys.TAINT_AZURE_SPOT_VALUE, "NoSchedule"),)
    selector: dict[str, str] = {}
    gpu_share: dict[str, int] = {}
    share_tolerations: tuple[Toleration, ...] = ()
    if gpu_sharing and per_pod == 1 and count == 1 and 0 < job.gpu_milli < 1000:
        gpu_share, share_tolerations, selector = share_request(job.gpu_milli, config)
    if gpu_share:
        container.update(gpu_share)
        tolerations = (*tolerations, Toleration(keys.TAINT_GPU, "Exists", "", "NoSchedule"), *share_tolerations)
    elif per_pod:
        container[keys.RES_GPU] = per_pod
        tolerations = (*tolerations, Toleration(keys.TAINT_GPU, "Exists", "", "NoSchedule"),
                       *min_gpu_tolerations(config, per_pod))
    return [
        Pod(
            name=f"job-{job.job_id}-{i}", namespace=SIM_NAMESPACE, uid=f"{job.job_id}-{i}",
            requests=effective_request([container]), labels={"job": job.job_id},
            tolerations=tolerations, node_selector=dict(selector), owner_kind="Job", scheduler_name=scheduler_name,
            created_at=job.submit_s, scheduling_group=job.job_id if count > 1 else None,
        )
        for i in range(count)
    ]



def job_group(pod: Pod, members: int) -> PodGroup:
    """The Workload API PodGroup a gang job's pod names: all its pods together (minCount = their number)."""
    assert pod.scheduling_group is not None
    return PodGroup(WORKLOAD, pod.namespace, pod.scheduling_group, members)


def fractional_gpus(job: Job) -> float:
    """What a job really uses of its GPUs: a GPU-sharing job (gpu_milli < 1000) its share of one."""
    return job.gpu_milli / 1000 if job.gpus == 1 and 0 < job.gpu_milli < 1000 else float(job.gpus)
