"""What a reader of the report and the timeline decides with: the baselines' costs, and a chart that shows the event."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from sim_helpers import ROOT, SMALL_POOLS, write_trace

from scaler.configfile import load_config
from scaler.core.config.catalogue import CATALOGUE
from scaler.sim.plot import PENDING_COLOUR, plot_timeline, pool_colours
from scaler.sim.report import summary
from scaler.sim.simulate_command import simulate

pytest.importorskip("matplotlib")

ROWS = ["j1,0,1,3600,1", "j2,0,1,1800,1", "j3,1800,8,1800,1"]


def test_static_fleet_is_sized_for_the_peak_and_on_demand_only_reprices_the_same_nodes(
        tmp_path: Path, pools_file: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", ROWS)
    _, report = simulate(str(trace), str(pools_file), spot_price_factor=0.4, interruption_rate=0.0)
    l4, l40s8 = CATALOGUE["g6.xlarge"].price_per_hour, CATALOGUE["g6.48xlarge"].price_per_hour
    # Two 1-GPU jobs at once, one 8-GPU job; on-demand nodes up for the hour the trace lasts with no wait.
    assert report["static_fleet"]["nodes"] == {"gpu1-od": 2, "gpu8-od": 1}
    assert report["static_fleet"]["gpus"] == 10
    assert report["static_fleet_cost_usd"] == pytest.approx(2 * l4 + l40s8, abs=0.01)
    # Every node ran on spot at 0.4 x on-demand (--spot-price-factor 0.4): the same nodes on demand cost 2.5 x.
    assert report["spot_share"] == 1.0
    assert report["on_demand_only_cost_usd"] == pytest.approx(report["cost_usd"] / 0.4, rel=1e-3)
    line = summary(report).splitlines()[-1]
    assert re.fullmatch(r"  cost \$[\d,]+ against cluster-autoscaler defaults: not run "
                        r"\(--compare-cluster-autoscaler\); on-demand only \$[\d,]+ \(saves 60%\); "
                        r"static fleet for the peak "
                        r"\(10 GPUs, 1 h\) \$[\d,]+ \(saves \d+%\)", line), line


def test_pool_colours_come_from_the_pools_file_never_red_and_all_different() -> None:
    config = load_config(ROOT / "examples" / "pools-aws.yaml")
    colours = pool_colours(config)
    assert set(colours) == {p.name for p in config.pools if p.gpus_per_node}
    assert len(set(colours.values())) == len(colours)
    assert PENDING_COLOUR not in colours.values()
    assert pool_colours(load_config(ROOT / "examples" / "pools-aws.yaml")) == colours


def test_a_pool_keeps_its_colour_whatever_else_the_run_used(tmp_path: Path, pools_file: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", ROWS)
    plain, _ = simulate(str(trace), str(pools_file))
    outage, _ = simulate(str(trace), str(pools_file), outages=["us-east-1a:0:7200"])
    first = plot_timeline(plain, tmp_path / "a.png")
    second = plot_timeline(outage, tmp_path / "b.png")
    assert set(first.colours) != set(second.colours)  # the outage brought other pools in
    for pool in set(first.colours) & set(second.colours):
        assert first.colours[pool] == second.colours[pool], pool


def test_outage_is_shaded_with_its_fallbacks_and_the_costs_are_on_the_chart(tmp_path: Path, pools_file: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", ROWS)
    result, report = simulate(str(trace), str(pools_file), outages=["us-east-1a:0:7200"])
    drawn = plot_timeline(result, tmp_path / "t.png", report=report)
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert drawn.outages_hours == [(0.0, 2.0)]
    assert "no spot capacity in us-east-1a" in drawn.legend
    assert report["fallback_events"] > 0
    assert any(re.fullmatch(r"fallback gpu\d-spot-a -> gpu\d-od \(x\d+\)", f) for f in drawn.fallbacks), drawn.fallbacks
    costs = " | ".join(drawn.cost)
    for key in ("cost_usd", "on_demand_only_cost_usd", "static_fleet_cost_usd", "lower_bound_cost_usd"):
        assert f"${report[key]:,.0f}" in costs, key


def test_no_gpu_pool_in_the_legend_and_the_x_axis_ends_with_the_activity(tmp_path: Path) -> None:
    pools = copy.deepcopy(SMALL_POOLS)
    pools["pools"].insert(0, {"name": "system", "role": "system", "instance_types": ["m6i.large"],
                              "zones": ["us-east-1a"], "min": 1, "max": 2})
    pools_file = tmp_path / "pools.yaml"
    pools_file.write_text(yaml.safe_dump(pools), encoding="utf-8")
    # Jobs arrive in the first half hour; one of them runs for two days.
    trace = write_trace(tmp_path / "t.csv", ["j1,0,1,600,1", "j2,600,1,900,1", "j3,1800,1,172800,1"])
    result, report = simulate(str(trace), str(pools_file))
    drawn = plot_timeline(result, tmp_path / "t.png", report=report)
    assert not any(label.startswith("system") for label in drawn.legend)
    assert drawn.x_hours[1] < 2 < result.end / 3600
    assert f"x axis cut at {drawn.x_hours[1]:.0f} h" in drawn.title
    # ... and a panel shows the whole run: the fleet shrinking back to zero once the two-day job ends.
    assert drawn.whole_hours == (0.0, pytest.approx(result.end / 3600))
    assert drawn.end_gpus == 0
