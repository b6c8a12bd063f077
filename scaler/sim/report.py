"""The simulation report: the figures a run is judged by, as JSON and as a terminal summary.

- paid_gpu_hours: GPUs of every instance times its life, from the launch request to its
  termination (boot and idle included); instances still alive at the end are paid to the end.
- demand_gpu_hours: the lower bound, sum over jobs of GPUs x run time.
- cost_usd: every instance's hourly price times its life; lower_bound_cost_usd: each job's
  GPU-hours at the cheapest per-GPU price of a pool its pods fit (a 0-GPU job: its cpu share of the
  cheapest per-vCPU pool that fits it).
- on_demand_only_cost_usd / static_fleet_cost_usd (static_fleet: its nodes per pool, GPUs, $/h, hours): the
  same trace without gpuburst, the nodes of this run at on-demand prices, and an always-on on-demand fleet
  sized for the trace's peak (`baselines`; the method is in docs/simulator.md).
- spot_share: the share of paid GPU-hours that ran on spot.
- pending_*: per job that started, from submission to the moment all its pods run (first start).
- jobs_never_started / never_started: the jobs whose pods never all ran (count, the first job ids, and
  per group of pods alike, why: the planner's verdict on an empty cluster with each pool's reason in
  `python -m scaler explain`'s words). demand_done_gpu_hours: GPUs x run time actually done (jobs cut by
  the end included); paid_over_demand_done: paid over that, the overhead on the work done.
- fallback_events / fallback_delay_*: a spot launch that failed while pods waited for it opens an
  episode; it closes when a scale-up in another pool is planned for those pods (the fallback). The
  delay is from the failed launch to that scale-up.
- plan_*: wall time of `scaler.core.planning.decide.decide` per pass that ran (with the ProvisioningRequests, if any).
- provisioning_requests (with --provisioning-requests, else null): the gangs' ProvisioningRequests made and
  how many became Provisioned, Failed, CapacityRevoked (a booked node was lost), BookingExpired (the
  10-minute booking ran out before the job finished: the normal end of a longer job's request);
  admission_wait_*: from a gang's submission to its request being Provisioned (its pods are created then).
  A gang whose last request Failed is rejected and named under never_started with the request's reason.
"""

from __future__ import annotations

import math
from typing import Any

from scaler.core.config.pool import Pool
from scaler.core.model import keys
from scaler.core.model.objects import Pod
from scaler.core.model.provreq import FAILED, PROVISIONED
from scaler.core.model.workload import gpu_devices
from scaler.core.planning.context import planning_context
from scaler.core.planning.planner import plan
from scaler.core.planning.snapshot import PoolObservation, Snapshot
from scaler.core.scheduling.predicates import fits
from scaler.sim.ca_baseline import LABEL as CA_LABEL
from scaler.sim.plan_command import reasons_by_text
from scaler.sim.prepaid import section as prepaid_section
from scaler.sim.prepaid import summary_lines as prepaid_lines
from scaler.sim.records import JobRun, SimResult
from scaler.sim.spot import spot_line
from scaler.sim.trace import fractional_gpus, job_group
from scaler.sim.warm import warm_section

FIRST_JOBS = 5  # job ids the report names (the count says how many more)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1); 0 for an empty list."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def _cheapest_rate(result: SimResult, pod: Pod) -> float | None:
    """What the pod alone costs per hour on the cheapest pool it fits: its share of a node's GPU devices
    (whole GPUs, time-sliced replicas, MIG slices), or of its vCPUs for a pod without GPUs."""
    config = result.config
    best: float | None = None
    devices = gpu_devices(pod.requests)
    for pool in config.pools:
        template = pool.template_node(pool.zones[0], config.region)
        if not fits(pod, template):
            continue
        share = devices / gpu_devices(template.allocatable) if devices else \
            pod.requests.get(keys.RES_CPU, 0) / 1000 / pool.itype.vcpu
        rate = pool.list_price(config.spot_price_factor) * share  # a prepaid pool at what it is charged
        if best is None or rate < best:
            best = rate
    return best


