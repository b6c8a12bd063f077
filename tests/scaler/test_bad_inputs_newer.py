"""Issue 42: the newer inputs (DRA objects, Capacity Blocks, buffers, sweeps, tune, trace export, Ray and
Prometheus endpoints) refused as the API server or the cloud would, or said plainly: exit 2 and one line
naming the file (or flag), the object and the field, no traceback, nothing written (docs/operations.md)."""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.cli import main
from scaler.core.config.settings import parse_config
from scaler.kube.convert_dra import dra_view
from scaler.sim import batch
from tests.scaler import test_bad_inputs_scaler as scaler_base

ROOT = Path(__file__).resolve().parents[2]
DRA_SNAPSHOT = ROOT / "examples" / "snapshot-aws-dra.json"
DRA_POOLS = ROOT / "examples" / "pools-aws-dra.yaml"

Edit = Callable[[dict[str, Any]], None]


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def plan_refuses(capsys: pytest.CaptureFixture[str], snapshot: Path, pools: Path, line: str, named: Path) -> str:
    """`plan` exits 2 with one line that holds `line` and names the file at fault."""
    assert main(["plan", "--snapshot", str(snapshot), "--pools", str(pools)]) == 2
    err = one_line(capsys)
    assert line in err and str(named) in err
    return err


# --- DRA objects in a snapshot: as pkg/apis/resource/validation/validation.go refuses them -------------------
def template(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The devices of the snapshot's ResourceClaimTemplate `name`."""
    def find(snapshot: dict[str, Any]) -> dict[str, Any]:
        [t] = [o for o in snapshot["items"] if o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] == name]
        return t["spec"]["spec"]["devices"]  # type: ignore[no-any-return]
    return find


ONE, TWO, FIRST = template("one-gpu"), template("two-alike"), template("h100-else-20gi")


def exactly(**fields: Any) -> Edit:
    return lambda s: ONE(s)["requests"][0]["exactly"].update(fields)


def cel(expression: str) -> Edit:
    return exactly(selectors=[{"cel": {"expression": expression}}])


def constraint(**fields: Any) -> Edit:
    def edit(s: dict[str, Any]) -> None:
        c = TWO(s)["constraints"][0]
        c.clear()
        c.update(fields)
    return edit


def second_request(s: dict[str, Any]) -> None:
    ONE(s)["requests"].append(copy.deepcopy(ONE(s)["requests"][0]))


DRA_CASES: list[tuple[str, Edit, str]] = [
    ("CEL selector of a string", cel("device.driver"),
     "ResourceClaimTemplate ml/one-gpu: spec.spec.devices.requests[0].exactly.selectors[0].cel.expression: "
     "CEL compile error: must evaluate to bool or the unknown type, not string"),
    ("CEL selector of a quantity", cel("device.capacity['gpu.nvidia.com'].memory"), "not quantity"),
    ("allocationMode unknown", exactly(allocationMode="Some"),
     "requests[0].exactly.allocationMode: Unsupported value 'Some': supported values: ExactCount, All"),
    ("allocationMode All with a count", exactly(allocationMode="All", count=2),
     "requests[0].exactly.count: must not be specified when allocationMode is All"),
    ("no device class", lambda s: ONE(s)["requests"][0]["exactly"].pop("deviceClassName"),
     "requests[0].exactly.deviceClassName: required"),
    ("device class not a DNS subdomain", exactly(deviceClassName="GPU_class"), "is not a DNS subdomain"),
    ("request name not a DNS label", lambda s: ONE(s)["requests"][0].update(name="GPU 0"),
     "requests[0].name: 'GPU 0' is not a request name"),
    ("request named twice", second_request, "requests[1].name: Duplicate value 'gpu'"),
    ("subrequest named twice", lambda s: FIRST(s)["requests"][0]["firstAvailable"][1].update(name="h100"),
     "ResourceClaimTemplate ml/h100-else-20gi: spec.spec.devices.requests[0].firstAvailable[1].name: "
     "Duplicate value 'h100'"),
    ("matchAttribute empty", constraint(matchAttribute=""),
     "ResourceClaimTemplate ml/two-alike: spec.spec.devices.constraints[0].matchAttribute: '' must include a domain"),
    ("matchAttribute without a domain", constraint(matchAttribute="productName"),
     "constraints[0].matchAttribute: 'productName' must include a domain"),
    ("matchAttribute with a bad name", constraint(matchAttribute="gpu.nvidia.com/product-name"),
     "'product-name' is not a C identifier"),
    ("constraint of no kind", constraint(requests=["gpus"]), "constraints[0].matchAttribute: required"),
    ("constraint naming no request", constraint(matchAttribute="gpu.nvidia.com/productName", requests=["gpu"]),
     "constraints[0].requests[0]: 'gpu' must be the name of a request in the claim"),
]


