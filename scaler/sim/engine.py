"""The discrete-event simulator: a trace's jobs, the sim cloud, a kube-scheduler, and the real core.

Time advances from event to event (job submissions, nodes finishing their boot, job completions,
spot reclaim notices and reclaims, the cloud's launch retries); the scaler's pass runs on the
`scan_interval` grid. A pass where nothing changed since the last one, no drain is in progress and
no timer of the planner can fire (a node's unneeded_time, an in-flight request's provision deadline,
a backoff or an unavailable offering expiring) would decide the same thing again, so it is skipped:
that is what makes six days of trace run in minutes. Each pass that runs is the pass `scaler run` runs,
`scaler.reconcile.Reconciler.run`, with the engine as its Observer (pending pods are the ones the
scheduler could not bind; the gangs' PodDisruptionBudgets; the queued gangs' ProvisioningRequests),
the sim provider as the cloud, and the same `scaler.actuator.Actuator` on the simulated Kubernetes API
(`scaler.sim.kubeapi.SimKube`: cordons, evictions answered 429 while a PodDisruptionBudget allows no
disruption, ProvisioningRequest conditions handed to the queue). The engine never writes the
planner's State.

Jobs: a job starts when all its pods run and completes `duration_s` of running later. A pod evicted by a
drain, lost with its node or its GPU (`scaler.sim.failures`) goes back to pending (`rescheduled_pods`); its
job resumes from its last checkpoint when all its pods run again: the time lost is paid for and redone.

With `provisioning_requests` the gang jobs are queued as Kueue queues them (`scaler.sim.kueue`); its
eviction of a workload whose request is revoked is not modelled (its pods, once created, stay).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable

from scaler.actuator import Actuator
from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.buffers import CapacityBuffer
from scaler.core.model.objects import Pod, PodDisruptionBudget
from scaler.core.model.podgroup import PodGroup
from scaler.core.model.provreq import ProvisioningRequest
from scaler.core.planning.decisions import Plan
from scaler.core.planning.memo import Memo
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State
from scaler.core.scheduling.scoring import DEFAULT, ScoringProfile
from scaler.ports import ClusterView, Planner
from scaler.providers.sim import Instance, SimProvider
from scaler.reconcile import Reconciler
from scaler.sim.binder import Binder
from scaler.sim.dra import SimDra, on_claims
from scaler.sim.failures import GpuFailures
from scaler.sim.kubeapi import SimKube, kubelet_node
from scaler.sim.kueue import Kueue
from scaler.sim.prepaid import PrepaidUse, block_times
from scaler.sim.records import Fallbacks, JobRun, Sample, SimResult
from scaler.sim.trace import SIM_NAMESPACE, Job, job_group, job_pods

Progress = Callable[[str], None]
DAY = 86400.0


class Engine:
    def __init__(
        self,
        config: ScalerConfig,
        jobs: list[Job],
        provider: SimProvider,
        planner: Planner,
        *,
        profile: ScoringProfile = DEFAULT,
        progress: Progress | None = None,
        max_time: float | None = None,
        device_plugin_delay: float = 0.0,
        gpu_sharing: bool = False,
        provisioning_requests: bool = False,
        failures: GpuFailures | None = None,
        dra: bool = False,
        buffers: list[CapacityBuffer] | None = None,
    ) -> None:
        """`device_plugin_delay`: a GPU node registers Ready with no allocatable GPU and publishes its
        GPUs this many seconds later (the NVIDIA device plugin starting); 0 publishes them at once."""
        self.config = config
        self.provider = provider
        self.planner = planner
        self.profile = profile
        self.progress = progress
        self.interval = config.timings.scan_interval
        self.dra = SimDra(config, SIM_NAMESPACE) if dra else None  # `config` has the DRA pools (scaler/sim/dra.py)
        self.binder = Binder({profile.scheduler_name: profile}, dra=self.dra.state if self.dra else None)
        self.gpu_sharing = gpu_sharing
        self.buffers = list(buffers or [])  # CapacityBuffers (scaler/sim/buffer.py), deleted with the last job
        self.failures = failures or GpuFailures()
        self.runs = [JobRun(j, [on_claims(p) for p in job_pods(j, config, profile.scheduler_name, gpu_sharing)]
                            if dra else job_pods(j, config, profile.scheduler_name, gpu_sharing)) for j in jobs]
        self.run_of: dict[str, JobRun] = {p.key: r for r in self.runs for p in r.pods}
        for run in self.runs:  # the trace's jobs checkpoint every --checkpoint-interval seconds of run, and say so
            for pod in run.pods:
                pod.annotations = {**pod.annotations,
                                   keys.ANNOTATION_CHECKPOINT_INTERVAL: f"{self.failures.checkpoint:g}"}
        self._run_index = {id(r): i for i, r in enumerate(self.runs)}
        self.plan_nonempty = False
        last_end = max((j.submit_s + j.duration_s for j in jobs), default=0.0)
        # Safety stop: every job could have finished by then even after a day of waiting; unless given, pushed back
        # while jobs still run (`_out_of_time`), up to ten times the trace's span past it.
        self.max_time = max_time if max_time is not None else last_end + DAY
        span = last_end - min((j.submit_s for j in jobs), default=0.0)
        self.hard_stop = self.max_time if max_time is not None else self.max_time + 10 * span
        self.ran_at = 0.0  # the last time a job stopped running (a stop or its end)
        self.pending: dict[str, Pod] = {}  # in queue order (dicts keep insertion order)
        self.new_pending: list[Pod] = []
        self.capacity_changed = False
        self.dirty = True
        self.events: list[tuple[float, int, str, int, int]] = []  # (t, seq, kind, run index, version)
        self._seq = 0
        self.demand_gpus = 0
        self.completed = 0
        self.samples: list[Sample] = []
        self.plan_seconds: list[float] = []
        self.provider_errors: list[str] = []  # every pass's failed cloud calls (the actuator keeps the last pass's)
        self.passes = self.passes_planned = 0
        self.fallbacks = Fallbacks()
        self.prepaid = PrepaidUse.of(config.pools)  # reserved pools' and Capacity Blocks' use (scaler/sim/prepaid.py)
        self.interruptions = self.rescheduled = self.scale_ups = 0
        self.node_of_instance: dict[str, str] = {}
        self.running_gangs: dict[int, JobRun] = {}  # gang jobs with a pod bound: their PDBs
        self.now = 0.0
        self.kube = SimKube(self.binder, self._pdbs, self._bound_pod, self._evicted, self._node_deleted,
                            lambda req, conditions: self.kueue.write(req, conditions, self.now))
        self.actuator = Actuator(provider, self.kube, config.timings.drain_timeout)
        self._planned_s = 0.0
        self.reconciler = Reconciler(config, self, provider, self.actuator, planner=self._timed(planner))
        self.device_plugin_delay = device_plugin_delay
        self.queue_gangs = provisioning_requests
        self.kueue = Kueue(self._admit, self._retry, self._reject)
        self.rejected = 0
        self._gpus_due: list[tuple[float, str, str, int]] = []  # (when, node, GPU device resource, count)
        for i, r in enumerate(self.runs):
            self._push(r.job.submit_s, "submit", i, 0)

    # --- events --------------------------------------------------------------------------------
    def _push(self, t: float, kind: str, index: int, version: int) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, self._seq, kind, index, version))

    def _process_until(self, t: float) -> None:
        """Apply every event up to `t` in time order, binding pods after each instant."""
        while True:
            t_heap = self.events[0][0] if self.events else math.inf
            t_cloud = self.provider.next_event()
            t_gpus = self._gpus_due[0][0] if self._gpus_due else math.inf
            now = min(t_heap, t_cloud, t_gpus, self.failures.next_time())
            if now > t:
                break
            happened = self.provider.advance(now)
            for inst in happened.ready:
                self._register(inst, now)
            for inst in happened.interrupted:
                self.interruptions += inst.end_reason == "interrupted"  # not a block's end
                self.prepaid.ended(self.binder.nodes.get(self.node_of_instance.get(inst.provider_id, "")), self.run_of)
                self._drop_node(inst.provider_id, now)
            while self._gpus_due and self._gpus_due[0][0] <= now:
                _, name, resource, count = heapq.heappop(self._gpus_due)
                if name in self.binder.nodes:
                    self.binder.publish(name, resource, count)
                    self.failures.watch(self.binder.nodes[name], now)
                    self.capacity_changed = True
            for pod in self.failures.break_gpus(self.binder, now):  # the pods that held a failed GPU
                if self.failures.in_place:
                    self._halt(self.run_of[pod.key], now, by_failure=True)  # it crash-loops on the dead GPU
                else:
                    self._stop(pod, now, by_failure=True)
                self.capacity_changed = True
            while self.events and self.events[0][0] <= now:
                _, _, kind, index, version = heapq.heappop(self.events)
                run = self.runs[index]
                if kind == "submit":
                    self.demand_gpus += run.job.gpus
                    if self.queue_gangs and len(run.pods) > 1:
                        self.kueue.request(run, now)
                        self.dirty = True
                    else:
                        for pod in run.pods:
                            self._enqueue(pod, now)
                elif kind == "retry" and not run.rejected:
                    self.kueue.request(run, now)
                    self.dirty = True
                elif kind == "complete" and version == run.version and run.completed_at is None:
                    self._complete(run, now)
            self._bind(now)
            self.dirty = True
            self._sample(now)

    def _enqueue(self, pod: Pod, now: float) -> None:
        """Into the scheduler's queue. A stopped pod comes back as its controller's new pod would:
        created now, so it queues behind the pods already waiting (the planner reads that order)."""
        pod.created_at = now
        self.pending[pod.key] = pod
        self.new_pending.append(pod)

    def _register(self, inst: Instance, now: float) -> None:
        node, later = kubelet_node(inst, self.config, now, self.device_plugin_delay > 0)
        for resource, count in later:
            heapq.heappush(self._gpus_due, (now + self.device_plugin_delay, node.name, resource, count))
        self.binder.add_node(node)
        self.failures.watch(node, now)
        if self.dra is not None:
            self.dra.register(node)
        self.prepaid.registered(node.name, inst.pool)
        self.node_of_instance[inst.provider_id] = node.name
        self.capacity_changed = True

    def _drop_node(self, provider_id: str, now: float) -> None:
        name = self.node_of_instance.pop(provider_id, None)
        if name is None or name not in self.binder.nodes:
            return
        self.failures.gone(name, now)
        if self.dra is not None:
            self.dra.drop(name)
        for pod in self.binder.remove_node(name):
            self._stop(pod, now)

    def _stop(self, pod: Pod, now: float, *, by_failure: bool = False) -> None:
        """A pod stopped (evicted, node lost, its GPU failed): pending again as its controller's new pod; its job
        resumes from its checkpoint."""
        run = self.run_of[pod.key]
        run.bound -= 1
        if run.bound <= 0:
            self.running_gangs.pop(id(run), None)
        pod.node_name = None
        pod.phase = "Pending"
        pod.unhealthy_devices = 0
        self._halt(run, now, by_failure=by_failure)
        self.rescheduled += 1
        self._enqueue(pod, now)

    def _halt(self, run: JobRun, now: float, *, by_failure: bool = False) -> None:
        """The job stops running: what it ran since its last checkpoint is lost."""
        if run.run_started is not None:
            self.ran_at = now
            run.done_s = self.failures.stopped(run.done_s + now - run.run_started, run.job.gpus, by_failure=by_failure)
            run.run_started = None
            run.version += 1

    def _bind(self, now: float) -> None:
        candidates = list(self.pending.values()) if self.capacity_changed else self.new_pending
        self.capacity_changed = False
        self.new_pending = []
        for pod in candidates:
            if pod.key not in self.pending or pod.node_name is not None:
                continue
            if self.binder.bind(pod) is None:
                continue
            del self.pending[pod.key]
            run = self.run_of[pod.key]
            run.bound += 1
            if len(run.pods) > 1:
                self.running_gangs[id(run)] = run
            if run.bound == len(run.pods) and run.completed_at is None:
                run.run_started = now
                for started in run.pods:  # status.startTime: what a repair reads checkpoints from
                    started.started_at = now
                if run.first_start is None:
                    run.first_start = now
                self._push(now + max(run.job.duration_s - run.done_s, 0.0), "complete",
                           self._run_index[id(run)], run.version)

    def _complete(self, run: JobRun, now: float) -> None:
        run.completed_at = now
        self.ran_at = now
        if run.run_started is not None:
            run.done_s += now - run.run_started
        run.run_started = None
        self.completed += 1
        self.running_gangs.pop(id(run), None)
        self.demand_gpus -= run.job.gpus
        self.kueue.finished(run)
        for pod in run.pods:
            self.binder.unbind(pod)
            pod.phase = "Succeeded"
        self.capacity_changed = True

    # --- Kueue's side: what it does for the engine --------------------------------------------------
    def _admit(self, run: JobRun, now: float) -> None:
        self.dirty = True  # the next pass sees whether its pods all found their booked room
        for pod in run.pods:
            self._enqueue(pod, now)

    def _retry(self, run: JobRun, at: float) -> None:
        self._push(at, "retry", self._run_index[id(run)], 0)

    def _reject(self, run: JobRun) -> None:
        self.rejected += 1
        self.demand_gpus -= run.job.gpus

    def _sample(self, now: float) -> None:
        by_pool: dict[str, int] = {}
        for inst in self.provider.alive():
            by_pool[inst.pool] = by_pool.get(inst.pool, 0) + inst.gpus
        sample = Sample(now, self.demand_gpus, len(self.pending), by_pool)
        self.prepaid.sample(now, self.binder.nodes, self.pending)
        if self.samples and self.samples[-1].t == now:
            self.samples[-1] = sample
        else:
            self.samples.append(sample)

    # --- the scaler's pass ---------------------------------------------------------------------
    def _timers(self, now: float) -> float:
        """The earliest future time at which the planner could decide differently on its own."""
        times = list(self.state.unneeded_until.values())
        times += [f.deadline for flights in self.state.in_flight.values() for f in flights]
        times += [b.until for b in self.state.backoff.values()]
        times += list(self.state.unavailable.values())
        times += self.kueue.booking_ends(self.config.timings.booking_ttl)
        times += block_times(self.config.pools)  # a block opens, closes to new nodes, starts its drain
        times += self.failures.timers(self.state, self.binder.nodes, self.config, now)  # a repair's grace, hold
        future = [x for x in times if x > now]
        return min(future, default=math.inf)

    def _pdbs(self) -> list[PodDisruptionBudget]:
        """A gang job's budget: minAvailable = all its pods (as gang schedulers create them), with
        unhealthyPodEvictionPolicy AlwaysAllow (what kubernetes.io, *Specifying a Disruption Budget*, recommends: a
        pod crash-looping on a dead GPU must not hold a drain)."""
        return [PodDisruptionBudget(f"job-{r.job.job_id}", SIM_NAMESPACE, {"job": r.job.job_id},
                                    max(0, r.bound - len(r.pods)), always_allow_unhealthy=True)
                for r in self.running_gangs.values()]

    def _bound_pod(self, key: str) -> Pod | None:
        run = self.run_of.get(key)
        return next((p for p in run.pods if p.key == key and p.node_name is not None), None) if run else None

    def _evicted(self, pod: Pod) -> None:
        """The API server deleted an evicted pod; its controller creates it again, pending."""
        self.prepaid.evicted(pod, self.run_of[pod.key].job.job_id, self.now)
        self.binder.unbind(pod)
        self._stop(pod, self.now)
        self.capacity_changed = True

    def _node_deleted(self, name: str) -> None:
        pid = next((p for p, n in self.node_of_instance.items() if n == name), None)
        if pid is not None:
            self._drop_node(pid, self.now)

    # --- the Observer the pass reads (scaler.ports.Observer) ---------------------------------------
    def observe(self, pool_of: Callable[[str], str | None]) -> ClusterView:
        if self.dra is not None:
            nodes, objects = self.dra.view(list(self.binder.nodes.values()))
            return ClusterView(list(self.pending.values()), nodes, self._pdbs(), dra=objects, buffers=self.buffers,
                               pod_groups=self._groups())
        return ClusterView(list(self.pending.values()), list(self.binder.nodes.values()), self._pdbs(),
                           buffers=self.buffers, pod_groups=self._groups())

    def _groups(self) -> dict[str, PodGroup]:
        """The Workload API PodGroups of the gang jobs with a pod pending (each names its job's group)."""
        out: dict[str, PodGroup] = {}
        for pod in self.pending.values():
            if pod.scheduling_group is not None:
                group = job_group(pod, len(self.run_of[pod.key].pods))
                out[group.key] = group
        return out

    def provisioning_requests(self) -> list[ProvisioningRequest]:
        return self.kueue.live()

    @property
    def state(self) -> State:
        return self.reconciler.state

    def _timed(self, planner: Planner) -> Planner:
        def timed(snapshot: Snapshot, state: State, config: ScalerConfig, memo: Memo | None) -> tuple[Plan, State]:
            started = time.perf_counter()
            try:
                return planner(snapshot, state, config, memo)
            finally:
                self._planned_s += time.perf_counter() - started
        return timed

    def _pass(self, now: float) -> None:
        self.passes_planned += 1
        self.now = now
        self._planned_s = 0.0
        done = self.reconciler.run(now)
        self.provider_errors.extend(self.actuator.errors)
        self.plan_seconds.append(self._planned_s)
        pending = {p.key for p in done.snapshot.pending}
        for name, obs in done.snapshot.pools.items():
            for failure in obs.failures:
                self.fallbacks.failed(name, failure.at, pending)
        self.fallbacks.capped(done.plan.quotas, self.pending)
        self.failures.repairing.update(r.node for r in done.plan.repairs if r.started)
        self._account(done.plan, now)
        self.plan_nonempty = not done.plan.empty

    def _account(self, plan: Plan, now: float) -> None:
        """What the actuator did, as the report counts it: scale-ups, fallbacks, nodes that went."""
        self.scale_ups += len(plan.scale_ups)
        self.fallbacks.asked(plan.scale_ups, now)
        # Removed nodes, and registered ones a lower desired size terminated (the group picks which).
        for pid in list(self.node_of_instance):
            if not self.provider.instance(pid).alive:
                self._drop_node(pid, now)
                self.capacity_changed = True
        self.fallbacks.settle(self.pending.keys())

    # --- the run -------------------------------------------------------------------------------
    def finished(self) -> bool:
        if self.completed + self.rejected < len(self.runs) or self.actuator.drains:
            return False
        return all(len([i for i in self.provider.alive() if i.pool == p.name]) <= p.min_size
                   for p in self.config.pools)

    def _out_of_time(self, tick: float) -> bool:
        """The safety stop. A job that redoes work lost to failures or reclaims may still be running a day past the
        trace's last end: while one ran in the last day the stop waits another day (it used to cut such a job off,
        its run never counted as done), up to `hard_stop` (a job stopped again before each checkpoint never ends)."""
        if tick < self.max_time:
            return False
        if tick < self.hard_stop and (self.ran_at > tick - DAY or any(r.run_started is not None for r in self.runs)):
            self.max_time = tick + DAY
            return False
        return True

    def run(self) -> SimResult:
        tick = 0.0
        wall = time.monotonic()
        last_report = wall
        timer_due = math.inf
        while True:
            self._process_until(tick)
            self.passes += 1
            if self.dirty or self.plan_nonempty or self.actuator.drains or tick >= timer_due:
                self.dirty = False
                self._pass(tick)
                self._bind(tick)
                self._sample(tick)
                timer_due = self._timers(tick)
            if self.finished() or self._out_of_time(tick):
                break
            if self.buffers and self.completed + self.rejected == len(self.runs):
                self.buffers, self.dirty = [], True  # the trace is over: the buffer goes, the pools return to min
            nxt = min(self.events[0][0] if self.events else math.inf, self.provider.next_event(), timer_due,
                      self._gpus_due[0][0] if self._gpus_due else math.inf, self.failures.next_time())
            if self.plan_nonempty or self.actuator.drains or self.provider.has_unreported_failures():
                nxt = tick + self.interval
            if nxt == math.inf:
                break
            tick = max(tick + self.interval, math.ceil(nxt / self.interval) * self.interval)
            if self.progress and time.monotonic() - last_report > 2:
                last_report = time.monotonic()
                self.progress(self._status(tick))
        if self.progress:
            self.progress(self._status(tick) + f" done in {time.monotonic() - wall:.1f}s")
        self.prepaid.sample(tick, self.binder.nodes, self.pending)
        return SimResult(
            config=self.config, profile=self.profile, jobs=self.runs, provider=self.provider, end=tick,
            samples=self.samples, plan_seconds=self.plan_seconds, passes=int(tick // self.interval) + 1,
            passes_planned=self.passes_planned, episodes=self.fallbacks.episodes, interruptions=self.interruptions,
            rescheduled_pods=self.rescheduled, scale_ups=self.scale_ups,
            scale_downs=sum(1 for i in self.provider.history if i.end_reason == "deleted"),
            provider_errors=self.provider_errors, evictions_refused=self.kube.refused,
            nodes=list(self.binder.nodes.values()), state=self.state, gpu_sharing=self.gpu_sharing,
            requests=dict(self.kueue.counts) if self.queue_gangs else None, prepaid=self.prepaid,
            failures=self.failures,
        )

    def _status(self, tick: float) -> str:
        gpus = sum(i.gpus for i in self.provider.alive())
        return (f"t={tick / 3600:7.1f}h jobs {self.completed}/{len(self.runs)} nodes {len(self.binder.nodes)} "
                f"gpus {gpus} demand {self.demand_gpus} pending pods {len(self.pending)} "
                f"passes planned {self.passes_planned}")
