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


MIG_POOLS = ROOT / "examples" / "pools-aws-mig.yaml"


def test_fractional_jobs_ask_for_their_mig_slice_through_a_claim(tmp_path: Path) -> None:
    # jobs of a tenth, a quarter and 0.4 of a GPU: 1g.5gb, 2g.10gb and 3g.20gb slices of the MIG pools
    trace = tmp_path / "shares.csv"
    rows = [f"j{i},{i * 60},1,{1800 + 300 * (i % 4)},{(100, 250, 400)[i % 3]},2,8192,LS,Running" for i in range(24)]
    trace.write_text("\n".join([HEADER, *rows]) + "\n")
    plugin_result, plugin = simulate(str(trace), str(MIG_POOLS), gpu_sharing=True)
    dra_result, dra = simulate(str(trace), str(MIG_POOLS), gpu_sharing=True, dra=True)
    assert dra["jobs_completed"] == dra["jobs_total"] == plugin["jobs_completed"] == 24
    # the same one p4d, given back a pass or two apart (its 8 GPUs for minutes weigh on a trace this small;
    # the whole Alibaba trace's rows agree within 0.1 %)
    assert (dra_result.scale_ups, dra_result.scale_downs) == (plugin_result.scale_ups, plugin_result.scale_downs)
    assert dra["paid_over_demand"] == pytest.approx(plugin["paid_over_demand"], rel=0.05)
    for result in (plugin_result, dra_result):  # both on the MIG pools (a p4d), not on whole L4s
        used = {pool for s in result.samples for pool, gpus in s.gpus_by_pool.items() if gpus}
        assert used and all(pool.startswith("mig-") for pool in used), used


def test_a_mig_request_becomes_a_claim_for_that_profile() -> None:
    config = dra_config(str(MIG_POOLS))
    pod = on_claims(Pod("p", "sim", requests={f"{keys.MIG_RESOURCE_PREFIX}2g.10gb": 1, keys.RES_CPU: 1000}))
    assert pod.requests == {keys.RES_CPU: 1000} and pod.resource_claims[0].template_name == "mig-2g.10gb"
    exact = SimDra(config, "sim").objects.templates["sim/mig-2g.10gb"].spec.requests[0].exactly
    assert exact is not None and exact.device_class_name == "mig.nvidia.com" and exact.count == 1
    assert exact.selectors == ("device.attributes['gpu.nvidia.com'].profile == '2g.10gb'",)


def test_a_gpu_shared_by_memory_is_never_given_twice_in_full(tmp_path: Path) -> None:
    """On a pool whose GPUs allow multiple allocations (gpu_sharing memory), a job's claim for a whole GPU
    consumes all of its memory steps: the simulated cluster records that share, so twelve 1-GPU jobs at once
    take twelve GPUs (three g6.12xlarge), not eight GPUs given twice."""
    pools = tmp_path / "pools.yaml"
    pools.write_text("cluster: sim\ncloud: aws\nregion: us-east-1\npools:\n"
                     "  - {name: cpu, role: general, instance_types: [m6i.xlarge], zones: [us-east-1a], max: 20}\n"
                     "  - {name: l4x4, instance_types: [g6.12xlarge], zones: [us-east-1a], max: 20,\n"
                     "     gpu_allocation: dra, gpu_sharing: {memory: {step_gib: 4}}}\n")
    trace = tmp_path / "burst.csv"
    trace.write_text("\n".join([HEADER, *(f"j{i},{i * 30},1,3600,1000,2,8192,LS,Running" for i in range(12))]) + "\n")
    _, report = simulate(str(trace), str(pools), dra=True)
    assert report["jobs_completed"] == 12
    assert report["peak_gpus"] >= report["peak_demand_gpus"] == 12 and report["instances_launched"] == 3