def lower_bound_cost(result: SimResult) -> float:
    cache: dict[tuple[object, ...], float | None] = {}
    total = 0.0
    for run in result.jobs:
        for pod in run.pods:
            shape = (tuple(sorted(pod.requests.items())), pod.tolerations, tuple(sorted(pod.node_selector.items())))
            if shape not in cache:
                cache[shape] = _cheapest_rate(result, pod)
            rate = cache[shape]
            if rate is not None:
                total += rate * run.job.duration_s / 3600
    return total


def on_demand_price(result: SimResult, pool: Pool) -> float:
    """What a node of the pool costs an hour without spot: a spot pool's instance type at its on-demand list price
    (the catalogue's, or the stack's catalogue override), any other pool (prepaid too) at its own list price."""
    return pool.itype.price_per_hour if pool.capacity_type == "spot" else pool.list_price(1.0)


def _static_pool(result: SimResult, pod: Pod) -> tuple[Pool, int, int] | None:
    """The pool a static fleet would run the pod on: the cheapest per GPU device (per vCPU for a pod without GPUs)
    at on-demand prices among the pools it fits, non-spot first on a tie; with the pod's units and a node's."""
    config = result.config
    devices = gpu_devices(pod.requests)
    best: tuple[float, int, Pool, int, int] | None = None
    for index, pool in enumerate(config.pools):
        template = pool.template_node(pool.zones[0], config.region)
        if not fits(pod, template):
            continue
        if devices:
            units, per_node = devices, gpu_devices(template.allocatable)
        else:
            units, per_node = pod.requests.get(keys.RES_CPU, 0), template.allocatable.get(keys.RES_CPU, 0)
        if per_node <= 0:
            continue
        rate = on_demand_price(result, pool) * units / per_node
        key = (rate, index + (len(config.pools) if pool.capacity_type == "spot" else 0))
        if best is None or key < best[:2]:
            best = (*key, pool, units, per_node)
    return None if best is None else best[2:]


def baselines(result: SimResult) -> dict[str, Any]:
    """The same trace on two fleets without gpuburst, for comparison (method: docs/simulator.md, "Baselines").

    - on_demand_only: the instances this run had, each for the same time, at on-demand prices: gpuburst's
      scaling without spot (spot reclaims and outages aside, which on-demand capacity would not have had).
    - static_fleet: on-demand nodes that are always up from the first submission to the last completion with no
      wait, as many per pool as the peak of the pods running at once needs (each job running from its
      submission; each pod on the pool `_static_pool` picks; perfectly packed, so never fewer nodes than a real
      static fleet needs), and at least each pool's minimum.
    """
    config = result.config
    pools = {p.name: p for p in config.pools}
    end = result.end
    history = result.provider.history
    od_cost = sum(on_demand_price(result, pools[i.pool]) * i.life(end) for i in history if i.pool in pools) / 3600
    cache: dict[tuple[object, ...], tuple[Pool, int, int] | None] = {}
    events: dict[str, list[tuple[float, int]]] = {}
    per_node: dict[str, int] = {}
    unplaced = 0
    span = 0.0
    for run in result.jobs:
        start, stop = run.job.submit_s, run.job.submit_s + run.job.duration_s
        span = max(span, stop)
        for pod in run.pods:
            shape = (tuple(sorted(pod.requests.items())), pod.tolerations, tuple(sorted(pod.node_selector.items())))
            if shape not in cache:
                cache[shape] = _static_pool(result, pod)
            placed = cache[shape]
            if placed is None:
                unplaced += 1
                continue
            pool, units, node_units = placed
            per_node[pool.name] = node_units
            events.setdefault(pool.name, []).extend(((start, units), (stop, -units)))
    nodes: dict[str, int] = {}
    for pool in config.pools:
        peak = running = 0
        for _, delta in sorted(events.get(pool.name, []), key=lambda e: (e[0], e[1])):  # ends before starts
            running += delta
            peak = max(peak, running)
        needed = math.ceil(peak / per_node[pool.name]) if peak else 0
        if max(needed, pool.min_size):
            nodes[pool.name] = max(needed, pool.min_size)
    hourly = sum(n * on_demand_price(result, pools[name]) for name, n in nodes.items())
    return {
        "on_demand_only_cost_usd": round(od_cost, 2),
        "static_fleet_cost_usd": round(hourly * span / 3600, 2),
        "static_fleet": {"nodes": nodes, "gpus": sum(n * (pools[k].gpus_per_node or 0) for k, n in nodes.items()),
                         "cost_per_hour_usd": round(hourly, 2), "hours": round(span / 3600, 2),
                         "pods_fitting_no_pool": unplaced},
    }


