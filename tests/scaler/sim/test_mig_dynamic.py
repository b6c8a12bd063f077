"""Dynamic MIG pools (`gpu_sharing: {mig: {dynamic: true}}`, DRA on Hopper): the NVIDIA DRA driver's DynamicMIG
publishes each H100 whole beside every MIG device it could hold, all on the GPU's memory-slice counters
(partitionable devices), so one GPU takes a whole-GPU claim or any mix of slices that fits. The planner scales
such a pool from zero for claims of slices and whole GPUs together, the simulator's scheduler allocates them
through the same allocator, and a run without --dra is refused (its pods would ask for device-plugin slices)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dra_snapshot import T, classes, exactly, pod, template
from snapshot_plan import plan_snapshot

from scaler.cli import main
from scaler.configfile import load_config
from scaler.core.model import keys
from scaler.core.model.resources import format_resources
from scaler.sim.simulate_command import simulate
from tests.controlplane.agent import slice_json

ROOT = Path(__file__).resolve().parents[3]
POOLS = ("cluster: c\ncloud: aws\nregion: us-east-1\npools:\n"
         "  - {name: h100-dyn, instance_type: p5.48xlarge, zones: [us-east-1a], max: 3, gpu_allocation: dra,\n"
         "     gpu_sharing: {mig: {dynamic: true}}}\n")
HEADER = "job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status"
PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"


def _pools(tmp_path: Path) -> Path:
    path = tmp_path / "dyn.yaml"
    path.write_text(POOLS)
    return path


def _snapshot(ones: int) -> dict[str, Any]:
    """From zero: 6 whole-GPU claims, two 3g.40gb (one GPU's memory slices), `ones` 1g.10gb (7 fit a GPU)."""
    slices = [("3g", "3g.40gb")] * 2 + [("1g", "1g.10gb")] * ones
    items = [*classes(),
             template("one-gpu", [{"name": "gpu", "exactly": exactly("gpu.nvidia.com")}]),
             template("mig-3g", [{"name": "mig", "exactly": exactly("mig.nvidia.com", 1, PROFILE.format("3g.40gb"))}]),
             template("mig-1g", [{"name": "mig", "exactly": exactly("mig.nvidia.com", 1, PROFILE.format("1g.10gb"))}]),
             *(pod(f"whole-{i}", {"gpu": "one-gpu"}) for i in range(6)),
             *(pod(f"{short}-{i}", {"mig": f"mig-{short}"}) for i, (short, _) in enumerate(slices))]
    return {"apiVersion": "v1", "kind": "List", "items": items}


@pytest.mark.parametrize(("ones", "nodes"), [(7, 1), (8, 2)])
def test_whole_gpus_and_slices_share_a_dynamic_pool_from_zero_as_the_counters_allow(
        tmp_path: Path, ones: int, nodes: int) -> None:
    """Six whole H100s, one cut into two 3g.40gb, one into seven 1g.10gb: one p5 holds them all; an eighth
    1g.10gb finds no memory slice left on any of its GPUs and takes a second node."""
    result = plan_snapshot(tmp_path, _snapshot(ones), _pools(tmp_path))
    assert [(u.pool, u.count) for u in result.scale_ups] == [("h100-dyn", nodes)]
    assert {(v.outcome, v.pool) for v in result.verdicts.values()} == {("scale-up", "h100-dyn")}


def test_the_simulator_runs_whole_gpu_and_slice_jobs_on_one_dynamic_node(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    rows = [f"s{i},0,1,3600,{m},2,8192,LS,Running" for i, m in enumerate((400, 400, *(100,) * 7))]  # 3g x 2, 1g x 7
    rows += [f"w{i},0,1,3600,1000,4,16384,LS,Running" for i in range(6)]
    trace.write_text("\n".join([HEADER, *rows]) + "\n")
    result, report = simulate(str(trace), str(_pools(tmp_path)), gpu_sharing=True, dra=True)
    assert report["jobs_completed"] == report["jobs_total"] == 15
    assert len(result.provider.history) == 1  # one p5 for all fifteen jobs: 8 GPUs paid for 8 GPUs of work


def test_gpu_sharing_on_dynamic_pools_without_dra_is_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(f"{HEADER}\ns0,0,1,3600,100,2,8192,LS,Running\n")
    assert main(["simulate", "--trace", str(trace), "--pools", str(_pools(tmp_path)), "--gpu-sharing"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dynamic MIG pools" in err[0] and "add --dra" in err[0]


def test_a_job_of_more_than_three_sevenths_of_a_gpu_keeps_a_whole_gpu_beside_dynamic_pools(tmp_path: Path) -> None:
    """A 4g.40gb slice leaves room for only a smaller one on its H100: cut for a job of 0.55 GPU it kept an 8-GPU p5
    up for that job (the dynamic MIG example, on p5.48xlarge pools then, bought most of its short-lived second p5s
    so). The job keeps a whole GPU instead, and the cheapest GPU node takes it."""
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS + "  - {name: l4, instance_type: g6.xlarge, zones: [us-east-1a], max: 3, "
                             "gpu_allocation: dra}\n")
    trace = tmp_path / "t.csv"
    trace.write_text(f"{HEADER}\nj0,0,1,3600,550,2,8192,LS,Running\n")
    result, report = simulate(str(trace), str(pools), gpu_sharing=True, dra=True)
    assert report["jobs_completed"] == 1
    assert [i.pool for i in result.provider.history] == ["l4"]
    assert report["paid_gpu_hours"] < 1.2  # one GPU for an hour and its boot, not eight


def _registered(tmp_path: Path, gpu_slices: int) -> dict[str, Any]:
    """`_snapshot(7)` beside a p5 of the pool that registered Ready just now, whose driver has published its
    counters and the slices of its first `gpu_slices` GPUs (it creates one slice per GPU, one by one)."""
    pool = load_config(_pools(tmp_path)).pool("h100-dyn")
    tmpl = pool.template_node("us-east-1a", "us-east-1")
    name = "ip-10-0-1-30.ec2.internal"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {**tmpl.labels, keys.LABEL_HOSTNAME: name}, "creationTimestamp": T},
        "spec": {"providerID": "aws:///us-east-1a/i-0p5", "taints": [
            {"key": t.key, "value": t.value, "effect": t.effect} for t in tmpl.taints]},
        "status": {"allocatable": format_resources(tmpl.allocatable),
                   "conditions": [{"type": "Ready", "status": "True"}]}}
    counters, *gpus = pool.dra_slices(name)
    data = _snapshot(7)
    data["items"] += [node, *(slice_json(s) for s in (counters, *gpus[:gpu_slices]))]
    return data


@pytest.mark.parametrize("gpu_slices", [0, 3, 7])
def test_a_node_whose_driver_is_still_publishing_its_gpus_is_waited_for_not_bought_again(
        tmp_path: Path, gpu_slices: int) -> None:
    """Seen with part of its pool (the driver creates the slices one by one and the scaler's watch delivered the
    first ones; before, the planner saw a p5 of three GPUs and bought a second), the node is still coming: the
    pods that fill its eight GPUs wait for it."""
    result = plan_snapshot(tmp_path, _registered(tmp_path, gpu_slices), _pools(tmp_path))
    assert result.scale_ups == []
    assert {v.outcome for v in result.verdicts.values()} == {"fits-in-flight"}


def test_a_node_whose_driver_published_every_gpu_takes_the_pods_as_it_is(tmp_path: Path) -> None:
    result = plan_snapshot(tmp_path, _registered(tmp_path, 8), _pools(tmp_path))
    assert result.scale_ups == []
    assert {v.outcome for v in result.verdicts.values()} == {"fits-existing"}
