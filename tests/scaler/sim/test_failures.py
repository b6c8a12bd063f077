"""Broken GPUs in the simulator (`--gpu-failure-rate`), the scaler's repairs, and the work stopped jobs lose
since their last checkpoint (`--checkpoint-interval`): scaler/sim/failures.py."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sim_helpers import ROOT, SMALL_POOLS, write_trace

from scaler.cli import main
from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod
from scaler.core.planning.decide import decide
from scaler.core.scheduling.scoring import DEFAULT
from scaler.providers.sim import SimProvider
from scaler.sim.binder import Binder
from scaler.sim.engine import Engine
from scaler.sim.failures import GpuFailures, kept_progress
from scaler.sim.records import SimResult
from scaler.sim.trace import load_trace

SNAPSHOT = ROOT / "examples" / "snapshot-aws.json"
POOLS = ROOT / "examples" / "pools-aws.yaml"
# Long 8-GPU and 1-GPU jobs: hours of GPU time for failures to hit.
ROWS = sorted([*[f"g{i},{i * 600},8,{4 * 3600},1" for i in range(4)],
               *[f"s{i},{i * 300},1,{3 * 3600},1" for i in range(6)]], key=lambda r: int(r.split(",")[1]))


def _run(config: ScalerConfig, tmp_path: Path, *, rate: float, checkpoint: float = 1800.0,
         repair: bool = True, interruptions: float = 0.0, rows: list[str] = ROWS, in_place: bool = False) -> SimResult:
    if not repair:
        config = config.model_copy(update={"pools": [
            p.model_copy(update={"repair": p.repair.model_copy(update={"enabled": False})}) for p in config.pools]})
    jobs = load_trace(write_trace(tmp_path / "t.csv", rows))
    provider = SimProvider(config, interruption_rate=interruptions, seed=1)
    return Engine(config, jobs, provider, decide, failures=GpuFailures(rate, 1, checkpoint, in_place)).run()


def test_kept_progress_is_the_last_checkpoint() -> None:
    assert kept_progress(4000.0, 1800.0) == 3600.0
    assert kept_progress(1799.0, 1800.0) == 0.0
    assert kept_progress(4000.0, 0.0) == 4000.0  # 0: nothing is lost


def test_failed_gpus_are_repaired_and_every_job_finishes(small_config: ScalerConfig, tmp_path: Path) -> None:
    adaptive = _run(small_config, tmp_path, rate=0.05).failures.section()
    # With the adaptive unneeded time an emptied broken node may be removed as idle before its repair's
    # grace: gone either way, none left.
    assert adaptive["gpu_failures"] and adaptive["repaired_nodes"] and adaptive["failed_nodes_left"] == 0
    # With idle nodes kept 600 s (the repair grace), every failed node is repaired.
    fixed = small_config.model_copy(update={"timings": small_config.timings.model_copy(update={"unneeded_time": 600})})
    result = _run(fixed, tmp_path, rate=0.05)
    f = result.failures.section()
    assert all(r.completed_at is not None for r in result.jobs)
    assert f["gpu_failures"] and f["repaired_nodes"] == f["failed_nodes"] and f["failed_nodes_left"] == 0
    # A broken node left with no GPU pod is replaced at once (it used to wait for the 10-minute grace); one still
    # running pods goes after the grace at the earliest, and never later than its hold allows.
    assert f["repair_delay_mean_s"] < 600  # type: ignore[operator]
    assert f["repair_delay_max_s"] < 600 + 4 * 3600  # type: ignore[operator]
    assert f["gpu_hours_lost_to_failures"] > 0  # type: ignore[operator]
    # A job's accumulated run is its duration, whatever it lost on the way (redone, not counted twice).
    for run in result.jobs:
        assert abs(run.done_s - run.job.duration_s) < 1e-6


def test_without_repair_a_broken_node_stays_until_it_is_idle(small_config: ScalerConfig, tmp_path: Path) -> None:
    on = _run(small_config, tmp_path, rate=0.05).failures.section()
    off = _run(small_config, tmp_path, rate=0.05, repair=False).failures.section()
    assert off["repaired_nodes"] == 0 and off["gpu_failures"]
    assert on["repaired_nodes"]


def test_repair_on_and_off_face_the_same_fault_process(tmp_path: Path) -> None:
    """Common random numbers on exposure: in both runs the k-th failure strikes once the healthy GPUs have run the
    same GPU-hours, so a run sees more failures only by running more healthy GPU-hours (they used to be keyed by
    the k-th node of a pool: once a repair bought a replacement, the k-th node was another node at another time and
    the runs drew different failures). 4-GPU nodes of 1-GPU jobs: repair drains a broken node its healthy GPUs
    would have kept."""
    config = parse_config({**SMALL_POOLS, "pools": [
        {"name": "gpu4", "instance_types": ["g6.12xlarge"], "zones": ["us-east-1a"], "max": 20}]}, "p.yaml")
    rows = [f"s{i},{i * 60},1,{6 * 3600},1" for i in range(12)]
    on = _run(config, tmp_path, rate=0.2, rows=rows).failures
    off = _run(config, tmp_path, rate=0.2, rows=rows, repair=False).failures
    assert on.section()["repaired_nodes"] and not off.section()["repaired_nodes"]
    strikes_on, strikes_off = [e for *_, e in on.log], [e for *_, e in off.log]
    both = min(len(strikes_on), len(strikes_off))
    assert both >= 5
    assert strikes_on[:both] == pytest.approx(strikes_off[:both])
    more, fewer = (on, off) if on.failures > off.failures else (off, on)
    assert all(e > fewer.exposure_gpu_s for *_, e in more.log[fewer.failures:])  # only the extra exposure's


def test_pods_that_restart_in_place_on_a_dead_gpu_finish_only_with_repair(tmp_path: Path) -> None:
    """`--restart-policy OnFailure`: the kubelet restarts a container on the devices it was given, the dead GPU
    among them, so the pod crash-loops and its job stops until something deletes the pod. With repair its status
    (the device Unhealthy) puts nothing at stake and the node goes; without, the job never ends. 8-GPU jobs on
    8-GPU nodes (a failure always strikes one) and a 2-node gang, whose budget lets a pod that is not Ready go."""
    rows = sorted([*[f"g{i},{i * 600},8,{4 * 3600},1" for i in range(3)], f"gang,300,16,{4 * 3600},2"],
                  key=lambda r: int(r.split(",")[1]))
    config = parse_config({**SMALL_POOLS, "pools": [
        {"name": "gpu8", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "max": 20}]}, "p.yaml")
    on = _run(config, tmp_path, rate=0.02, rows=rows, in_place=True)
    off = _run(config, tmp_path, rate=0.02, rows=rows, repair=False, in_place=True)
    assert on.failures.failures and off.failures.failures
    assert all(r.completed_at is not None for r in on.jobs)
    stuck = [r.job.job_id for r in off.jobs if r.completed_at is None]
    assert "gang" in stuck and off.failures.section()["failed_nodes_left"]  # the gang finished only with repair
    # The pods it made again are only those repair moved: a struck pod is never made again by its failure.
    assert off.rescheduled_pods == 0 < on.rescheduled_pods


def test_the_checkpoint_interval_charges_reclaimed_jobs(small_config: ScalerConfig, tmp_path: Path) -> None:
    free = _run(small_config, tmp_path, rate=0.0, checkpoint=0.0, interruptions=0.5)
    charged = _run(small_config, tmp_path, rate=0.0, checkpoint=1800.0, interruptions=0.5)
    assert free.interruptions and free.failures.lost_gpu_s == 0.0
    assert charged.failures.lost_gpu_s > 0.0
    assert charged.failures.section()["gpu_failures"] == 0


@pytest.mark.parametrize(("extra", "message"), [
    (["--gpu-failure-rate", "-1"], "--gpu-failure-rate -1.0: must be a finite number >= 0"),
    (["--gpu-failure-rate", "5"], "--gpu-failure-rate 5: at most 1 failures per GPU-hour"),
    (["--checkpoint-interval", "nan"], "--checkpoint-interval nan: must be a finite number >= 0"),
    (["--no-repair"], "--no-repair: without --gpu-failure-rate no GPU breaks, so it would change nothing"),
    (["--restart-policy", "OnFailure"], "--restart-policy OnFailure: without --gpu-failure-rate no GPU breaks"),
])
def test_bad_failure_options_are_one_line_and_exit_2(tmp_path: Path, pools_file: Path,
                                                     capsys: pytest.CaptureFixture[str], extra: list[str],
                                                     message: str) -> None:
    trace = write_trace(tmp_path / "t.csv", ["j1,0,1,600,1"])
    assert main(["simulate", "--trace", str(trace), "--pools", str(pools_file), "--quiet", *extra]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert message in line


def test_the_summary_shows_failures_and_lost_work(tmp_path: Path, pools_file: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.csv", ROWS)
    assert main(["simulate", "--trace", str(trace), "--pools", str(pools_file), "--quiet",
                 "--gpu-failure-rate", "0.05", "--no-repair"]) == 0
    out = capsys.readouterr().out
    assert "gpu_hours_lost " in out and "(checkpoint every 1800 s)" in out
    assert "repaired_nodes=0" in out and "(repair off)" in out


def test_explain_says_why_a_node_is_repaired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The example snapshot with its GPU node reporting an XID error for 20 minutes and a second node that lost
    its GPU just now and runs no pod: the first is repaired (its pod planned on a replacement); the second would be
    replaced at once (nothing to lose, no grace to wait), but the pool's budget has one node in repair already."""
    data = json.loads(SNAPSHOT.read_text())
    [gpu] = [o for o in data["items"] if o["kind"] == "Node" and o["metadata"]["name"] == "ip-10-0-1-40.ec2.internal"]
    fresh = copy.deepcopy(gpu)
    fresh["metadata"]["name"] = "ip-10-0-1-41.ec2.internal"
    fresh["spec"]["providerID"] = fresh["spec"]["providerID"].replace("1-40", "1-41") + "x"
    fresh["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    latest = max(o["metadata"].get("creationTimestamp", "") for o in data["items"])
    at = datetime.fromisoformat(latest.replace("Z", "+00:00")) - timedelta(minutes=20)
    gpu["status"]["conditions"].append({"type": "GpuXidError", "status": "True", "reason": "Xid79",
                                        "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ")})
    data["items"].append(fresh)
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps(data))
    assert main(["explain", "--snapshot", str(snapshot), "--pools", str(POOLS)]) == 0
    out = capsys.readouterr().out
    assert "remove node ip-10-0-1-40.ec2.internal of gpu1-spot-a: repair: condition GpuXidError=True (Xid79)" in out
    assert ("  node ip-10-0-1-40.ec2.internal (gpu1-spot-a): condition GpuXidError=True (Xid79): repair started: "
            "cordon, replacement planned ahead, drain, its instance given back") in out
    assert ("  node ip-10-0-1-41.ec2.internal (gpu1-spot-a): 1 of 1 GPU devices not allocatable: not repaired now: "
            "1 of 2 node(s) in repair, the budget (20 %); 1 more unhealthy node(s) wait") in out