@pytest.mark.parametrize(("edit", "line"), [c[1:] for c in DRA_CASES], ids=[c[0] for c in DRA_CASES])
def test_plan_refuses_dra_objects_the_api_server_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         edit: Edit, line: str) -> None:
    snapshot = json.loads(DRA_SNAPSHOT.read_text(encoding="utf-8"))
    edit(snapshot)
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snapshot), encoding="utf-8")
    plan_refuses(capsys, path, DRA_POOLS, line, path)


def test_a_constraint_names_a_request_or_a_subrequest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snapshot = json.loads(DRA_SNAPSHOT.read_text(encoding="utf-8"))
    path = tmp_path / "snapshot.json"
    for ref, code in (("gpu/h100", 0), ("gpu/a100", 2)):
        FIRST(snapshot)["constraints"] = [{"matchAttribute": "gpu.nvidia.com/productName", "requests": [ref]}]
        path.write_text(json.dumps(snapshot), encoding="utf-8")
        assert main(["plan", "--snapshot", str(path), "--pools", str(DRA_POOLS)]) == code
    assert "constraints[0].requests[0]: 'gpu/a100' must be the name of a request" in one_line(capsys)


def test_the_loop_skips_such_a_dra_object_and_reads_the_rest() -> None:
    """Live: the same refusal goes to the cache's `skip` (a FailedToRead Warning Event on the object, the pass
    goes on without it)."""
    snapshot = json.loads(DRA_SNAPSHOT.read_text(encoding="utf-8"))
    exactly(allocationMode="Some")(snapshot)
    kinds = {k: [o for o in snapshot["items"] if o["kind"] == k]
             for k in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")}
    skipped: list[str] = []
    dra = dra_view(kinds["DeviceClass"], kinds["ResourceClaim"], kinds["ResourceClaimTemplate"],
                   kinds["ResourceSlice"], lambda kind, err, obj: skipped.append(str(err)))
    assert len(skipped) == 1 and skipped[0].startswith("ResourceClaimTemplate ml/one-gpu: ")
    assert "ml/one-gpu" not in dra.templates and "ml/two-alike" in dra.templates


def test_live_an_extended_resource_clash_leaves_the_later_class_out_with_its_reason() -> None:
    """Two DeviceClasses naming one extendedResourceName: the first by name serves it, the other is skipped
    (a FailedToRead Warning Event), the pass goes on; a DeviceTaintRule the API would refuse is skipped too."""
    snapshot = json.loads(DRA_SNAPSHOT.read_text(encoding="utf-8"))
    classes = [o for o in snapshot["items"] if o["kind"] == "DeviceClass"]
    twin = json.loads(json.dumps(next(c for c in classes if c["metadata"]["name"] == "gpu.nvidia.com")))
    twin["metadata"]["name"] = "l4.example.com"
    rule = {"kind": "DeviceTaintRule", "metadata": {"name": "bad"},
            "spec": {"deviceSelector": {}, "taint": {"key": "x", "effect": "PreferNoSchedule"}}}
    skipped: list[str] = []
    dra = dra_view([*classes, twin], [], [], [], lambda kind, err, obj: skipped.append(str(err)), [rule])
    assert skipped == ["DeviceClass l4.example.com: spec.extendedResourceName: nvidia.com/gpu is also served by "
                       "DeviceClass gpu.nvidia.com",
                       "DeviceTaintRule bad: spec.taint.effect: Unsupported value 'PreferNoSchedule': supported "
                       "values: NoSchedule, NoExecute, None"]
    assert set(dra.classes) == {"gpu.nvidia.com", "mig.nvidia.com"}


# --- network endpoints: checked before any work, one line, a bounded wait ------------------------------------
TRACE = "job_id,submit_s,gpus,duration_s,num_workers\nj1,0,1,600,1\n"
POOLS = ROOT / "examples" / "pools-aws.yaml"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("argv", "line"), [
    (["simulate", "--sweep", "unneeded_time=60", "--sweep-out", "{tmp}", "--ray", "head:port"],
     "--ray head:port: expected 'local', 'auto', HOST:PORT"),
    (["simulate", "--sweep", "unneeded_time=60", "--sweep-out", "{tmp}", "--ray", "10.0.0.5:70000"],
     "--ray 10.0.0.5:70000: expected"),
    (["simulate", "--sweep", "unneeded_time=60", "--sweep-out", "{tmp}", "--ray", "127.0.0.1:{closed}"],
     "--ray 127.0.0.1:{closed}: no Ray head answers at 127.0.0.1:{closed} within 5 s"),
    (["tune", "--p95-max", "600", "--out", "{tmp}/tuned.yaml", "--ray", "ray://127.0.0.1:{closed}"],
     "--ray ray://127.0.0.1:{closed}: no Ray head answers"),
    (["simulate", "--ray", "local"], "--ray local: only --sweep runs simulations in parallel"),
    (["simulate", "--workers", "4"], "--workers 4: only --sweep runs simulations in parallel"),
    (["trace", "export", "--prometheus", "http://127.0.0.1:99999", "--start", "now-1h", "--end", "now",
      "--out", "{tmp}/t.csv"], "--prometheus 'http://127.0.0.1:99999': the port must be a number from 1 to 65535"),
])
def test_endpoints_are_checked_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               argv: list[str], line: str) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE, encoding="utf-8")
    subst = {"{tmp}": str(tmp_path), "{closed}": str(closed_port())}

    def fill(text: str) -> str:
        for k, v in subst.items():
            text = text.replace(k, v)
        return text

    files = [] if argv[0] == "trace" else ["--trace", str(trace), "--pools", str(POOLS)]
    started = time.monotonic()
    assert main([*map(fill, argv), *files]) == 2
    assert time.monotonic() - started < 30
    assert fill(line) in one_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]  # nothing written


