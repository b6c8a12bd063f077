"""`simulate --sweep` and `scaler tune` (issues 27 and 30): many simulations through scaler/sim/batch.py, on local
processes or Ray tasks, the trade-off table and PNG, the tuned pools file. Small: a short PHILLY-A prefix."""

from __future__ import annotations

import argparse
import csv
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from scaler.cli import main
from scaler.configfile import load_config
from scaler.sim import batch, tradeoff
from scaler.sim.simulate_command import simulate
from scaler.sim.trace import load_trace
from scaler.sim.tune import rank, write_pools
from scaler.sim.tune_space import candidates as designs
from scaler.sim.tune_space import space_of

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "scaler/sim/data/philly-sample.csv"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def short_trace(tmp_path: Path) -> Path:
    """The sample's first 40 jobs (1, 2, 4, 8 and 16-GPU jobs among them)."""
    lines = [x for x in SAMPLE.read_text(encoding="utf-8").splitlines() if not x.startswith("#")]
    path = tmp_path / "short.csv"
    path.write_text("\n".join(lines[:41]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def candidates(tmp_path: Path) -> Path:
    """../shared/pools/two-shapes.yaml (a copy of its content, so the test runs without shared/)."""
    data = {
        "cluster": "two-shapes", "cloud": "aws", "region": "us-east-1", "spot_price_factor": 0.35,
        "pools": [
            {"name": "cpu-spot", "role": "general", "capacity_type": "spot", "instance_types": ["m6i.12xlarge"],
             "zones": ["us-east-1a"], "max": 40},
            {"name": "small-spot", "capacity_type": "spot", "instance_types": ["g5.8xlarge"],
             "zones": ["us-east-1a"], "max": 400, "fallback": "small-od"},
            {"name": "big-spot", "capacity_type": "spot", "instance_types": ["p4d.24xlarge"], "zones": ["us-east-1a"],
             "fallback": "big-od", "min_pod_gpus": 2, "max": 200},
            {"name": "small-od", "instance_types": ["g5.8xlarge"], "zones": ["us-east-1a"], "max": 400},
            {"name": "big-od", "instance_types": ["p4d.24xlarge"], "zones": ["us-east-1a"], "min_pod_gpus": 2,
             "max": 200},
        ],
    }
    path = tmp_path / "candidates.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One local Ray instance for this module's Ray tests (`--ray local` uses it when it is up)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def runs(trace: Path, pools: Path) -> list[batch.Run]:
    data = yaml.safe_load(pools.read_text(encoding="utf-8"))
    return [batch.Run(f"max {m}", trace.read_text(encoding="utf-8"),
                      {**data, "scale_down": {"unneeded_time_max": m}}, {"hours": 6.0}) for m in (60, 600, 1800)]


def test_local_processes_give_the_figures_of_one_process(short_trace: Path, candidates: Path) -> None:
    one = batch.run_batch(runs(short_trace, candidates), workers=1, quiet=True)
    two = batch.run_batch(runs(short_trace, candidates), workers=2, quiet=True)
    strip = [{k: v for k, v in (f or {}).items() if k not in ("wall_s", "cpu_s")} for f in one.figures]
    assert strip == [{k: v for k, v in (f or {}).items() if k not in ("wall_s", "cpu_s")} for f in two.figures]
    assert len({f["paid_over_demand"] for f in strip}) > 1  # the knob changed something: the runs differ


@pytest.mark.usefixtures("local_ray")
def test_ray_tasks_give_the_figures_of_local_processes(short_trace: Path, candidates: Path) -> None:
    far = batch.run_batch(runs(short_trace, candidates), ray_address="local", quiet=True)
    near = batch.run_batch(runs(short_trace, candidates), workers=1, quiet=True)
    keys = ("paid_over_demand", "pending_p95_s", "cost_usd", "jobs_completed")
    assert [[(f or {})[k] for k in keys] for f in far.figures] == [[(f or {})[k] for k in keys] for f in near.figures]


def test_ctrl_c_returns_what_finished(short_trace: Path, candidates: Path) -> None:
    def stop(figures: list[dict[str, object] | None]) -> str:
        raise KeyboardInterrupt

    done = batch.run_batch(runs(short_trace, candidates), workers=1, best=stop, quiet=True)
    assert done.interrupted
    assert sum(f is not None for f in done.figures) == 1


def test_sweep_writes_table_and_plot_with_the_default_marked(short_trace: Path, candidates: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--trace", str(short_trace), "--pools", str(candidates), "--hours", "6",
                 "--sweep", "unneeded_time_max=60,1800", "--sweep", "unneeded_time_min=10,30", "--sweep-out",
                 str(tmp_path), "--workers", "2"])
    assert code == 0
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open(encoding="utf-8")))
    assert len(rows) == 1 + 4  # today's default, then every combination
    assert rows[0]["note"] == "today's default" and rows[0]["unneeded_time_max"] == ""
    assert {(r["unneeded_time_max"], r["unneeded_time_min"]) for r in rows[1:]} == \
        {("60.0", "10.0"), ("60.0", "30.0"), ("1800.0", "10.0"), ("1800.0", "30.0")}
    assert (tmp_path / "sweep.png").read_bytes().startswith(PNG)
    said = capsys.readouterr()
    assert "today's default" in said.out and "paid_over_demand" in said.out
    progress = [line for line in said.err.splitlines() if "best so far: " in line]  # the bill first, as the plot
    assert progress and all(re.search(r"best so far: (none yet|[^:]+: cost \$[\d,]+, p95 )", ln) for ln in progress)


