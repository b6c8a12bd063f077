"""End-to-end simulations on small synthetic traces: the real planner through the sim provider."""

from __future__ import annotations

from pathlib import Path

from sim_helpers import SMALL_POOLS, write_trace

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model import keys
from scaler.core.planning.decide import decide
from scaler.core.planning.decisions import Plan
from scaler.core.planning.memo import Memo
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State
from scaler.core.scheduling.scoring import BINPACK, DEFAULT, ScoringProfile
from scaler.providers.sim import Outage, SimProvider
from scaler.sim.engine import Engine
from scaler.sim.records import SimResult
from scaler.sim.report import build_report
from scaler.sim.trace import load_trace

ROWS = [
    # 1-GPU jobs arriving in a burst, then trickling; 8-GPU jobs; a 16-GPU gang; one very short job.
    *[f"a{i},{i * 7},1,{600 + 60 * i},1" for i in range(12)],
    *[f"b{i},{300 + i * 90},8,{1800 + 300 * i},2" for i in range(3)],
    "c0,400,16,2400,4",
    "d0,4000,1,5,1",
    *[f"e{i},{5000 + i * 30},1,900,1" for i in range(6)],
]


def _run(config: ScalerConfig, tmp_path: Path, profile: ScoringProfile = DEFAULT,
         outages: list[Outage] | None = None, device_plugin_delay: float = 0.0) -> tuple[SimResult, dict[str, object]]:
    rows = sorted(ROWS, key=lambda r: int(r.split(",")[1]))
    jobs = load_trace(write_trace(tmp_path / "t.csv", rows))
    provider = SimProvider(config, outages=outages or [])
    result = Engine(config, jobs, provider, decide, profile=profile, device_plugin_delay=device_plugin_delay).run()
    report = build_report(result, trace="t.csv", pools_file="small", seed=0,
                          outages=[f"{o.zone}:{o.start}:{o.end}" for o in outages or []], wall_s=0)
    return result, report


def test_every_job_completes_and_the_cluster_returns_to_zero(small_config: ScalerConfig, tmp_path: Path) -> None:
    result, report = _run(small_config, tmp_path)
    assert report["jobs_completed"] == report["jobs_total"] == len(ROWS)
    boot, interval = small_config.timings.gpu_boot, small_config.timings.scan_interval
    assert report["pending_p95_s"] <= boot + 2 * interval  # type: ignore[operator]
    # Paid covers demand (nodes are whole and booting is paid) but not wildly more on this trace.
    assert report["demand_gpu_hours"] <= report["paid_gpu_hours"] <= 1.6 * report["demand_gpu_hours"]  # type: ignore[operator]
    assert report["spot_share"] == 1.0
    # Nothing left running: every GPU node was drained and removed after its unneeded time.
    assert result.provider.alive() == []
    last_done = max(r.completed_at or 0 for r in result.jobs)
    assert result.end >= last_done + small_config.scale_down.unneeded_time_min
    # The 16-GPU job ran as a gang of two 8-GPU pods, started together.
    gang = next(r for r in result.jobs if r.job.job_id == "c0")
    assert len(gang.pods) == 2 and gang.completed_at is not None
    # Skipping idle passes: far fewer planner calls than passes.
    assert result.passes_planned < result.passes / 3
    for inst in result.provider.history:
        pool = small_config.pool(inst.pool)
        assert sum(1 for i in result.provider.history if i.pool == inst.pool) <= 100
        assert pool.max_size >= 1


def test_binpack_packs_and_reports_its_profile(small_config: ScalerConfig, tmp_path: Path) -> None:
    _, report = _run(small_config, tmp_path, profile=BINPACK)
    assert report["scheduler"] == "binpack" and report["scheduler_name"] == "gpuburst-binpack"
    assert report["jobs_completed"] == report["jobs_total"]


def test_spot_outage_falls_back_within_two_passes(small_config: ScalerConfig, tmp_path: Path) -> None:
    outage = Outage("us-east-1a", 0, 7200)
    result, report = _run(small_config, tmp_path, outages=[outage])
    assert report["jobs_completed"] == report["jobs_total"]
    assert report["fallback_events"] >= 1
    assert report["fallback_delay_max_s"] is not None
    assert report["fallback_delay_max_s"] <= 2 * small_config.timings.scan_interval  # type: ignore[operator]
    # No spot node ever ran in the zone while it was out.
    for inst in result.provider.history:
        if inst.spot and inst.zone == "us-east-1a":
            assert inst.requested_at >= outage.end
    fallback_pools = {e.fallback_pool for e in result.episodes if e.fallback_pool}
    assert fallback_pools <= {"gpu1-spot-b", "gpu1-od", "gpu8-od"}
    assert "gpu8-od" in fallback_pools  # the 8-GPU pool has no spot pool in zone b


def test_gpus_published_late_are_waited_for_not_bought_twice(small_config: ScalerConfig, tmp_path: Path) -> None:
    """A GPU node that is Ready but whose device plugin has not published its GPUs yet is coming
    capacity: the planner must not buy another node for the pods waiting on it."""
    plain, plain_report = _run(small_config, tmp_path)
    late, late_report = _run(small_config, tmp_path, device_plugin_delay=60)
    assert late_report["jobs_completed"] == late_report["jobs_total"]
    assert len(late.provider.history) == len(plain.provider.history)
    assert late_report["pending_max_s"] == plain_report["pending_max_s"] + 60  # type: ignore[operator]