def test_an_unanswering_ray_head_is_one_line_after_the_stated_wait(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(batch, "RAY_CONNECT_S", 0.5)
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE, encoding="utf-8")
    started = time.monotonic()
    code = main(["simulate", "--trace", str(trace), "--pools", str(POOLS), "--sweep", "unneeded_time=60",
                 "--sweep-out", str(tmp_path), "--ray", "10.255.255.1:6379"])  # a non-routed address
    assert code == 2 and time.monotonic() - started < 5
    assert "--ray 10.255.255.1:6379: no Ray head answers at 10.255.255.1:6379 within 0.5 s" in one_line(capsys)


# --- pools and configs: what the cloud refuses, and settings that cancel each other --------------------------
SNAPSHOT = ROOT / "examples" / "snapshot-aws.json"
# test_bad_inputs_scaler's base pools: a 1-GPU spot pool, its on-demand fallback, an 8-GPU pool
BASE: dict[str, Any] = scaler_base.BASE


def pool(which: str, /, **fields: Any) -> Edit:
    def edit(cfg: dict[str, Any]) -> None:
        [p] = [p for p in cfg["pools"] if p["name"] == which]
        p.update(fields)
    return edit


CONFIG_CASES: list[tuple[str, Edit, str]] = [
    ("a boolean where a count is wanted", pool("gpu1-od", max=True), "pools[gpu1-od].max: expected an integer"),
    ("a boolean minimum", pool("gpu1-od", min=True), "pools[gpu1-od].min: expected an integer"),
    ("a root volume no cloud creates", pool("gpu1-od", root_volume_gib=10**9),
     "pools[gpu1-od].root_volume_gib: 1000000000 GiB is above the largest root volume aws creates (16384 GiB)"),
    ("a zone listed twice", pool("gpu1-od", zones=["us-east-1a", "us-east-1a"]),
     "pools[gpu1-od].zones: us-east-1a listed twice"),
    ("a DRA spot pool falling back to a device-plugin pool", pool("gpu1-spot", gpu_allocation="dra"),
     "pools[gpu1-spot].fallback: 'gpu1-od' allocates GPUs by device-plugin, this pool by dra"),
    ("a fixed unneeded time and adaptive bounds",
     lambda c: c.update(timings={"unneeded_time": 300}, scale_down={"unneeded_time_max": 900}),
     "scale_down.unneeded_time_max: sets the adaptive unneeded time, which the fixed timings.unneeded_time (300 s) "
     "replaces"),
]