@pytest.mark.parametrize(("sweep", "said"), [
    ("idle=1,2", "KNOB one of unneeded_time"),
    ("unneeded_time_max=60,abc", "values must be floats"),
    ("unneeded_time_min=700", "unneeded_time_min"),  # above the default maximum (600): the loader refuses
])
def test_sweep_refuses_bad_knobs_in_one_line(short_trace: Path, candidates: Path, tmp_path: Path, sweep: str,
                                             said: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--trace", str(short_trace), "--pools", str(candidates), "--sweep", sweep,
                 "--sweep-out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and said in err and err.count("\n") == 1
    assert not (tmp_path / "sweep.csv").exists()


@pytest.mark.parametrize("knob", ["buffer_gpus", "warm_size"])
def test_sweep_knobs_of_other_branches_work_once_the_simulator_has_them(
        short_trace: Path, candidates: Path, tmp_path: Path, knob: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--trace", str(short_trace), "--pools", str(candidates), "--hours", "2", "--quiet",
                 "--sweep", f"{knob}=0,1", "--sweep-out", str(tmp_path), "--workers", "1"])
    if knob in inspect.signature(simulate).parameters:
        assert code == 0
    else:
        assert code == 2 and f"has no {knob}" in capsys.readouterr().err


def tune(trace: Path, pools: Path, out: Path, *extra: str) -> int:
    return main(["tune", "--trace", str(trace), "--pools", str(pools), "--out", str(out), "--quiet",
                 "--candidates", "8", "--seed", "3", *extra])


