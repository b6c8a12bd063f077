"""`simulate --gpu-sharing`: the trace's fractional GPU jobs on shared pools; `plan` / `explain` on MIG pods."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scaler.cli import main
from scaler.configfile import load_config
from scaler.core.model import keys
from scaler.sim.simulate_command import simulate
from scaler.sim.trace import Job, job_pods

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT / "examples" / "pools-aws-shared.yaml"
WHOLE = ROOT / "examples" / "pools-aws.yaml"
HEADER = "job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status"


@pytest.mark.parametrize(("milli", "replicas"), [(50, 1), (100, 1), (101, 2), (320, 4), (810, 9), (999, 10)])
def test_a_share_takes_the_smallest_replica_count_covering_it(milli: int, replicas: int) -> None:
    config = load_config(SHARED)
    (pod,) = job_pods(Job("j", 0.0, 1, 60.0, 2000, 4 * 2**30, gpu_milli=milli), config, gpu_sharing=True)
    assert pod.requests[keys.RES_GPU] == replicas == math.ceil(milli * 10 / 1000)
    assert pod.node_selector == {keys.LABEL_GPU_SHARING_STRATEGY: "time-slicing"}
    assert any(t.key == keys.TAINT_GPU_SHARING for t in pod.tolerations)
    # Without --gpu-sharing the same job asks for a whole GPU and never for the shared pools.
    (whole,) = job_pods(Job("j", 0.0, 1, 60.0, 2000, 4 * 2**30, gpu_milli=milli), config)
    assert whole.requests[keys.RES_GPU] == 1 and not whole.node_selector


def test_mig_pools_take_the_smallest_profile_covering_the_share(tmp_path: Path) -> None:
    pools = tmp_path / "mig.yaml"
    pools.write_text(
        "cluster: c\ncloud: aws\nregion: us-east-1\npools:\n"
        "  - {name: mig, instance_type: p5.48xlarge, zones: [us-east-1a], max: 2,\n"
        "     gpu_sharing: {mig: {strategy: mixed, layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}}}\n")
    config = load_config(pools)
    for milli, profile in ((100, "1g.10gb"), (142, "1g.10gb"), (200, "2g.20gb"), (400, "3g.40gb")):
        (pod,) = job_pods(Job("j", 0.0, 1, 60.0, 1000, 2**30, gpu_milli=milli), config, gpu_sharing=True)
        assert pod.requests.get(keys.MIG_RESOURCE_PREFIX + profile) == 1, milli
        assert keys.RES_GPU not in pod.requests
    # More than the largest slice of the layout: the job keeps a whole GPU.
    (big,) = job_pods(Job("j", 0.0, 1, 60.0, 1000, 2**30, gpu_milli=600), config, gpu_sharing=True)
    assert big.requests[keys.RES_GPU] == 1


AZURE_MIG = ROOT / "examples" / "pools-azure-mig.yaml"
A100_MIG = "NVIDIA-A100-80GB-PCIe-MIG-{}"


# Each MIG example says in its header that everything but its MIG pools is as in its base file, and the README puts
# their rows beside the base file's: they differ only by the MIG pools.
MIG_EXAMPLES = [("pools-aws-mig.yaml", "pools-aws.yaml", {"mig-spot-a", "mig-spot-b", "mig-od-a", "mig-od-b"}),
                ("pools-aws-mig-dynamic.yaml", "pools-aws.yaml", {"mig-spot-a", "mig-spot-b", "mig-od-a", "mig-od-b"}),
                ("pools-azure-mig.yaml", "pools-azure.yaml", {"mig1g-spot-1", "mig1g-od-1", "mig3g-spot-1",
                                                              "mig3g-od-1"})]


@pytest.mark.parametrize(("example", "base", "mig_pools"), MIG_EXAMPLES, ids=[e[0] for e in MIG_EXAMPLES])
def test_a_mig_example_is_its_base_pools_plus_its_mig_pools(example: str, base: str, mig_pools: set[str]) -> None:
    mig, whole = load_config(ROOT / "examples" / example), load_config(ROOT / "examples" / base)
    assert [p for p in mig.pools if p.gpu_sharing is None] == list(whole.pools)
    assert {p.name for p in mig.pools if p.gpu_sharing is not None} == mig_pools
    assert mig.model_dump(exclude={"pools"}) == whole.model_dump(exclude={"pools"})


@pytest.mark.parametrize(("milli", "profile"), [(100, "1g.10gb"), (142, "1g.10gb"), (200, "3g.40gb"),
                                                (428, "3g.40gb"), (429, None)])
def test_on_single_strategy_pools_a_share_takes_the_pool_of_the_smallest_profile_covering_it(
        milli: int, profile: str | None) -> None:
    """AKS cuts every GPU of an agent pool into one profile: the slice is the pool's nvidia.com/gpu, so the pod
    selects the pool by the product GPU feature discovery gives its slices and tolerates its sharing taint."""
    config = load_config(AZURE_MIG)
    (pod,) = job_pods(Job("j", 0.0, 1, 60.0, 1000, 2**30, gpu_milli=milli), config, gpu_sharing=True)
    assert pod.requests[keys.RES_GPU] == 1
    if profile is None:  # more than any pool's slice (3/7 of a GPU): a whole GPU, off the MIG pools
        assert not pod.node_selector and not any(t.key == keys.TAINT_GPU_SHARING for t in pod.tolerations)
        return
    assert pod.node_selector == {keys.LABEL_GPU_PRODUCT: A100_MIG.format(profile)}
    assert any(t.key == keys.TAINT_GPU_SHARING and t.value == keys.SHARING_MIG_SINGLE for t in pod.tolerations)
    pool = next(p for p in config.pools if p.name == f"mig{profile[:2]}-spot-1")
    assert pool.template_node().labels[keys.LABEL_GPU_PRODUCT] == A100_MIG.format(profile)


@pytest.mark.parametrize("dra", [False, True])
def test_seven_small_jobs_share_one_single_strategy_node(tmp_path: Path, dra: bool) -> None:
    """Seven jobs of a tenth of a GPU each: one 1-GPU A100 VM cut into seven 1g.10gb, not seven GPUs; with --dra
    the same slices are the DRA driver's MIG devices, asked for by claims."""
    trace = tmp_path / "t.csv"
    trace.write_text("\n".join([HEADER, *(f"s{i},0,1,3600,100,2,8192,LS,Running" for i in range(7))]) + "\n")
    result, report = simulate(str(trace), str(AZURE_MIG), gpu_sharing=True, dra=dra)
    assert report["jobs_completed"] == report["jobs_total"] == 7
    assert [i.pool for i in result.provider.history if i.gpus] == ["mig1g-spot-1"]
    assert report["paid_gpu_hours"] < 1.2  # one GPU for an hour and its boot