def _pending(run: JobRun) -> float:
    return max((run.first_start or 0.0) - run.job.submit_s, 0.0)


def _done_s(run: JobRun, end: float) -> float:
    return run.done_s + (end - run.run_started if run.run_started is not None else 0.0)


def never_started(result: SimResult) -> dict[str, Any]:
    """The jobs whose pods never all ran, and why: the planner's verdict on their waiting pods in the cluster
    and state the run ended with (the per-pool reasons `python -m scaler explain` prints), pods alike grouped."""
    runs = [r for r in result.jobs if r.first_start is None]
    out: dict[str, Any] = {"jobs": len(runs), "first_job_ids": [r.job.job_id for r in runs[:FIRST_JOBS]],
                           "reasons": []}
    if not runs:
        return out
    config = result.config
    job_of = {p.key: r.job.job_id for r in runs for p in r.pods}
    waiting = [p for r in runs if r.request is None or r.admitted_at is not None for p in r.pods
               if p.node_name is None]
    alive: dict[str, int] = {}
    for inst in result.provider.alive():
        alive[inst.pool] = alive.get(inst.pool, 0) + 1
    pools = {p.name: PoolObservation(p, alive.get(p.name, 0), alive.get(p.name, 0)) for p in config.pools}
    groups_of = [job_group(r.pods[0], len(r.pods)) for r in runs if r.pods and r.pods[0].scheduling_group]
    snapshot = Snapshot(now=result.end, pending=waiting, nodes=result.nodes, pools=pools,
                        pod_groups={g.key: g for g in groups_of})
    verdicts = plan(snapshot, result.state, planning_context(config))[0].verdicts
    groups: dict[tuple[object, ...], dict[str, Any]] = {}

    def count(outcome: str, reasons: dict[str, str], pod: Pod) -> None:
        key = (outcome, tuple(sorted(reasons.items())))
        group = groups.setdefault(key, {"outcome": outcome, "pods": 0, "jobs": set(), "per_pool": reasons})
        group["pods"] += 1
        group["jobs"].add(job_of[pod.key])

    for r in runs:
        req = r.request
        if req is not None and r.admitted_at is None:
            # Rejected by the queue, or still queued (no pods yet): the request's say, without its name.
            cond = req.conditions.get(FAILED if r.rejected else PROVISIONED)
            why = f"{cond.reason}: {cond.message}" if cond is not None else "not answered yet"
            outcome = "rejected" if r.rejected else "queued"
            for pod in r.pods:
                count(outcome, {"*": f"ProvisioningRequest {why}"}, pod)
            continue
        for pod in r.pods:
            v = verdicts.get(pod.key)
            if pod.node_name is not None:
                count("bound", {"*": "running, waiting for the rest of its job's pods"}, pod)
            elif v is None or v.outcome not in ("unschedulable", "waiting"):
                where = f" in pool {v.pool}" if v is not None and v.pool else ""
                count(v.outcome if v else "pending",
                      {"*": f"{v.outcome if v else 'pending'}{where} when the run stopped at {result.end:.0f} s"}, pod)
            else:
                count(v.outcome, dict(v.reasons), pod)
    ordered = sorted(groups.values(), key=lambda g: -g["pods"])
    out["reasons"] = [{**g, "jobs": len(g["jobs"])} for g in ordered]
    return out