@pytest.mark.parametrize(("edit", "line"), [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
def test_pools_the_cloud_refuses_or_that_contradict_themselves(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               edit: Edit, line: str) -> None:
    cfg = copy.deepcopy(BASE)
    edit(cfg)
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    plan_refuses(capsys, SNAPSHOT, path, line, path)


def test_run_refuses_such_a_config_before_the_cluster(tmp_path: Path) -> None:
    """A fixed unneeded time with the adaptive bounds at their defaults (what the Pulumi program's ConfigMap
    carries: every field) loads; bounds of their own beside it are refused."""
    cfg = {**copy.deepcopy(BASE), "timings": {"unneeded_time": 300}}
    rendered = parse_config(cfg, "scaler.yaml").model_dump(mode="json", by_alias=True, exclude_none=True)
    assert rendered["scale_down"]["unneeded_time_min"] == 20 and parse_config(rendered, "scaler.yaml")
    cfg["scale_down"] = {"unneeded_time_min": 60}
    path = tmp_path / "scaler.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    kubeconfig = tmp_path / "kubeconfig"  # never read: the config is refused first
    # its own process: `run` sets up the process's logging
    done = subprocess.run([sys.executable, "-m", "scaler", "run", "--config", str(path), "--kubeconfig",
                           str(kubeconfig), "--once"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          check=False)
    [err] = done.stderr.strip().splitlines()
    assert done.returncode == 2 and str(path) in err and "scale_down.unneeded_time_min" in err


def test_tune_refuses_a_fixed_unneeded_time_that_would_override_what_it_races(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE, encoding="utf-8")
    path = tmp_path / "candidates.yaml"
    path.write_text(yaml.safe_dump({**BASE, "timings": {"unneeded_time": 300}}), encoding="utf-8")
    assert main(["tune", "--trace", str(trace), "--pools", str(path), "--p95-max", "600",
                 "--out", str(tmp_path / "tuned.yaml")]) == 2
    assert f"{path}: timings.unneeded_time: a fixed unneeded time (300 s) would replace" in one_line(capsys)
    assert not (tmp_path / "tuned.yaml").exists()


# --- simulate, its sweeps and tune: settings that change nothing, or would mislead -------------------------
EIGHT: dict[str, Any] = {"cluster": "c", "cloud": "aws", "region": "us-east-1", "pools": [
    {"name": "gpu8-od", "instance_types": ["p5.48xlarge"], "zones": ["us-east-1a"], "max": 2, "min_pod_gpus": 8}]}
BLOCK: dict[str, Any] = {"cluster": "c", "cloud": "aws", "region": "us-east-1", "pools": [
    {"name": "gpu8-block", "capacity_type": "capacity-block", "instance_types": ["p5.48xlarge"],
     "zones": ["us-east-1a"], "max": 1, "fallback": "gpu8-od",
     "reservation": {"id": "cr-0123", "start": "2025-07-01T11:30:00Z", "end": "2025-07-06T11:30:00Z"}},
    {"name": "gpu8-od", "instance_types": ["p5.48xlarge"], "zones": ["us-east-1a"], "max": 2}]}


def block_at(start: float, end: float) -> dict[str, Any]:
    data = copy.deepcopy(BLOCK)
    data["pools"][0]["reservation"].update(start=start, end=end)
    return data


SIM_CASES: list[tuple[str, list[str], dict[str, Any] | None, str, str]] = [
    # (id, flags, pools data (None: examples/pools-aws.yaml), trace rows, the line)
    ("warm start without a warm pool", ["--warm-start", "30"], None, "j1,0,1,600,1",
     "--warm-start 30: {pools} has no warm pool (a pool's warm, or --warm), so it would change nothing"),
    ("a buffer the planner would cap", ["--buffer", "20000"], None, "j1,0,1,600,1",
     "--buffer 20000: {pools}: at most 10000 placeholders a CapacityBuffer"),
    ("a buffer no pool can hold", ["--buffer", "4"], EIGHT, "j1,0,8,600,1",
     "--buffer 4: {pools}: no pool's node can hold a 1-GPU placeholder"),
    ("a swept knob also given as its flag", ["--buffer", "8", "--sweep", "buffer_gpus=0,16", "--sweep-out", "{tmp}"],
     None, "j1,0,1,600,1", "--sweep buffer_gpus=0,16: --buffer 8 sets the same buffer_gpus"),
    ("a report that cannot be created", ["--report", "{tmp}/" + "r" * 300 + ".json"], None, "j1,0,1,600,1",
     "cannot be created: File name too long"),
    ("a Capacity Block at real dates", [], BLOCK, "j1,0,8,600,1",
     "{pools}: pools[gpu8-block].reservation: the block takes nodes from 2025-07-01T11:30:00Z to "
     "2025-07-06T10:30:00Z and the trace's jobs run from 0 s to 600 s"),
    ("a worker's error names the user's file", ["--sweep", "buffer_gpus=20000", "--sweep-out", "{tmp}",
                                                "--workers", "1"], None, "j1,0,1,600,1",
     "--sweep buffer_gpus=20000: --buffer 20000: {pools} with buffer_gpus=20000: at most 10000 placeholders"),
]


@pytest.mark.parametrize(("flags", "pools", "row", "line"), [c[1:] for c in SIM_CASES], ids=[c[0] for c in SIM_CASES])
def test_simulate_refuses_settings_that_would_mislead(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      flags: list[str], pools: dict[str, Any] | None, row: str,
                                                      line: str) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(f"job_id,submit_s,gpus,duration_s,num_workers\n{row}\n", encoding="utf-8")
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(pools) if pools else POOLS.read_text(encoding="utf-8"), encoding="utf-8")
    given = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    assert main(["simulate", "--trace", str(trace), "--pools", str(path), "--quiet", *given]) == 2
    err = one_line(capsys)
    assert line.replace("{pools}", str(path)) in err and "gpuburst-batch-" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pools.yaml", "t.csv"]  # nothing written


def test_a_block_is_refused_only_when_it_misses_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,num_workers\nj1,1000,8,600,1\n", encoding="utf-8")
    path = tmp_path / "pools.yaml"
    for end, code in ((7200, 0), (1000, 2)):  # taking nodes until 5400 s, then until 0 s (closed at the start)
        path.write_text(yaml.safe_dump(block_at(0, end)), encoding="utf-8")
        assert main(["simulate", "--trace", str(trace), "--pools", str(path), "--quiet"]) == code
    assert "it would be paid for and never used" in capsys.readouterr().err


def test_a_share_on_a_multi_gpu_job_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Warned, not refused: the other jobs are shared as asked; this one keeps whole GPUs."""
    trace = tmp_path / "shares.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status\n"
                     "f0,0,1,600,250,2,1024,LS,Running\nf1,0,2,600,500,2,1024,LS,Running\n", encoding="utf-8")
    shared = ROOT / "examples" / "pools-aws-shared.yaml"
    assert main(["simulate", "--trace", str(trace), "--pools", str(shared), "--gpu-sharing"]) == 0
    warnings = [x for x in capsys.readouterr().err.splitlines() if x.startswith("warning: --gpu-sharing")]
    assert warnings == [f"warning: --gpu-sharing: 1 jobs of several GPUs have gpu_milli below 1000 (the first at "
                        f"{trace}:3); they keep whole GPUs, as a share is of one GPU"]


@pytest.mark.parametrize(("taint", "line"), [
    ({"value": "x", "effect": "NoSchedule"}, "spec.taints[0].key: required"),
    ({"key": "bad key", "effect": "NoSchedule"}, "spec.taints[0].key: 'bad key' is not a qualified name"),
])
def test_plan_refuses_a_node_taint_the_api_server_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          taint: dict[str, str], line: str) -> None:
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    [node] = [o for o in snapshot["items"] if o["kind"] == "Node" and o["spec"].get("taints")]
    node["spec"]["taints"] = [taint]
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snapshot), encoding="utf-8")
    assert node["metadata"]["name"] in plan_refuses(capsys, path, POOLS, line, path)


def test_an_internal_error_is_one_line_and_its_traceback_when_asked(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """What no check foresaw never reaches a user as a traceback from any entry point (exit 1, one line)."""
    def broken(path: str, config: Any) -> Any:
        raise KeyError("pool-x")

    monkeypatch.setattr("scaler.sim.plan_command.load_snapshot", broken)
    monkeypatch.delenv("GPUBURST_TRACEBACK", raising=False)
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--pools", str(POOLS)]) == 1
    assert one_line(capsys) == ("error: plan: internal error KeyError: 'pool-x' (a bug: GPUBURST_TRACEBACK=1 shows "
                                "where; please report it)")
    monkeypatch.setenv("GPUBURST_TRACEBACK", "1")
    with pytest.raises(KeyError):
        main(["plan", "--snapshot", str(SNAPSHOT), "--pools", str(POOLS)])