def test_shared_pools_pay_fewer_gpu_hours_for_the_same_fractional_jobs(tmp_path: Path) -> None:
    trace = tmp_path / "frac.csv"
    rows = [f"f{i},{i * 20},1,3600,{(230, 320, 470)[i % 3]},2,8192,LS,Running" for i in range(24)]
    rows += ["w0,480,1,3600,1000,4,16384,LS,Running"]
    trace.write_text("\n".join([HEADER, *rows]) + "\n")
    _, whole_report = simulate(str(trace), str(WHOLE))
    shared, shared_report = simulate(str(trace), str(SHARED), gpu_sharing=True)
    for report in (whole_report, shared_report):
        assert report["jobs_completed"] == report["jobs_total"] == 25
        assert report["demand_fractional_gpu_hours"] == pytest.approx((8 * (0.23 + 0.32 + 0.47) + 1) * 1, abs=0.2)
    assert shared_report["gpu_sharing"] and not whole_report["gpu_sharing"]
    assert shared_report["paid_gpu_hours"] < 0.5 * whole_report["paid_gpu_hours"]
    # The shared jobs ran on the time-sliced pools, the whole-GPU job on a whole GPU.
    shared_pools = {i.pool for i in shared.provider.history}
    assert any(p.startswith("gpu1-shared") for p in shared_pools)
    assert any(p.startswith("gpu1") and "shared" not in p for p in shared_pools)


def test_gpu_sharing_without_a_sharing_pool_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(f"{HEADER}\nf0,0,1,60,200,2,1024,LS,Running\n")
    assert main(["simulate", "--trace", str(trace), "--pools", str(WHOLE), "--gpu-sharing", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--gpu-sharing" in err and "gpu_sharing" in err and "Traceback" not in err


def _mig_snapshot(path: Path) -> Path:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "infer-0", "namespace": "ml", "uid": "u1",
                        "creationTimestamp": "2026-11-24T00:00:00Z",
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "infer", "uid": "r", "controller": True}]},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {
               "cpu": "1", "memory": "4Gi", keys.MIG_RESOURCE_PREFIX + "1g.10gb": "1"}}}],
               "tolerations": [{"key": keys.TAINT_GPU, "operator": "Exists", "effect": "NoSchedule"}]},
           "status": {"phase": "Pending", "conditions": [
               {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod]}))
    return path


