"""Spot as the EC2 Spot Advisor's data says, and the baseline a buyer compares with (issue 40).

What a platform engineer reads off a run: each spot type priced at the advisor's saving for the region, reclaimed
at a rate from its interruption bucket, the data named in the summary, the overrides honoured, and the saving
quoted against cluster-autoscaler's defaults on the same pools.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sim_helpers import ROOT, SMALL_POOLS, write_trace

from scaler.core.config.catalogue import CATALOGUE, spot_advice
from scaler.sim.repair_plot import plot_repair, repair_pairs
from scaler.sim.report import summary
from scaler.sim.simulate_command import simulate
from scaler.sim.spot_advisor_derive import derive

ADVISOR = ROOT.parent / "shared" / "spot" / "spot-advisor-data.json"
ROWS = ["j1,0,1,3600,1", "j2,0,1,1800,1", "j3,1800,8,1800,1"]


@pytest.mark.skipif(not ADVISOR.exists(), reason="the advisor's data is not beside the repository")
def test_the_shipped_figures_are_the_advisors_for_every_aws_type_of_the_catalogue() -> None:
    shipped = (ROOT / "scaler" / "core" / "config" / "spot_advisor.py").read_text(encoding="utf-8")
    assert shipped == derive(json.loads(ADVISOR.read_text(encoding="utf-8")))
    # The us-east-1 figures; a type the advisor does not list (an Azure size) has no entry.
    assert (spot_advice("g6.xlarge", "us-east-1").savings_pct, spot_advice("g6.xlarge", "us-east-1").bucket_label) \
        == (49, ">20%")
    assert spot_advice("p4d.24xlarge", "us-east-1").bucket_label == "10-15%"
    assert spot_advice("Standard_NC4as_T4_v3", "eastus") is None
    assert spot_advice("p5.4xlarge", "us-east-1") is None  # in the catalogue, newer than the advisor's data


def test_spot_is_priced_at_the_advisors_saving_and_the_summary_names_the_data(tmp_path: Path) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump(SMALL_POOLS), encoding="utf-8")
    trace = write_trace(tmp_path / "t.csv", ROWS)
    result, report = simulate(str(trace), str(pools))
    spot = [i for i in result.provider.history if i.spot]
    assert spot
    for inst in spot:
        itype = CATALOGUE["g6.xlarge" if inst.gpus == 1 else "g6.48xlarge"]
        saving = spot_advice(itype.name, "us-east-1").savings_pct
        assert inst.price_per_hour == pytest.approx(itype.price_per_hour * (1 - saving / 100), abs=1e-4)
    rates = {p["instance_type"]: p["reclaims_per_hour"] for p in report["spot"]["pools"].values()}
    assert rates["g6.xlarge"] == pytest.approx(-math.log(1 - 0.25) / 730, rel=1e-3)  # ">20%": 25 % a month
    line = next(x for x in summary(report).splitlines() if x.startswith("  spot:"))
    assert "EC2 Spot Instance Advisor data, 2025-07" in line and "us-east-1" in line and "(>20%)" in line
    # The overrides: every spot pool at 0.4 x on-demand and reclaimed at the given rate.
    result, report = simulate(str(trace), str(pools), spot_price_factor=0.4, interruption_rate=0.2)
    assert {i.price_per_hour for i in result.provider.history if i.spot and i.gpus == 1} == \
        {round(CATALOGUE["g6.xlarge"].price_per_hour * 0.4, 4)}
    assert {(p["price"], p["reclaims"], p["reclaims_per_hour"]) for p in report["spot"]["pools"].values()} == \
        {("override", "override", 0.2)}


def test_azure_spot_is_the_documented_assumption_named_in_the_summary(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", ROWS[:1])
    _, report = simulate(str(trace), str(ROOT / "examples" / "pools-azure.yaml"))
    line = next(x for x in summary(report).splitlines() if x.startswith("  spot:"))
    assert "assumed for" in line and "spot_price_factor and the >20% bucket" in line
    assert all(p["price"] == "assumed" and p["bucket"] == ">20%" for p in report["spot"]["pools"].values())


def test_a_type_the_advisor_does_not_list_keeps_its_pools_own_price_and_is_reclaimed_at_the_worst_bucket(
        tmp_path: Path) -> None:
    # The dynamic MIG example prices its p5.4xlarge spot pools itself: only their reclaims are the assumption.
    trace = write_trace(tmp_path / "t.csv", ROWS[:1])
    _, report = simulate(str(trace), str(ROOT / "examples" / "pools-aws-mig-dynamic.yaml"), dra=True)
    mig = {n: p for n, p in report["spot"]["pools"].items() if p["instance_type"] == "p5.4xlarge"}
    assert sorted(mig) == ["mig-spot-a", "mig-spot-b"]
    assert {(p["price"], p["price_per_hour"], p["reclaims"], p["bucket"]) for p in mig.values()} == \
        {("pool price", 3.3024, "assumed", ">20%")}
    line = next(x for x in summary(report).splitlines() if x.startswith("  spot:"))
    assert "(assumed for mig-spot-a, mig-spot-b: no advisor entry, so the >20% bucket)" in line, line


def test_the_saving_is_quoted_against_cluster_autoscalers_defaults_on_the_same_pools(tmp_path: Path) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump(SMALL_POOLS), encoding="utf-8")
    trace = write_trace(tmp_path / "t.csv", [f"j{i},{i * 600},1,3600,1" for i in range(12)])
    out = subprocess.run([sys.executable, "-m", "scaler", "simulate", "--trace", str(trace), "--pools", str(pools),
                          "--quiet", "--compare-cluster-autoscaler", "--report", str(tmp_path / "r.json")],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    ca = report["cluster_autoscaler"]
    # CA's random expander ignores price: some of its nodes come from the on-demand pool gpuburst only falls back to.
    assert report["spot_share"] == 1.0 and ca["spot_share"] < 1.0
    assert ca["cost_usd"] > report["cost_usd"] and ca["jobs_completed"] == report["jobs_completed"]
    last = out.stdout.splitlines()[-2]  # then "report: ..."
    assert last.startswith(f"  cost ${report['cost_usd']:,.0f} against cluster-autoscaler defaults, same pools "
                           f"${ca['cost_usd']:,.0f} (saves {1 - report['cost_usd'] / ca['cost_usd']:.0%}); "
                           "on-demand only $"), last


@pytest.mark.parametrize(("args", "message"), [
    (["--spot-price-factor", "1.5"], "--spot-price-factor 1.5: must be above 0 and at most 1"),
    (["--spot-price-factor", "nan"], "--spot-price-factor nan: must be above 0 and at most 1"),
    (["--policy", "cluster-autoscaler", "--compare-cluster-autoscaler"],
     "--compare-cluster-autoscaler compares gpuburst's policy with it"),
    (["--compare-cluster-autoscaler", "--sweep", "unneeded_time=60", "--sweep-out", "x"],
     "--compare-cluster-autoscaler: a --sweep compares its runs with each other"),
])
def test_bad_spot_and_baseline_flags_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    trace = write_trace(tmp_path / "t.csv", ROWS[:1])
    out = subprocess.run([sys.executable, "-m", "scaler", "simulate", "--trace", str(trace), "--pools",
                          str(ROOT / "examples" / "pools-aws.yaml"), "--quiet", *args],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and message in out.stderr, out.stderr


def test_the_repair_plot_puts_repair_on_beside_off_for_each_trace_and_rate(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    runs = [({"trace": f"/t/{t}.csv", "gpu_failure_rate": rate, "repair": repair},
             {"cost_usd": 100.0 + repair, "failures": {"gpu_hours_lost": 5.0 - repair}, "demand_gpu_hours": 50.0,
              "demand_done_gpu_hours": 50.0})
            for t in ("PHILLY-A", "ALIBABA") for rate in (0.001, 0.01) for repair in (True, False)]
    # Pods restarting in place: their own pair, which the run without repair ends with work undone.
    runs += [({"trace": "/t/PHILLY-A.csv", "gpu_failure_rate": 0.01, "repair": repair, "restart_in_place": True},
              {"cost_usd": 100.0, "failures": {"gpu_hours_lost": 5.0}, "demand_gpu_hours": 50.0,
               "demand_done_gpu_hours": 50.0 if repair else 10.0}) for repair in (True, False)]
    runs.append(({"trace": "/t/PHILLY-A.csv"}, {"cost_usd": 1.0}))  # no failures: not in the chart
    pairs = repair_pairs(runs)
    assert sorted(pairs) == ["ALIBABA, 0.001/GPU-h", "ALIBABA, 0.01/GPU-h", "PHILLY-A, 0.001/GPU-h",
                             "PHILLY-A, 0.01/GPU-h", "PHILLY-A, 0.01/GPU-h, in place"]
    assert {k: sorted(v) for k, v in pairs.items()} == {k: [False, True] for k in pairs}
    plot_repair(pairs, tmp_path / "repair.png")
    assert (tmp_path / "repair.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