@pytest.mark.parametrize("repair", [True, False])
def test_a_job_that_redoes_lost_work_past_the_safety_stop_still_finishes(small_config: ScalerConfig, tmp_path: Path,
                                                                        repair: bool) -> None:
    """The safety stop (a day past the trace's last end) used to cut off a long job that failures kept sending back
    to its last checkpoint: PHILLY-A at 0.01 with repair ended 4726/4727, its 948-hour 16-GPU job still running.
    A 20-hour 8-GPU job at 0.2 failures per GPU-hour with hourly checkpoints needs days: it ends, and the run
    with it."""
    result = _run(small_config, tmp_path, rate=0.2, checkpoint=3600.0, repair=repair, rows=[f"g0,0,8,{20 * 3600},1"])
    [run] = result.jobs
    assert run.completed_at is not None and run.completed_at > 20 * 3600 + 86400
    assert abs(run.done_s - 20 * 3600) < 1e-6
    assert result.end >= run.completed_at


def test_a_failure_strikes_running_work_first_the_most_at_stake_first() -> None:
    """Which GPU a failure's pick strikes, along a fixed order that keeps the choice uniform and makes the same pick
    stop the same kind of job in repair on and off: the held GPUs first, the longest run since its last checkpoint
    first, then the free ones. An 8-GPU node: a 4-GPU pod 1000 s past its checkpoint, a 2-GPU pod 200 s past it
    (it started later), 2 GPUs free."""
    failures = GpuFailures(1e-6, 0, 1800.0)
    binder = Binder({DEFAULT.scheduler_name: DEFAULT})
    node = Node("n", allocatable={keys.RES_GPU: 8}, capacity={keys.RES_GPU: 8})
    late = Pod("a-late", "trace", requests={keys.RES_GPU: 2}, node_name="n", started_at=3400.0)
    early = Pod("b-early", "trace", requests={keys.RES_GPU: 4}, node_name="n", started_at=2600.0)
    node.pods = [late, early]
    binder.add_node(node)
    failures.watch(node, 0.0)
    failures.watch(node, 3600.0)  # its GPUs still all healthy at 3600 s: the clock the picks are read at
    assert [failures.struck(binder, d) for d in (0.0, 0.49, 0.5, 0.74)] == [(node, early)] * 2 + [(node, late)] * 2
    assert failures.struck(binder, 0.75) == failures.struck(binder, 0.99) == (node, None)