def build_report(result: SimResult, *, trace: str, pools_file: str, seed: int, outages: list[str],
                 wall_s: float) -> dict[str, Any]:
    end = result.end
    history = result.provider.history
    config = result.config
    # Prepaid pools are paid for their window, used or not (scaler/sim/prepaid.py), not per instance.
    prepaid = prepaid_section(result.prepaid, config.pools, end, config.spot_price_factor)
    bought = {p.name for p in config.pools if p.prepaid}
    paid = sum(i.gpus * i.life(end) for i in history if i.pool not in bought) / 3600 + \
        sum(p["paid_gpu_hours"] for p in prepaid.values()) + (warm := warm_section(result, end))["paid_gpu_hours"]
    spot = sum(i.gpus * i.life(end) for i in history if i.spot) / 3600
    cost = sum(i.price_per_hour * i.life(end) for i in history) / 3600 + sum(p["cost_usd"] for p in prepaid.values())
    demand = sum(r.job.gpus * r.job.duration_s for r in result.jobs) / 3600
    fractional = sum(fractional_gpus(r.job) * r.job.duration_s for r in result.jobs) / 3600
    done = sum(r.job.gpus * _done_s(r, end) for r in result.jobs) / 3600
    pendings = [_pending(r) for r in result.jobs if r.first_start is not None]
    one_gpu = [_pending(r) for r in result.jobs if r.first_start is not None and r.job.gpus == 1]
    never = never_started(result)
    admitted = [r.admitted_at - r.job.submit_s for r in result.jobs if r.admitted_at is not None]
    delays = [e.fallback_at - e.failed_at for e in result.episodes if e.fallback_at is not None]
    timings = result.config.timings
    return {
        "trace": trace,
        "pools_file": pools_file,
        "scheduler": result.profile.name,
        "scheduler_name": result.profile.scheduler_name,
        "placement": f"kube-scheduler {result.profile.name} profile "
                     f"(NodeResourcesFit {result.profile.fit_strategy})",
        "seed": seed,
        "spot_outages": outages,
        "timings": timings.model_dump(),
        "jobs_total": len(result.jobs),
        "jobs_completed": sum(1 for r in result.jobs if r.completed_at is not None),
        "jobs_never_started": never["jobs"],
        "demand_gpu_hours": round(demand, 1),
        "demand_done_gpu_hours": round(done, 1),
        # GPU-sharing jobs at their share of one GPU (gpu_milli / 1000): what sharing could save at best.
        "demand_fractional_gpu_hours": round(fractional, 1),
        "gpu_sharing": result.gpu_sharing,
        "paid_gpu_hours": round(paid, 1),
        "paid_over_demand": round(paid / demand, 4) if demand else None,
        "paid_over_demand_done": round(paid / done, 4) if done else None,
        "cost_usd": round(cost + warm["cost_usd"], 2),
        "lower_bound_cost_usd": round(lower_bound_cost(result), 2),
        # The same trace without gpuburst: elastic on on-demand only, and a static on-demand fleet sized for the peak.
        **baselines(result),
        "spot_share": round(spot / paid, 4) if paid else 0.0,
        "pending_p50_s": percentile(pendings, 0.5),
        "pending_p95_s": percentile(pendings, 0.95),
        "pending_max_s": max(pendings, default=0.0),
        "pending_1gpu_p50_s": percentile(one_gpu, 0.5), "pending_1gpu_p95_s": percentile(one_gpu, 0.95),
        "warm_pools": warm if warm["instances"] else None,  # their bill, in cost_usd and paid_gpu_hours already
        "fallback_events": len(delays),
        "fallback_delay_max_s": max(delays, default=None),
        "failed_launch_episodes": len(result.episodes),
        "interruptions": result.interruptions,
        "rescheduled_pods": result.rescheduled_pods,
        "instances_launched": len(history),
        "peak_gpus": max((sum(s.gpus_by_pool.values()) for s in result.samples), default=0),
        "peak_demand_gpus": max((s.demand_gpus for s in result.samples), default=0),
        "scale_ups": result.scale_ups,
        "scale_downs": result.scale_downs,
        "plan_p50_s": round(percentile(result.plan_seconds, 0.5), 5),
        "plan_max_s": round(max(result.plan_seconds, default=0.0), 5),
        "passes": result.passes,
        "passes_planned": result.passes_planned,
        "simulated_hours": round(end / 3600, 2),
        "wall_s": round(wall_s, 1),
        "provider_errors": result.provider_errors[:20],
        # --provisioning-requests: the gangs' ProvisioningRequests, how many were made and how many reached
        # each condition; admission_wait: submission to Provisioned (part of pending_*).
        "provisioning_requests": None if result.requests is None else {
            **{k: result.requests.get(k, 0) for k in ("created", "Provisioned", "Failed", "CapacityRevoked",
                                                      "BookingExpired")},
            "admission_wait_p95_s": percentile(admitted, 0.95), "admission_wait_max_s": max(admitted, default=0.0),
            "booking_ttl_s": result.config.timings.booking_ttl,
        },
        "never_started": never,
        # Broken GPUs (--gpu-failure-rate), the scaler's repairs, and the work every stopped job lost since its
        # last checkpoint (--checkpoint-interval): scaler/sim/failures.py.
        "failures": {**result.failures.section(), "repair": any(p.repair.enabled for p in config.pools)},
        # Reserved pools and Capacity Blocks: window, cost, GPU-hours used / paid, jobs moved off an ending block.
        "prepaid": prepaid,
    }