def test_plan_chooses_a_mig_pool_and_explain_says_why_not_elsewhere(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = _mig_snapshot(tmp_path / "snap.json")
    pools = tmp_path / "pools.yaml"
    pools.write_text(WHOLE.read_text() + (
        "  - name: h100-mig\n    instance_types: [p5.48xlarge]\n    zones: [us-east-1a]\n    max: 2\n"
        "    gpu_sharing: {mig: {strategy: mixed, layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}}\n"))
    assert main(["plan", "--snapshot", str(snapshot), "--pools", str(pools), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pods"]["ml/infer-0"]["outcome"] == "scale-up"
    assert data["pods"]["ml/infer-0"]["pool"] == "h100-mig"
    assert main(["explain", "--snapshot", str(snapshot), "--pools", str(WHOLE)]) == 0
    out = capsys.readouterr().out
    assert "ml/infer-0: unschedulable" in out
    assert f"gpu1-od-a: Insufficient {keys.MIG_RESOURCE_PREFIX}1g.10gb" in out


@pytest.mark.parametrize("dra", [False, True])
def test_a_mig_node_cut_on_some_gpus_runs_whole_gpu_jobs_on_the_others(tmp_path: Path, dra: bool) -> None:
    """The A100s a MIG pool leaves whole (gpu_sharing.mig.gpus) take whole-GPU jobs: one 8-GPU node holds
    the slice jobs and the whole-GPU ones, where a node cut on every GPU could run no whole-GPU job at all."""
    pools = tmp_path / "mig.yaml"
    pools.write_text(
        "cluster: c\ncloud: aws\nregion: us-east-1\npools:\n"
        "  - {name: mig, instance_type: p4d.24xlarge, zones: [us-east-1a], max: 3,\n"
        "     gpu_sharing: {mig: {strategy: mixed, layout: {3g.20gb: 1, 2g.10gb: 1, 1g.5gb: 2}, gpus: 1}}}\n")
    trace = tmp_path / "t.csv"
    rows = [f"s{i},0,1,3600,{m},2,8192,LS,Running" for i, m in enumerate((300, 200, 120))]  # 3g, 2g, 1g
    rows += [f"w{i},0,1,3600,1000,4,16384,LS,Running" for i in range(5)]
    trace.write_text("\n".join([HEADER, *rows]) + "\n")
    result, report = simulate(str(trace), str(pools), gpu_sharing=True, dra=dra)
    assert report["jobs_completed"] == report["jobs_total"] == 8
    assert len(result.provider.history) == 1  # one p4d for all eight jobs


def test_a_slice_job_starts_on_a_mig_node_whose_whole_gpus_are_all_taken(tmp_path: Path) -> None:
    """The simulated scheduler kept a MIG node whose whole GPUs were all busy closed to every GPU pod, its free
    slices too: the planner saw the slice fit there and bought nothing, and the job waited for a whole-GPU job to
    end (the MIG row's 14,867 s wait). kube-scheduler binds it at once."""
    pools = tmp_path / "mig.yaml"
    pools.write_text(
        "cluster: c\ncloud: aws\nregion: us-east-1\npools:\n"
        "  - {name: mig, instance_type: p4d.24xlarge, zones: [us-east-1a], max: 3,\n"
        "     gpu_sharing: {mig: {strategy: mixed, layout: {3g.20gb: 1, 2g.10gb: 2}, gpus: 1}}}\n")
    trace = tmp_path / "t.csv"
    rows = [f"w{i},0,1,36000,1000,4,16384,LS,Running" for i in range(7)]  # the seven whole A100s, for 10 h
    rows += ["s0,600,1,3600,200,2,8192,LS,Running"]  # a 2g.10gb slice, ten minutes later
    trace.write_text("\n".join([HEADER, *rows]) + "\n")
    result, report = simulate(str(trace), str(pools), gpu_sharing=True)
    assert report["jobs_completed"] == 8
    assert len(result.provider.history) == 1
    assert report["pending_max_s"] < 600  # the whole-GPU jobs' boot; the slice's wait is none