def test_spot_reclaims_send_pods_back_and_jobs_still_finish(small_config: ScalerConfig, tmp_path: Path) -> None:
    rows = sorted(ROWS, key=lambda r: int(r.split(",")[1]))
    jobs = load_trace(write_trace(tmp_path / "t.csv", rows))
    provider = SimProvider(small_config, interruption_rate=2.0, seed=3)
    result = Engine(small_config, jobs, provider, decide).run()
    assert result.interruptions > 0 and result.rescheduled_pods > 0
    assert all(r.completed_at is not None for r in result.jobs)
    # A job resumes: the run time it accumulated is its duration, however often it was interrupted.
    for run in result.jobs:
        assert abs(run.done_s - run.job.duration_s) < 1e-6


def test_reclaims_go_through_notices_drains_and_the_gangs_budgets(small_config: ScalerConfig, tmp_path: Path) -> None:
    """The simulator acts through the production actuator: a reclaim's notice drains the node through
    the Eviction API, which a gang job's PodDisruptionBudget refuses (429); the replacement is planned
    ahead of the reclaim; no pod is evicted on a node the cloud did not announce."""
    rows = sorted(ROWS, key=lambda r: int(r.split(",")[1]))
    jobs = load_trace(write_trace(tmp_path / "t.csv", rows))
    provider = SimProvider(small_config, interruption_rate=2.0, seed=3)
    engine = Engine(small_config, jobs, provider, decide)
    result = engine.run()
    assert all(r.completed_at is not None for r in result.jobs)
    assert result.evictions_refused > 0  # the gang's pods were protected by its budget
    assert engine.kube.events.get("SpotInterrupted", 0) >= result.interruptions > 0
    # Every drained node was removed (or taken by the cloud) and none is left cordoned.
    assert engine.actuator.drains == {}
    assert not any(n.unschedulable for n in engine.binder.nodes.values())


ZONAL_POOLS = {
    **SMALL_POOLS,
    "pools": [
        {"name": f"gpu1-spot-{z}", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": [f"us-east-1{z}"],
         "max": 20, "fallback": f"gpu1-od-{z}"} for z in "ab"
    ] + [
        {"name": f"gpu1-od-{z}", "instance_types": ["g6.xlarge"], "zones": [f"us-east-1{z}"], "max": 20} for z in "ab"
    ] + [
        {"name": "gpu1-od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a", "us-east-1b"], "max": 20},
    ],
}


def test_a_spot_outage_with_zone_pinned_pods_completes_without_extra_nodes(tmp_path: Path) -> None:
    """Two hours without spot in us-east-1a; half the jobs need us-east-1a (a zonal volume): they fall
    back to the on-demand pool of their zone, never to the multi-zone one (its group would pick the zone),
    and no zone ever has more nodes booting than pods waiting for one there."""
    config = parse_config(ZONAL_POOLS, "zonal-pools.yaml")
    rows = [f"z{i},{i * 120},1,{1800 + 60 * i},1" for i in range(40)]
    jobs = load_trace(write_trace(tmp_path / "t.csv", rows))
    seen: list[tuple[str, int, int]] = []

    def watched(snapshot: Snapshot, state: State, cfg: ScalerConfig, memo: Memo | None) -> tuple[Plan, State]:
        result, new = decide(snapshot, state, cfg, memo)
        registered = {n.provider_id for n in snapshot.nodes}
        for zone in ("us-east-1a", "us-east-1b"):
            waiting = sum(1 for p in snapshot.pending if p.node_selector.get(keys.LABEL_ZONE) == zone)
            booting = sum(1 for o in snapshot.pools.values() for m in o.members
                          if m.zone == zone and m.provider_id not in registered)
            asked = sum(u.count for u in result.scale_ups if u.zone == zone)
            if asked:  # a scale-up never asks for more than the waiting pods the booting nodes leave out
                seen.append((zone, booting + asked, waiting))
        return result, new

    provider = SimProvider(config, outages=[Outage("us-east-1a", 0, 7200)])
    engine = Engine(config, jobs, provider, watched)
    for i, run in enumerate(engine.runs):
        for p in run.pods:
            p.node_selector = {keys.LABEL_ZONE: "us-east-1a" if i % 2 == 0 else "us-east-1b"}
    result = engine.run()
    assert all(r.completed_at is not None for r in result.jobs)
    assert seen and all(booting <= waiting for _, booting, waiting in seen)
    assert not [i for i in provider.history if i.pool == "gpu1-od"]  # the multi-zone pool never grew
    assert [i for i in provider.history if i.pool == "gpu1-od-a"]  # the zone's own fallback did


def test_a_drain_is_carried_on_when_nothing_else_happens(tmp_path: Path) -> None:
    """A consolidation drain whose evicted pod binds at once leaves the cluster quiet for a day: the drain's next
    pass still comes (it removes the emptied node) instead of waiting for the next job event, a day of a paid,
    cordoned, empty 8-GPU node later."""
    config = parse_config({"cluster": "sim-test", "cloud": "aws", "region": "us-east-1", "pools": [
        {"name": "gpu8", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"],
         "max": 4}]}, "drain.yaml")
    # a and c fill one node; b gets a second node alone; when c ends, b is moved onto the first node.
    jobs = load_trace(write_trace(tmp_path / "t.csv", ["a,0,6,86400,1", "c,0,2,1000,1", "b,300,1,86400,1"]))
    result = Engine(config, jobs, SimProvider(config), decide).run()
    assert all(r.completed_at is not None for r in result.jobs)
    _, second = sorted(result.provider.history, key=lambda i: i.requested_at)
    assert second.end_reason == "deleted" and second.ended_at is not None
    c_done = next(r.completed_at for r in result.jobs if r.job.job_id == "c")
    assert c_done is not None
    assert second.ended_at <= c_done + 6 * config.timings.scan_interval
