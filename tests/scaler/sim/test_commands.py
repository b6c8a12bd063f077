"""`python -m scaler simulate` and `python -m scaler plan|explain` as a user runs them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sim_helpers import ROOT, write_trace

from scaler.cli import main
from scaler.sim.simulate_command import simulate

SNAPSHOT = ROOT / "examples" / "snapshot-aws.json"
POOLS = ROOT / "examples" / "pools-aws.yaml"


def test_simulate_writes_report_and_plot(tmp_path: Path, pools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.csv", ["j1,0,1,600,1", "j2,30,8,1200,2", "j3,60,16,900,4"])
    report_path, plot_path = tmp_path / "r.json", tmp_path / "t.png"
    code = main(["simulate", "--trace", str(trace), "--pools", str(pools_file), "--scheduler", "binpack",
                 "--report", str(report_path), "--plot", str(plot_path), "--spot-outage", "us-east-1b:0:60"])
    assert code == 0
    out, err = capsys.readouterr()
    assert re.search(r"^  jobs_completed +3$", out, re.M)
    assert re.search(r"^  jobs_never_started +0$", out, re.M) and "warning" not in out
    assert "t=" in err  # progress on stderr
    report = json.loads(report_path.read_text())
    for key in ("paid_gpu_hours", "demand_gpu_hours", "cost_usd", "lower_bound_cost_usd", "spot_share",
                "pending_p50_s", "pending_p95_s", "pending_max_s", "jobs_completed", "jobs_total",
                "fallback_events", "interruptions", "plan_p50_s", "plan_max_s", "timings", "pools_file"):
        assert key in report
    assert report["scheduler"] == "binpack"
    assert report["demand_gpu_hours"] == pytest.approx((600 + 8 * 1200 + 16 * 900) / 3600, abs=0.1)
    assert report["cost_usd"] >= report["lower_bound_cost_usd"] > 0
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_queues_gangs_behind_provisioning_requests_when_asked(
        tmp_path: Path, pools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.csv", ["j1,0,1,600,1", "j2,30,16,1200,2", "j3,60,16,900,4"])
    report_path = tmp_path / "r.json"
    assert main(["simulate", "--trace", str(trace), "--pools", str(pools_file), "--quiet", "--report",
                 str(report_path), "--provisioning-requests"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  provisioning_requests +created=2 Provisioned=2 Failed=0 ", out, re.M)
    assert json.loads(report_path.read_text())["provisioning_requests"]["Provisioned"] == 2
    assert main(["simulate", "--trace", str(trace), "--pools", str(pools_file), "--quiet", "--report",
                 str(report_path)]) == 0
    assert "provisioning_requests" not in capsys.readouterr().out
    assert json.loads(report_path.read_text())["provisioning_requests"] is None


def test_provisioning_requests_say_what_their_counts_mean_and_when_nothing_was_queued(
        tmp_path: Path, pools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gangs = write_trace(tmp_path / "gangs.csv", ["j1,0,16,1200,2"])
    assert main(["simulate", "--trace", str(gangs), "--pools", str(pools_file), "--quiet",
                 "--provisioning-requests"]) == 0
    out = capsys.readouterr().out
    assert "BookingExpired: a Provisioned request's 10-minute booking ran out before its job finished" in out
    singles = write_trace(tmp_path / "singles.csv", ["j1,0,1,600,1", "j2,30,8,1200,1"])
    assert main(["simulate", "--trace", str(singles), "--pools", str(pools_file), "--quiet",
                 "--provisioning-requests"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  provisioning_requests +created=0 ", out, re.M)
    assert "no job of this trace is a gang of more than one pod with these pools: --provisioning-requests " \
           "queued nothing" in out


def test_simulate_from_a_later_hour_replays_that_slice_on_an_empty_cluster(tmp_path: Path, pools_file: Path) -> None:
    """--start-hour (with --hours, a window): a held-out slice of a trace, its jobs submitted from 0."""
    trace = write_trace(tmp_path / "t.csv", ["a,0,1,600,1", "b,3600,8,600,1", "c,36000,1,900,1", "d,39600,1,900,1",
                                              "e,72000,1,900,1"])
    _, whole = simulate(str(trace), str(pools_file))
    _, window = simulate(str(trace), str(pools_file), start_hour=10, hours=2)
    assert (whole["jobs_total"], window["jobs_total"], window["jobs_completed"]) == (5, 2, 2)
    assert window["demand_gpu_hours"] == pytest.approx(0.5)  # c and d, 900 s each on one GPU
    assert window["simulated_hours"] < 2  # submitted at 0 and 1 h of the replay, not at 10 and 11


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--spot-outage", "us-east-1a:100"], "ZONE:START_S:END_S"),
        (["--spot-outage", "eu-west-1a:0:100"], "zone 'eu-west-1a' is in no pool"),
        (["--hours", "0"], "--hours 0.0: must be a finite number > 0"),
        (["--device-plugin-delay", "-5"], "--device-plugin-delay -5.0: must be a finite number >= 0"),
    ],
)
def test_simulate_bad_options(tmp_path: Path, pools_file: Path, capsys: pytest.CaptureFixture[str],
                              extra: list[str], message: str) -> None:
    trace = write_trace(tmp_path / "t.csv", ["j1,0,1,600,1"])
    assert main(["simulate", "--trace", str(trace), "--pools", str(pools_file), *extra]) == 2
    assert message in capsys.readouterr().err


def test_simulate_bad_trace_and_pools(tmp_path: Path, pools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.csv", ["j1,0,1,600,1", "j2,10,1,abc,1"])
    assert main(["simulate", "--trace", str(trace), "--pools", str(pools_file)]) == 2
    assert f"{trace}:3: duration_s is 'abc'" in capsys.readouterr().err
    bad_pools = tmp_path / "p.yaml"
    bad_pools.write_text("cluster: c\ncloud: aws\npools:\n  - name: g\n    instance_types: [g6.xlarge]\n"
                         "    zones: [a]\n    max: -1\n")
    good = write_trace(tmp_path / "g.csv", ["j1,0,1,600,1"])
    assert main(["simulate", "--trace", str(good), "--pools", str(bad_pools)]) == 2
    assert "pools[g].max" in capsys.readouterr().err


def test_explain_example_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--snapshot", str(SNAPSHOT), "--pools", str(POOLS)]) == 0
    out = capsys.readouterr().out
    assert "scale up gpu8-spot-a in us-east-1a by 2" in out  # the 2-pod gang, all or nothing
    assert "scale up gpu4-spot-a" in out and "ml/train-llama-0" in out
    # The 16-GPU single pod is bigger than every pool: unschedulable with a reason per pool, no scale-up.
    assert "ml/giant-0: unschedulable" in out
    assert "gpu8-od-a: Insufficient nvidia.com/gpu" in out
    # A 1-GPU pod without the GPU toleration: unschedulable, the taint named.
    assert "ml/notebook-0: unschedulable" in out
    assert "untolerated taint {nvidia.com/gpu: present}" in out
    ups = [line for line in out.splitlines() if line.startswith("  scale up")]
    assert not any("giant" in line or "notebook" in line for line in ups)
    # Each pool with nodes says how long its idle nodes are kept, and why (one snapshot: no history, one boot).
    assert "note: unneeded time: gpu1-spot-a: unneeded nodes removed after 240s (adaptive: re-buying a node " \
        "costs 240s of its price; a node with pods to move waits 600s; no idle periods seen yet)" in out


def test_plan_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--pools", str(POOLS), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pods"]["ml/giant-0"]["outcome"] == "unschedulable"
    assert data["pods"]["ml/eval-resnet-0"] == {**data["pods"]["ml/eval-resnet-0"], "outcome": "scale-up",
                                                "pool": "gpu1-spot-a"}
    assert sum(u["count"] for u in data["scale_ups"]) == 5


def test_explain_malformed_snapshot_names_the_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(SNAPSHOT.read_text())
    pod = next(i for i in data["items"] if i["kind"] == "Pod" and i["metadata"]["name"] == "train-llama-0")
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "lots"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert main(["explain", "--snapshot", str(bad), "--pools", str(POOLS)]) == 2
    err = capsys.readouterr().err
    assert "ml/train-llama-0" in err and "lots" in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "List", "items": [')
    assert main(["explain", "--snapshot", str(broken), "--pools", str(POOLS)]) == 2
    assert "broken.json:1:" in capsys.readouterr().err
    data = json.loads(SNAPSHOT.read_text())
    next(i for i in data["items"] if i["kind"] == "Node")["metadata"]["creationTimestamp"] = "yesterday"
    bad.write_text(json.dumps(data))
    assert main(["explain", "--snapshot", str(bad), "--pools", str(POOLS)]) == 2
    assert "metadata.creationTimestamp: not an RFC 3339 time: 'yesterday'" in capsys.readouterr().err
    notalist = tmp_path / "pod.json"
    notalist.write_text('{"kind": "Pod"}')
    assert main(["explain", "--snapshot", str(notalist), "--pools", str(POOLS)]) == 2
    assert "expected a List" in capsys.readouterr().err


def test_module_entry_point_exit_codes(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "scaler", "explain", "--snapshot", str(tmp_path / "nope.json"),
                           "--pools", str(POOLS)], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "nope.json: cannot read" in done.stderr


def _gpu4_node(name: str) -> dict[str, object]:
    alloc = {"cpu": "47810m", "memory": "187000Mi", "pods": "110", "nvidia.com/gpu": "4"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "creationTimestamp": "2026-11-20T09:00:00Z",
                         "labels": {"gpuburst.io/pool": "gpu4-spot-a", "topology.kubernetes.io/zone": "us-east-1a",
                                    "node.kubernetes.io/instance-type": "g6.12xlarge",
                                    "kubernetes.io/hostname": name}},
            "spec": {"providerID": f"aws:///us-east-1a/{name}",
                     "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                {"key": "gpuburst.io/min-gpus", "value": "2", "effect": "NoSchedule"}]},
            "status": {"allocatable": alloc, "capacity": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _gpu_pod(name: str, gpus: int, scheduler: str, node: str | None = None) -> dict[str, object]:
    status: dict[str, object] = {"phase": "Running"} if node else {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-11-20T10:00:00Z",
                         "ownerReferences": [{"kind": "Job", "name": name, "uid": "u", "controller": True}]},
            "spec": {"schedulerName": scheduler, **({"nodeName": node} if node else {}),
                     "containers": [{"name": "main", "resources": {"requests": {
                         "cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": str(gpus)}}}],
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                     {"key": "gpuburst.io/min-gpus", "operator": "Exists",
                                      "effect": "NoSchedule"}]},
            "status": status}


@pytest.mark.parametrize(("scheduler", "node"), [("default-scheduler", "idle"), ("gpuburst-binpack", "busy")])
def test_explain_says_where_the_pods_scheduler_will_bind_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            scheduler: str, node: str) -> None:
    # Two 4-GPU nodes, one with a 2-GPU job running: kube-scheduler's default profile spreads the
    # pending 2-GPU pod to the idle node, gpuburst's binpack profile packs it next to the job.
    items = [_gpu4_node("busy"), _gpu4_node("idle"), _gpu_pod("running", 2, scheduler, node="busy"),
             _gpu_pod("pending", 2, scheduler)]
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["explain", "--snapshot", str(snap), "--pools", str(POOLS)]) == 0
    out = capsys.readouterr().out
    assert f"ml/pending: fits-existing on node {node} (where {scheduler} will bind it)" in out
    assert "scale up" not in out


ALIBABA = "job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status"


@pytest.mark.parametrize("strict", [False, True])
def test_simulate_names_the_jobs_that_never_ran_and_why(tmp_path: Path, pools_file: Path,
                                                        capsys: pytest.CaptureFixture[str], strict: bool) -> None:
    """A 1000-GPU gang (the 8-GPU pools hold 160) and a 1-GPU job asking 500 cpus (no node has them) never run;
    the two small jobs do. The run says which, why per pool, and the overhead on the work actually done."""
    trace = write_trace(tmp_path / "t.csv", ["j1,0,1,600,1000,2,8192,LS,Done", "j2,10,1000,600,1000,2,8192,LS,Done",
                                             "j3,20,1,600,1000,500,8192,LS,Done", "j4,30,1,600,1000,2,8192,LS,Done"],
                        header=ALIBABA)
    report_path = tmp_path / "r.json"
    code = main(["simulate", "--trace", str(trace), "--pools", str(pools_file), "--quiet", "--report",
                 str(report_path), *(["--strict"] if strict else [])])
    assert code == (1 if strict else 0)
    out = capsys.readouterr().out
    assert "warning: 2 of 4 jobs never started: j2, j3" in out
    report = json.loads(report_path.read_text())
    assert (report["jobs_completed"], report["jobs_never_started"]) == (2, 2)
    never = report["never_started"]
    assert never["first_job_ids"] == ["j2", "j3"]
    by_job_count = {(g["pods"], g["outcome"]): g["per_pool"] for g in never["reasons"]}
    cpu = [g for g in never["reasons"] if g["pods"] == 1 and g["outcome"] == "unschedulable"]
    assert len(cpu) == 1 and cpu[0]["per_pool"]["gpu1-od"] == "Insufficient cpu"
    assert "gpu1-od, gpu1-spot-a, gpu1-spot-b: Insufficient cpu" in out  # explain's wording, pools alike together
    gang = [p for (pods, _), p in by_job_count.items() if pods > 1 and "*" in p and "gang" in p["*"]]
    assert gang and "all or none" in gang[0]["*"]
    assert sum(g["pods"] for g in never["reasons"]) == 125 + 1
    # demand counts the 1000-GPU job that never ran; the work done is the two small ones
    assert report["paid_over_demand"] < 1 < report["paid_over_demand_done"]
    assert report["demand_done_gpu_hours"] == pytest.approx(2 * 600 / 3600, abs=0.1)


def test_explain_reads_volumes_and_gives_the_schedulers_reason(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The List may carry PVCs, PVs and StorageClasses: a pod whose checkpoint PV is bound in 1b gets its
    node in 1b; one whose PV is in a zone no pool has fits no pool, with VolumeZone's reason."""
    data = json.loads(SNAPSHOT.read_text())
    pods = {i["metadata"]["name"]: i for i in data["items"] if i["kind"] == "Pod"}
    eval_pod = pods["eval-resnet-0"]
    eval_pod["spec"]["volumes"] = [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}]
    stuck = json.loads(json.dumps(eval_pod))
    stuck["metadata"]["name"] = "eval-resnet-1"
    stuck["spec"]["volumes"] = [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt-c"}}]
    data["items"].append(stuck)
    for claim, zone in (("ckpt", "us-east-1b"), ("ckpt-c", "us-east-1c")):
        data["items"].append({"kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": "ml"},
                              "spec": {"storageClassName": "gp3", "volumeName": f"pv-{claim}"},
                              "status": {"phase": "Bound"}})
        data["items"].append({"kind": "PersistentVolume", "metadata": {
            "name": f"pv-{claim}", "labels": {"topology.kubernetes.io/zone": zone}},
            "spec": {"storageClassName": "gp3", "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": claim}}})
    data["items"].append({"kind": "StorageClass", "metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
                          "volumeBindingMode": "WaitForFirstConsumer"})
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(data))
    assert main(["plan", "--snapshot", str(snap), "--pools", str(POOLS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pods"]["ml/eval-resnet-0"]["outcome"] == "scale-up"
    assert out["pods"]["ml/eval-resnet-0"]["pool"] == "gpu1-spot-b"
    assert not any("kind" in n for n in out["snapshot_notes"])
    assert main(["explain", "--snapshot", str(snap), "--pools", str(POOLS)]) == 0
    text = capsys.readouterr().out
    assert "ml/eval-resnet-1: unschedulable" in text
    assert "gpu1-spot-a: node(s) had no available volume zone" in text