SUMMARY_KEYS = (
    "scheduler", "jobs_completed", "jobs_total", "jobs_never_started", "demand_gpu_hours", "demand_done_gpu_hours",
    "demand_fractional_gpu_hours", "paid_gpu_hours", "paid_over_demand", "paid_over_demand_done",
    "cost_usd", "lower_bound_cost_usd", "on_demand_only_cost_usd", "static_fleet_cost_usd", "spot_share",
    "pending_p50_s", "pending_p95_s", "pending_max_s", "pending_1gpu_p50_s", "pending_1gpu_p95_s",
    "fallback_events", "fallback_delay_max_s", "interruptions", "rescheduled_pods", "plan_p50_s", "plan_max_s",
    "passes_planned", "simulated_hours", "wall_s", "warm_pools",
)


def summary(report: dict[str, Any]) -> str:
    width = max(len(k) for k in SUMMARY_KEYS)
    lines = [f"simulation of {report['trace']} with {report['pools_file']} ({report['placement']})"]
    lines += [f"  {k:<{width}}  {warm_text(report[k]) if k == 'warm_pools' else said(report[k])}" for k in SUMMARY_KEYS]
    lines += prepaid_lines(report.get("prepaid") or {}, width)
    lines += failure_lines(report.get("failures") or {}, width)
    spot = spot_line(report.get("spot"))
    if spot:
        lines.append(spot)
    lines.append(baseline_line(report))
    requests = report.get("provisioning_requests")
    if requests is not None:
        lines.append(f"  {'provisioning_requests':<{width}}  " + " ".join(f"{k}={v}" for k, v in requests.items()))
        lines += provisioning_requests_lines(requests)
    lines += never_started_lines(report)
    return "\n".join(lines)


def said(value: object) -> object:
    """A figure as the summary prints it: a figure that has no value in this run (no fallback happened, no node was
    repaired) is `none`, not Python's `None`."""
    return "none" if value is None else value


def warm_text(warm: dict[str, Any] | None) -> str:
    """The warm pools' line: their sizes, what they launched and started, their bill (in cost_usd already)."""
    if warm is None:
        return "none"
    sizes = ", ".join(f"{pool} {size}" for pool, size in sorted(warm["pools"].items()))
    return (f"{sizes}: {warm['instances']} instances launched, {warm['started']} started by scale-outs, "
            f"${warm['cost_usd']:,.2f} and {warm['paid_gpu_hours']:,.1f} GPU-h (in cost_usd and paid_gpu_hours)")


def failure_lines(failures: dict[str, Any], width: int) -> list[str]:
    """Work lost to stopped jobs; with --gpu-failure-rate, the failures and the repairs."""
    if not failures:
        return []
    lost = f"  {'gpu_hours_lost':<{width}}  {failures['gpu_hours_lost']} (checkpoint every " \
           f"{failures['checkpoint_interval_s']:g} s)"
    if not failures["rate_per_gpu_hour"]:
        return [lost]
    keys = ("gpu_failures", "healthy_gpu_hours", "failed_nodes", "repaired_nodes", "failed_nodes_left",
            "gpu_hours_lost_to_failures", "repair_delay_mean_s", "repair_delay_max_s")
    return [lost, f"  {'gpu_failures':<{width}}  " + " ".join(f"{k}={said(failures[k])}" for k in keys)
            + ("" if failures["repair"] else " (repair off)")
            + (" (pods restart in place)" if failures.get("restart_policy") == "OnFailure" else "")]


