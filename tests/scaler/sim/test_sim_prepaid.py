"""Reserved pools, Capacity Blocks and quotas in the simulator: the cloud keeps a block's instances inside its
window, the report charges the whole window and shows its use and the jobs moved off it, `--quota` caps a family."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from sim_helpers import ROOT, SMALL_POOLS, write_trace

from scaler.cli import main
from scaler.configfile import load_config
from scaler.core.config.settings import parse_config
from scaler.providers.sim import SimProvider
from scaler.sim.plot import cumulative_cost
from scaler.sim.simulate_command import simulate

HOUR = 3600.0
BLOCK = {"name": "gpu8-block", "capacity_type": "capacity-block", "instance_types": ["p5.48xlarge"],
         "zones": ["us-east-1a"], "min_pod_gpus": 8, "max": 2, "fallback": "gpu8-spot-a",
         "reservation": {"id": "cr-0123456789abcdef0", "start": 0, "end": 10 * HOUR}}
P5_PRICE = 55.04  # the catalogue's p5.48xlarge list price


def pools_with_block(tmp_path: Path, **block: Any) -> Path:
    data = copy.deepcopy(SMALL_POOLS)
    data["pools"].insert(0, {**copy.deepcopy(BLOCK), **block})
    path = tmp_path / "pools-block.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def run(tmp_path: Path, pools: Path, rows: list[str], *extra: str) -> dict[str, Any]:
    trace = write_trace(tmp_path / "trace.csv", rows)
    out = tmp_path / "report.json"
    assert main(["simulate", "--trace", str(trace), "--pools", str(pools), "--quiet", "--report", str(out),
                 *extra]) == 0
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return report


def test_a_blocks_instances_exist_only_inside_its_window() -> None:
    data = copy.deepcopy(SMALL_POOLS)
    data["pools"].insert(0, {**copy.deepcopy(BLOCK), "reservation": {**BLOCK["reservation"], "start": HOUR}})
    cloud = SimProvider(parse_config(data, "pools.yaml"))
    cloud.set_desired("gpu8-block", 1)
    failures = cloud.observe(60)["gpu8-block"].failures
    assert cloud.observe(60)["gpu8-block"].instances == 0
    assert {f.reason for f in failures} == {"InsufficientInstanceCapacity"}
    assert "not active" in failures[0].message
    cloud.advance(HOUR)
    assert cloud.observe(HOUR + 1)["gpu8-block"].instances == 1
    ended = cloud.advance(10 * HOUR - 1800)  # EC2 terminates a block's instances 30 minutes before its end
    assert [i.end_reason for i in ended.interrupted] == ["block-ended"]
    assert cloud.observe(10 * HOUR)["gpu8-block"].instances == 0


def test_an_unused_block_is_charged_for_its_whole_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = run(tmp_path, pools_with_block(tmp_path), ["j1,0,1,3600,1"])
    block = report["prepaid"]["gpu8-block"]
    assert block["cost_usd"] == pytest.approx(2 * 10 * P5_PRICE)
    assert block["paid_gpu_hours"] == 2 * 8 * 10
    assert block["used_gpu_hours"] == 0 and block["utilisation"] == 0
    assert report["cost_usd"] >= 2 * 10 * P5_PRICE
    assert report["paid_gpu_hours"] >= 160
    assert "prepaid gpu8-block" in capsys.readouterr().out


def test_a_block_is_filled_before_spot_and_its_use_reported(tmp_path: Path) -> None:
    report = run(tmp_path, pools_with_block(tmp_path), ["j1,0,8,7200,1", "j2,0,8,7200,1"])
    block = report["prepaid"]["gpu8-block"]
    assert report["jobs_completed"] == 2
    assert block["used_gpu_hours"] == pytest.approx(2 * 8 * 2, rel=0.01)
    assert block["utilisation"] == pytest.approx(32 / 160, rel=0.01)


def test_jobs_are_moved_off_a_block_before_it_ends(tmp_path: Path) -> None:
    # A 1-pod 8-GPU job of 6 hours submitted 2 hours before the block's end: drained at the drain lead (40 min
    # before the end), it resumes on the next rung and completes; none is left for EC2 to terminate.
    report = run(tmp_path, pools_with_block(tmp_path), ["j1,21600,8,21600,1"])
    block = report["prepaid"]["gpu8-block"]
    assert report["jobs_completed"] == 1
    assert block["jobs_moved_off"] == 1
    assert block["jobs_lost_at_end"] == []
    assert block["used_gpu_hours"] > 0


def test_a_gang_is_moved_off_a_block_together_before_it_ends(tmp_path: Path) -> None:
    # A 16-GPU gang (2 pods of 8, their budget minAvailable = 2 refuses every eviction) running on the block
    # when its drain starts: its pods are deleted together and the gang resumes on the next rung, so EC2 takes
    # none of it at the end (evictions alone left it there until EC2 did: fails on main).
    report = run(tmp_path, pools_with_block(tmp_path), ["g1,21600,16,21600,1"])
    block = report["prepaid"]["gpu8-block"]
    assert report["jobs_completed"] == 1
    assert block["used_gpu_hours"] > 16 * 3  # on both of the block's nodes until its drain
    assert block["jobs_lost_at_end"] == []
    assert block["jobs_moved_off"] == 1


def test_a_spot_g_quota_of_zero_sends_1_gpu_jobs_to_on_demand_within_two_passes(
        tmp_path: Path, pools_file: Path) -> None:
    rows = [f"j{i},{i * 300},1,1800,1" for i in range(12)]
    report = run(tmp_path, pools_file, rows, "--quota", "G-spot=0")
    assert report["jobs_completed"] == 12
    assert report["spot_share"] == 0
    assert report["quotas"] == {"G-spot": 0}
    assert report["fallback_events"] >= 1  # the jobs that did not find a node freed by an earlier one
    assert report["fallback_delay_max_s"] <= 2 * report["timings"]["scan_interval"]
    assert report["pending_p95_s"] <= report["timings"]["gpu_boot"] + 2 * report["timings"]["scan_interval"]


@pytest.mark.parametrize(("value", "message"), [
    ("G-spot", "--quota G-spot: expected FAMILY=VCPUS"),
    ("X-spot=4", "--quota X-spot=4: expected FAMILY=VCPUS"),
    ("G-spot=-1", "--quota G-spot=-1: VCPUS must be a whole number"),
    ("G-spot=lots", "--quota G-spot=lots: VCPUS must be a whole number"),
    ("P-spot=8", "--quota P-spot=8: no pool of the pools file counts against P-spot"),
])
def test_bad_quota_is_one_line_naming_the_flag(tmp_path: Path, pools_file: Path, capsys: pytest.CaptureFixture[str],
                                               value: str, message: str) -> None:
    trace = write_trace(tmp_path / "trace.csv", ["j1,0,1,60,1"])
    assert main(["simulate", "--trace", str(trace), "--pools", str(pools_file), "--quota", value]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_the_reserved_example_is_the_usual_pools_plus_a_32_gpu_block_for_5_days() -> None:
    usual = load_config(str(ROOT / "examples/pools-aws.yaml"))
    config = load_config(str(ROOT / "examples/pools-aws-reserved.yaml"))
    blocks = [p for p in config.pools if p.capacity_type == "capacity-block"]
    assert [p.name for p in config.pools if not p.prepaid] == [p.name for p in usual.pools]
    assert [(p.max_size * p.gpus, p.reservation and (p.reservation.start, p.reservation.end)) for p in blocks] == \
        [(32, (0.0, 5 * 86400.0))]


def test_on_a_slice_of_philly_a_a_spot_g_quota_of_zero_sends_1_gpu_jobs_to_on_demand_within_two_passes(
        tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert main(["simulate", "--trace", str(ROOT / "scaler/sim/data/philly-sample.csv"), "--hours", "3",
                 "--pools", str(ROOT / "examples/pools-aws.yaml"), "--quota", "G-spot=0", "--quiet",
                 "--report", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["jobs_completed"] == report["jobs_total"] > 10
    assert report["spot_share"] == 0  # every GPU pool of the example is of the G class
    assert report["fallback_events"] >= 1
    assert report["fallback_delay_max_s"] <= 2 * report["timings"]["scan_interval"]


def test_the_plots_cost_line_ends_at_the_reports_cost_block_included(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace.csv", ["j1,0,8,7200,1", "j2,0,1,3600,1"])
    result, report = simulate(str(trace), str(pools_with_block(tmp_path)))
    assert report["prepaid"]["gpu8-block"]["cost_usd"] > 0
    assert result.end < 10 * HOUR  # the run ends before the block: the block is paid to its end all the same
    assert cumulative_cost(result, [10 * HOUR])[0] == pytest.approx(report["cost_usd"], abs=0.01)
