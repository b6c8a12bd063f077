"""The acceptance criteria on the first hours of the shared real traces (the whole traces: bench/)."""

from __future__ import annotations

import pytest
from sim_helpers import ROOT

from scaler.sim.simulate_command import simulate

TRACES = ROOT.parent / "shared" / "traces"
POOLS = str(ROOT / "examples" / "pools-aws.yaml")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (TRACES / "PHILLY-A.csv").exists(), reason="../shared/traces is not here"),
]


@pytest.mark.parametrize(("trace", "hours"), [("PHILLY-A.csv", 12), ("ALIBABA-OPENB2023-A.csv", 48)])
def test_first_hours_of_a_real_trace_meet_the_targets(trace: str, hours: int) -> None:
    _, report = simulate(str(TRACES / trace), POOLS, hours=hours)
    assert report["jobs_completed"] == report["jobs_total"] > 100
    assert report["paid_gpu_hours"] <= 1.10 * report["demand_gpu_hours"]
    assert report["pending_p95_s"] <= 240 + 2 * 10


def test_spot_outage_on_philly_falls_back_within_two_passes() -> None:
    _, report = simulate(str(TRACES / "PHILLY-A.csv"), POOLS, hours=6, outages=["us-east-1a:3600:10800"])
    assert report["jobs_completed"] == report["jobs_total"]
    assert report["fallback_events"] >= 1
    assert report["fallback_delay_max_s"] <= 20
    assert report["pending_p95_s"] <= 240 + 2 * 10