def baseline_line(report: dict[str, Any]) -> str:
    """The run's cost against the fleets without gpuburst: cluster-autoscaler's defaults on the same pools (when
    run: report.cluster_autoscaler), and report.baselines."""
    cost, static = report["cost_usd"], report["static_fleet"]
    ca = report.get("cluster_autoscaler")
    others = [(f"{CA_LABEL}, same pools", ca["cost_usd"] if ca else None),
              ("on-demand only", report["on_demand_only_cost_usd"]),
              (f"static fleet for the peak ({static['gpus']} GPUs, {static['hours']:g} h)",
               report["static_fleet_cost_usd"])]
    parts = [f"{label} ${other:,.0f} ({'saves' if cost <= other else 'costs'} {abs(1 - cost / other):.0%})"
             for label, other in others if other]
    if report.get("policy") == "cluster-autoscaler":
        return f"  cost ${cost:,.0f} ({CA_LABEL}) against " + ("; ".join(parts[1:]) or "no baseline")
    if ca is None:
        parts.insert(0, f"{CA_LABEL}: not run (--compare-cluster-autoscaler)")
    return f"  cost ${cost:,.0f} against " + "; ".join(parts)


def ca_section(ca: dict[str, Any]) -> dict[str, Any]:
    """The figures of the same run under cluster-autoscaler's defaults that the report quotes beside its own."""
    failures = ca.get("failures") or {}
    return {k: ca[k] for k in ("cost_usd", "paid_gpu_hours", "paid_over_demand", "spot_share", "pending_p95_s",
                               "jobs_completed", "jobs_never_started")} | {
        "gpu_hours_lost": failures.get("gpu_hours_lost")}


def provisioning_requests_lines(requests: dict[str, Any]) -> list[str]:
    """What the ProvisioningRequest counts mean, and a word when there was nothing to queue."""
    if not requests["created"]:
        return ["  (no job of this trace is a gang of more than one pod with these pools: --provisioning-requests "
                "queued nothing)"]
    minutes = requests["booking_ttl_s"] / 60
    return [f"  (BookingExpired: a Provisioned request's {minutes:g}-minute booking ran out before its job "
            "finished, the normal end of the request of any longer job, not a failure; CapacityRevoked: a booked "
            "node was lost before that)"]


def never_started_lines(report: dict[str, Any]) -> list[str]:
    """What never ran, per group of pods with the pools' reasons; the last line is the warning."""
    never = report["never_started"]
    if not never["jobs"]:
        return []
    more = never["jobs"] - len(never["first_job_ids"])
    ids = ", ".join(never["first_job_ids"]) + (f" and {more} more" if more > 0 else "")
    lines = ["never started (per group of pods alike, why each pool could not take them):"]
    for g in never["reasons"]:
        lines.append(f"  {g['pods']} pod(s) of {g['jobs']} job(s), {g['outcome']}:")
        lines += [f"      {', '.join(pools)}: {text}" for pools, text in reasons_by_text(g["per_pool"])]
    lines.append(f"warning: {never['jobs']} of {report['jobs_total']} jobs never started: {ids}")
    return lines


def one_line(report: dict[str, Any]) -> str:
    """The figures of a run on one line (bench/simulate_traces.py prints these)."""
    keys = ("scheduler", "jobs_completed", "jobs_total", "jobs_never_started", "demand_gpu_hours",
            "demand_fractional_gpu_hours", "paid_gpu_hours", "paid_over_demand", "paid_over_demand_done",
            "cost_usd", "lower_bound_cost_usd", "spot_share", "pending_p50_s", "pending_p95_s", "pending_max_s",
            "pending_1gpu_p95_s", "fallback_events", "fallback_delay_max_s", "plan_p50_s", "plan_max_s", "wall_s")
    ca = report.get("cluster_autoscaler")
    line = " ".join(f"{k}={report[k]}" for k in keys)
    return f"{line} on_demand_only_cost_usd={report['on_demand_only_cost_usd']}" + \
        (f" cluster_autoscaler_cost_usd={ca['cost_usd']}" if ca else "")