def test_tune_writes_pools_that_pay_what_it_says(short_trace: Path, candidates: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tuned.yaml"
    assert tune(short_trace, candidates, out, "--p95-max", "600", "--workers", "2") == 0
    said = capsys.readouterr().out
    assert "chosen" in said and "Pareto" in said
    config = load_config(out)  # what `scaler run` reads
    assert any(p.gpus_per_node for p in config.pools)
    assert {"cpu-spot"} <= {p.name for p in config.pools}  # the file's CPU pool kept
    _, report = simulate(str(short_trace), str(out), seed=3)
    assert report["jobs_completed"] == report["jobs_total"]
    assert f"cost ${report['cost_usd']:,.0f}, p95 {report['pending_p95_s']} s, paid/demand " \
           f"{report['paid_over_demand']}" in said
    assert out.with_suffix(".png").read_bytes().startswith(PNG)


def test_tune_without_out_writes_under_out_and_its_progress_leads_with_cost(
        short_trace: Path, candidates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The progress names the best so far by what tune ranks by (cost), and the default file is git-ignored."""
    run = tmp_path / "clone"
    run.mkdir()
    monkeypatch.chdir(run)
    assert main(["tune", "--trace", str(short_trace), "--pools", str(candidates), "--p95-max", "600",
                 "--candidates", "3", "--seed", "3", "--workers", "1", "--hours", "0.5"]) == 0
    assert sorted(p.name for p in run.iterdir()) == ["out"]
    assert (run / "out/pools-tuned.yaml").is_file() and (run / "out/pools-tuned.png").is_file()
    progress = [line for line in capsys.readouterr().err.splitlines() if "best so far: " in line]
    assert progress and all(re.search(r"best so far: [^:]+: cost \$[\d,]+, p95 ", line) for line in progress)


@pytest.mark.usefixtures("local_ray")
def test_tune_on_ray_picks_the_candidate_local_processes_pick(short_trace: Path, candidates: Path,
                                                               tmp_path: Path) -> None:
    near, far = tmp_path / "near.yaml", tmp_path / "far.yaml"
    assert tune(short_trace, candidates, near, "--p95-max", "600", "--workers", "1") == 0
    assert tune(short_trace, candidates, far, "--p95-max", "600", "--ray", "local") == 0
    assert far.read_text(encoding="utf-8").splitlines()[1:] == near.read_text(encoding="utf-8").splitlines()[1:]


def test_tune_exits_1_naming_the_best_p95_when_nothing_meets_the_bound(
        short_trace: Path, candidates: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tuned.yaml"
    assert tune(short_trace, candidates, out, "--p95-max", "1", "--workers", "2") == 1
    err = capsys.readouterr().err
    assert "no candidate meets --p95-max 1: the best p95 found is" in err
    assert not out.exists()


def test_tune_refuses_candidates_without_a_gpu_pool(short_trace: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    pools = tmp_path / "cpu.yaml"
    pools.write_text(yaml.safe_dump({"cluster": "c", "cloud": "aws", "region": "us-east-1", "pools": [
        {"name": "cpu", "role": "general", "instance_types": ["m6i.large"], "zones": ["us-east-1a"], "max": 3}]}),
        encoding="utf-8")
    assert tune(short_trace, pools, tmp_path / "out.yaml", "--p95-max", "300") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no GPU pool" in err and str(pools) in err


def test_tune_ranks_by_cost_among_the_designs_that_meet_the_bound() -> None:
    def figures(cost: float, paid_over_demand: float, p95: float) -> dict[str, float]:
        return {"jobs_completed": 10, "jobs_total": 10, "pending_p95_s": p95, "paid_over_demand": paid_over_demand,
                "cost_usd": cost}

    tight = figures(2_640, 1.01, 240)  # less paid per demand, but $810 dearer
    cheap = figures(1_830, 1.05, 245)
    cheaper_but_late = figures(1_500, 1.00, 400)
    ranked = sorted([tight, cheap, cheaper_but_late], key=lambda f: rank(f, 260))
    assert ranked == [cheap, tight, cheaper_but_late]


def test_tune_hours_tunes_on_a_prefix_and_the_file_says_so(short_trace: Path, candidates: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tuned.yaml"
    assert tune(short_trace, candidates, out, "--p95-max", "600", "--workers", "2", "--hours", "0.5") == 0
    assert "p95 " in capsys.readouterr().out
    head = out.read_text(encoding="utf-8").splitlines()[:2]
    assert head[0].endswith("--seed 3 --hours 0.5")
    assert head[1].endswith("chosen on the jobs submitted in its first 0.5 h")


def test_an_interrupted_tune_says_its_pools_were_chosen_on_a_prefix(candidates: Path, tmp_path: Path) -> None:
    config = load_config(candidates)
    space = space_of(config, yaml.safe_load(candidates.read_text(encoding="utf-8")), str(candidates))
    jobs = load_trace(str(SAMPLE))
    chosen = designs(space, jobs, reclaims=False, buffers=(0,))[0]
    out = tmp_path / "tuned.yaml"
    args = argparse.Namespace(trace="t.csv", pools=str(candidates), p95_max=260.0, seed=0, hours=None, out=str(out))
    write_pools(args, space, chosen, interrupted=True, hours=0.4)
    text = out.read_text(encoding="utf-8")
    assert "# interrupted: the best so far, chosen on the jobs submitted in its first 0.4 h" in text
    load_config(out)  # still a pools file


def test_the_tradeoff_plot_does_not_blow_3_s_up_into_a_trade_off(tmp_path: Path) -> None:
    rows = [{"jobs_completed": 5, "jobs_total": 5, "cost_usd": cost, "pending_p95_s": p95, "pending_1gpu_p95_s": p95}
            for cost, p95 in ((1000, 245.0), (990, 246.0), (980, 248.0), (1100, 247.0))]
    drawn = tradeoff.plot(tmp_path / "t.png", rows, ["a", "b", "c", "dear"], "t")
    for low, high in drawn["x_limits"]:
        assert high - low >= 60 and low <= 245 and high >= 248
    assert drawn["labels"][0] == ["a", "b", "c"]  # the front is named; the dearer point is in the table
    assert (tmp_path / "t.png").read_bytes().startswith(PNG)
