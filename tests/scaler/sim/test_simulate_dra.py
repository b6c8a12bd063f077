"""`simulate --dra` (issue 24): the same jobs on the same pools as DRA pools, each job's GPUs a
ResourceClaim: every job runs, on GPUs the scheduler allocated from the nodes' slices, for what the
device-plugin run pays."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.cli import main
from scaler.core.model import keys
from scaler.core.model.objects import Pod
from scaler.sim.dra import SimDra, dra_config, on_claims
from scaler.sim.simulate_command import simulate

ROOT = Path(__file__).resolve().parents[3]
POOLS = ROOT / "examples" / "pools-aws.yaml"
HEADER = "job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status"


def _trace(tmp_path: Path) -> Path:
    trace = tmp_path / "mixed.csv"
    rows = [f"j{i},{i * 60},{(1, 2, 4, 8, 16, 0)[i % 6]},{1800 + 300 * (i % 4)},1000,4,16384,LS,Running"
            for i in range(30)]
    trace.write_text("\n".join([HEADER, *rows]) + "\n")
    return trace


def test_dra_runs_every_job_for_what_the_device_plugin_run_pays(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    _, plugin = simulate(str(trace), str(POOLS))
    _, dra = simulate(str(trace), str(POOLS), dra=True)
    assert dra["jobs_completed"] == dra["jobs_total"] == plugin["jobs_completed"] == 30
    assert dra["demand_gpu_hours"] == plugin["demand_gpu_hours"]
    assert dra["paid_over_demand"] == pytest.approx(plugin["paid_over_demand"], rel=0.02)
    assert dra["pending_p95_s"] <= plugin["pending_p95_s"] + 2 * 10  # two passes at most
    assert dra["lower_bound_cost_usd"] == plugin["lower_bound_cost_usd"]  # priced on the same GPUs


def test_dra_pods_ask_for_gpus_through_a_template_of_their_count() -> None:
    config = dra_config(str(POOLS))
    assert all(p.dra for p in config.pools if p.role == "gpu")
    pod = on_claims(Pod("p", "sim", requests={keys.RES_GPU: 4, keys.RES_CPU: 1000}))
    assert keys.RES_GPU not in pod.requests and pod.resource_claims[0].template_name == "gpu-4"
    exact = SimDra(config, "sim").objects.templates["sim/gpu-4"].spec.requests[0].exactly
    assert exact is not None and exact.count == 4


def test_simulate_dra_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--trace", str(_trace(tmp_path)), "--pools", str(POOLS), "--dra", "--quiet"]) == 0
    assert "jobs_completed               30" in capsys.readouterr().out
