"""The trace loader: both formats, errors naming file and line, jobs to pods (gangs, taints, requests)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import ROOT, write_trace

from scaler.configfile import load_config
from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.scheduling.predicates import fits
from scaler.sim.trace import TraceError, gang_split, job_group, job_pods, load_trace


@pytest.mark.parametrize(
    ("rows", "line", "message"),
    [
        (["1,0,1,60,1", "2,5,two,60,1"], 3, "gpus is 'two', not a number"),
        (["1,0,1,60,1", "2,5,1,60"], 3, "4 fields, the header has 5"),
        (["1,10,1,60,1", "2,5,1,60,1"], 3, "before the previous row's"),
        (["1,0,1,60,1", "1,5,1,60,1"], 3, "job_id '1' appears twice"),
        (["1,0,1.5,60,1"], 2, "gpus is '1.5', expected an integer"),
        (["1,0,1,-3,1"], 2, "duration_s is '-3', expected a finite number >= 0"),
    ],
)
def test_malformed_row_names_file_and_line(tmp_path: Path, rows: list[str], line: int, message: str) -> None:
    path = write_trace(tmp_path / "bad.csv", rows)
    with pytest.raises(TraceError) as err:
        load_trace(path)
    assert f"{path}:{line}:" in str(err.value)
    assert message in str(err.value)


def test_comment_lines_keep_line_numbers_true(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("# citation\n# more\njob_id,submit_s,gpus,duration_s,num_workers\n1,0,1,60,1\n2,1,x,60,1\n")
    with pytest.raises(TraceError, match=r"c\.csv:5: gpus is 'x'"):
        load_trace(path)


def test_unknown_header_and_missing_file(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "h.csv", ["1,0,1"], header="id,when,gpus")
    with pytest.raises(TraceError, match=r"h\.csv:1: unknown header"):
        load_trace(path)
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path / "missing.csv")


def test_alibaba_format_and_hours_filter(tmp_path: Path) -> None:
    path = write_trace(
        tmp_path / "a.csv",
        ["p1,10,1,100,470,3.152,5600,BE,Running", "p2,20,0,100,0,32.0,49152,LS,Running",
         "p3,7300,8,100,1000,64.2,263168,LS,Running"],
        header="job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status",
    )
    jobs = load_trace(path, hours=2)
    assert [j.job_id for j in jobs] == ["p1", "p2"]
    assert jobs[0].cpu_m == 3152 and jobs[0].memory == 5600 * 2**20 and jobs[0].gpu_milli == 470
    assert jobs[1].gpus == 0 and jobs[1].cpu_m == 32000


def test_exported_format_gives_the_jobs_requests_to_its_pods(small_config: ScalerConfig, tmp_path: Path) -> None:
    """`trace export`'s header (cpu and memory per job): a gang's pods share them, a GPU job without cpu
    keeps none (not the Philly default of 3 cores per GPU)."""
    path = write_trace(tmp_path / "k.csv", ["ns/train,0,16,600,4,64,262144", "ns/bare,5,1,60,1,0,0"],
                       header="job_id,submit_s,gpus,duration_s,num_workers,cpu,mem_mib")
    train, bare = load_trace(path)
    assert (train.num_workers, train.cpu_m, train.memory) == (4, 64000, 262144 * 2**20)
    gang = job_pods(train, small_config)
    assert len(gang) == 2 and {p.requests[keys.RES_CPU] for p in gang} == {32000}
    assert {p.requests[keys.RES_MEMORY] for p in gang} == {131072 * 2**20}
    assert job_pods(bare, small_config)[0].requests.get(keys.RES_CPU, 0) == 0


def test_gang_split() -> None:
    assert gang_split(8, 8) == (1, 8)
    assert gang_split(16, 8) == (2, 8)
    assert gang_split(24, 8) == (3, 8)
    assert gang_split(12, 8) == (2, 6)
    assert gang_split(1, 8) == (1, 1)


def test_big_job_becomes_a_gang_that_tolerates_only_what_it_reaches(small_config: ScalerConfig,
                                                                    tmp_path: Path) -> None:
    jobs = load_trace(write_trace(tmp_path / "t.csv", ["j1,0,32,600,16", "j2,1,1,60,1"]))
    gang = job_pods(jobs[0], small_config)
    assert len(gang) == 4
    assert {p.scheduling_group for p in gang} == {"j1"}  # one Workload API PodGroup, minCount all four
    assert {job_group(p, len(gang)).min_count for p in gang} == {4}
    assert all(p.requests[keys.RES_GPU] == 8 for p in gang)
    by_pool = {p.name: p.template_node() for p in small_config.pools}
    assert fits(gang[0], by_pool["gpu8-spot-a"])
    single = job_pods(jobs[1], small_config)[0]
    assert single.requests[keys.RES_GPU] == 1
    # The 1-GPU pod tolerates the GPU taint but not the 8-GPU pools' min-gpus taint.
    assert fits(single, by_pool["gpu1-spot-a"])
    assert not fits(single, by_pool["gpu8-spot-a"])
    assert not any(t.key == keys.TAINT_MIN_GPUS for t in single.tolerations)


def test_bundled_sample_loads_with_citation() -> None:
    path = ROOT / "scaler" / "sim" / "data" / "philly-sample.csv"
    assert "USENIX ATC '19" in path.read_text(encoding="utf-8").split("job_id")[0]
    jobs = load_trace(path)
    assert len(jobs) == 300
    # Every job of the sample fits some pool of the example pools, one pod or a gang.
    config = load_config(ROOT / "examples" / "pools-aws.yaml")
    templates = [p.template_node() for p in config.pools]
    for job in jobs:
        for pod in job_pods(job, config):
            assert any(fits(pod, t) for t in templates), job
