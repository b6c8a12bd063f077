"""Gang jobs replayed the way Kueue queues them behind a ProvisioningRequest admission check: the job waits
with no pods, its request is served by the pass (scaler.core.planning.decide.decide, the call `scaler run` makes),
and its pods are created only once every node they need is up."""

from __future__ import annotations

from pathlib import Path

from sim_helpers import write_trace

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.planning import provreq
from scaler.core.planning.decide import decide
from scaler.core.planning.decisions import Plan
from scaler.core.planning.memo import Memo
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State
from scaler.providers.sim import SimProvider
from scaler.sim.engine import Engine
from scaler.sim.kueue import KUEUE_BACKOFF_S, KUEUE_RETRIES
from scaler.sim.records import SimResult
from scaler.sim.report import build_report, summary
from scaler.sim.trace import load_trace

ROWS = [
    "single,0,1,600,1",
    "gang-a,10,32,1800,4",  # 4 pods of 8 GPUs
    "gang-b,700,16,1200,2",
]


def _run(config: ScalerConfig, tmp_path: Path, rows: list[str]) -> tuple[SimResult, dict[str, object], list[Snapshot]]:
    seen: list[Snapshot] = []

    def watched(snapshot: Snapshot, state: State, cfg: ScalerConfig, memo: Memo | None) -> tuple[Plan, State]:
        seen.append(snapshot)
        return decide(snapshot, state, cfg, memo)

    jobs = load_trace(write_trace(tmp_path / "t.csv", rows))
    result = Engine(config, jobs, SimProvider(config), watched, provisioning_requests=True).run()
    report = build_report(result, trace="t.csv", pools_file="small", seed=0, outages=[], wall_s=0)
    return result, report, seen


def test_a_gang_is_admitted_only_when_all_its_nodes_are_up(small_config: ScalerConfig, tmp_path: Path) -> None:
    result, report, seen = _run(small_config, tmp_path, ROWS)
    assert report["jobs_completed"] == report["jobs_total"] == 3
    requests = report["provisioning_requests"]
    assert isinstance(requests, dict)
    assert (requests["created"], requests["Provisioned"], requests["Failed"]) == (2, 2, 0)  # the gangs only
    runs = {r.job.job_id: r for r in result.jobs}
    assert runs["single"].request is None and runs["single"].admitted_at is None
    for job_id in ("gang-a", "gang-b"):
        run = runs[job_id]
        assert run.request is not None and run.admitted_at is not None
        # Its pods exist from admission only, each consuming the request, and all bind at once: the
        # nodes were up (the request said Provisioned only then).
        assert all(p.annotations[keys.ANNOTATION_CONSUME_PROVREQ] == run.request.name for p in run.pods)
        assert run.first_start == run.admitted_at
        assert not any(p.key in {q.key for q in s.pending} for s in seen if s.now < run.admitted_at
                       for p in run.pods)
    # Before admission the planner was asked for gang-a's stand-ins (the atomic scale-up), not its pods.
    gang_a = runs["gang-a"]
    assert gang_a.admitted_at is not None
    assert gang_a.admitted_at - gang_a.job.submit_s <= small_config.timings.gpu_boot + 2 * \
        small_config.timings.scan_interval
    # Booked nodes stay while the booking lasts, and go once the jobs are done.
    assert result.provider.alive() == []
    assert "provisioning_requests" in summary(report)


def test_a_gang_no_pool_can_hold_is_retried_then_rejected_with_the_reason(small_config: ScalerConfig,
                                                                          tmp_path: Path) -> None:
    # 25 nodes of 8 GPUs: the 8-GPU pools stop at 10 + 10.
    result, report, seen = _run(small_config, tmp_path, ["huge,0,200,600,25", "single,30,1,600,1"])
    run = next(r for r in result.jobs if r.job.job_id == "huge")
    assert run.first_start is None and run.attempts == KUEUE_RETRIES + 1
    assert report["provisioning_requests"]["Failed"] == KUEUE_RETRIES + 1  # type: ignore[index]
    assert report["jobs_completed"] == 1 and report["jobs_never_started"] == 1
    assert result.provider.history and all(i.pool.startswith("gpu1") for i in result.provider.history)  # none
    # Kueue's backoff: 60 s doubling between attempts (the request is made on the scan grid).
    made = sorted({s.now for s in seen if any(r.name.startswith("job-huge") for r in s.requests)})
    assert made == [0.0, KUEUE_BACKOFF_S, KUEUE_BACKOFF_S * 3, KUEUE_BACKOFF_S * 7]
    group = next(g for g in report["never_started"]["reasons"] if g["outcome"] == "rejected")  # type: ignore[index]
    why = group["per_pool"]["*"]
    assert why.startswith("ProvisioningRequest CapacityIsNotFound: 25 pods fit no pool") and "at max" in why
    assert report["never_started"]["first_job_ids"] == ["huge"]  # type: ignore[index]
    assert result.end < 3600  # the run ends when the rest is done, not at the safety stop
    assert result.requests is not None and result.requests["created"] == KUEUE_RETRIES + 1
    assert run.request.class_name == provreq.ATOMIC_SCALE_UP  # type: ignore[union-attr]


def test_a_gang_still_queued_when_the_run_stops_is_reported_as_queued(small_config: ScalerConfig,
                                                                      tmp_path: Path) -> None:
    jobs = load_trace(write_trace(tmp_path / "t.csv", ["gang,0,16,600,2"]))
    result = Engine(small_config, jobs, SimProvider(small_config), decide, provisioning_requests=True,
                    max_time=0).run()  # stopped at the first pass: its nodes boot in 240 s
    report = build_report(result, trace="t.csv", pools_file="small", seed=0, outages=[], wall_s=0)
    [group] = report["never_started"]["reasons"]
    # Its pods do not exist yet: the report gives the request's answer, not a verdict on pods never created.
    assert group["outcome"] == "queued" and group["pods"] == 2
    assert group["per_pool"] == {"*": "ProvisioningRequest Provisioning: 2 of 2 pods wait for nodes to come up"}
