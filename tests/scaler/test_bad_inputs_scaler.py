"""Bad input to `python -m scaler run | plan | explain | simulate`: exit 2, one line on stderr naming the file
and the key (pool, field, row), no traceback, and nothing written.

Each table is one entry point's inputs: the pools / scaler config (read the same way by every subcommand,
so every case runs through each of them), the kubectl snapshot of `plan` / `explain`, the trace and the
flags of `simulate`. A case is the file's content (or a change to a valid one) and what the line must name.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.cli import main

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "examples" / "snapshot-aws.json"
EXAMPLE_POOLS = ROOT / "examples" / "pools-aws.yaml"
TRACE_HEADER = "job_id,submit_s,gpus,duration_s,num_workers"

BASE: dict[str, Any] = {
    "cluster": "c", "cloud": "aws", "region": "us-east-1",
    "pools": [
        {"name": "gpu1-spot", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"],
         "max": 4, "fallback": "gpu1-od"},
        {"name": "gpu1-od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 4},
        {"name": "gpu8-od", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "max": 2, "min_pod_gpus": 8},
    ],
}

Edit = Callable[[dict[str, Any]], None]


def pool(which: str, /, **fields: Any) -> Edit:
    def edit(cfg: dict[str, Any]) -> None:
        [p] = [p for p in cfg["pools"] if p["name"] == which]
        p.update(fields)
    return edit


def top(**fields: Any) -> Edit:
    return lambda cfg: cfg.update(fields)


# (id, content: bytes | an edit of BASE | None for "no such file", what the line must name)
POOLS_CASES: list[tuple[str, bytes | Edit | None, str]] = [
    # encodings and structure
    ("missing file", None, "cannot read"),
    ("non-UTF-8 byte", b"cluster: c\ncloud: aws\npools: []\n# caf\xe9\n", ":4: not UTF-8"),
    ("YAML syntax", b"cluster: c\npools: [\n", "not valid YAML"),
    ("empty file", b"", "expected a mapping at the top level"),
    ("a list at the top", b"- cluster: c\n", "expected a mapping at the top level"),
    ("pools not a list", top(pools={"a": 1}), "pools: Input should be a valid list"),
    ("pool not a mapping", top(pools=["gpu1"]), "pools[0]"),
    ("unknown pool key", pool("gpu1-od", colour="red"), "pools[gpu1-od].colour"),
    ("unknown top key", top(scan_interval=5), "scan_interval: Extra inputs"),
    # types and ranges
    ("max negative", pool("gpu1-od", max=-1), "pools[gpu1-od].max"),
    ("max text", pool("gpu1-od", max="ten"), "pools[gpu1-od].max"),
    ("max infinite", pool("gpu1-od", max=float("inf")), "pools[gpu1-od].max"),
    ("max huge", pool("gpu1-od", max=10**30), "pools[gpu1-od].max"),
    ("max zero", pool("gpu1-od", max=0), "pools[gpu1-od].max: 0"),
    ("min above max", pool("gpu1-od", min=5), "pools[gpu1-od].max: min (5) is greater than max (4)"),
    ("bad pool name", pool("gpu8-od", name="GPU_8"), "pools[GPU_8].name"),
    ("cluster name", top(cluster="bad name!"), "cluster"),
    ("spot factor above 1", top(spot_price_factor=2), "spot_price_factor"),
    ("spot factor NaN", top(spot_price_factor=float("nan")), "spot_price_factor"),
    ("scan interval zero", top(timings={"scan_interval": 0}), "timings.scan_interval"),
    ("timing infinite", top(timings={"unavailable_ttl": float("inf")}), "timings.unavailable_ttl"),
    ("timing of a year", top(timings={"backoff_max": 3.2e7}), "timings.backoff_max"),
    ("runtime watch waits backwards", top(runtime={"watch_backoff_initial": 60, "watch_backoff_max": 30}),
     "runtime.watch_backoff_initial: 60 s is above watch_backoff_max"),
    ("runtime lease too short", top(runtime={"lease_seconds": 1}), "runtime.lease_seconds"),
    ("catalogue memory infinite", top(catalogue={"x1": {"vcpu": 4, "memory_gib": float("inf"),
                                                        "price_per_hour": 1}}), "catalogue.x1.memory_gib"),
    ("taint without effect", pool("gpu1-od", taints=["a=b"]), "pools[gpu1-od].taints[0]: taint 'a=b' must look like"),
    ("taint effect unknown", pool("gpu1-od", taints=["a=b:Never"]), "pools[gpu1-od].taints[0].effect"),
    ("taint key invalid", pool("gpu1-od", taints=["bad key=b:NoSchedule"]), "pools[gpu1-od].taints[0].key"),
    ("label value a number", pool("gpu1-od", labels={"team": 7}), "pools[gpu1-od].labels.team"),
    ("instance_type and instance_types", pool("gpu1-od", instance_type="g6.xlarge"),
     "pools[gpu1-od].instance_type: give either instance_type or instance_types"),
    # references
    ("unknown instance type", pool("gpu1-od", instance_types=["g9.huge"]), "pools[gpu1-od].instance_types"),
    ("fallback undeclared", pool("gpu1-spot", fallback="nope"), "pools[gpu1-spot].fallback: 'nope'"),
    ("fallback to itself", pool("gpu1-spot", fallback="gpu1-spot"), "pools[gpu1-spot].fallback"),
    ("spot GPU pool without fallback", pool("gpu1-spot", fallback=None), "pools[gpu1-spot].fallback"),
    ("gpus_per_node wrong", pool("gpu1-od", gpus_per_node=2), "pools[gpu1-od].gpus_per_node"),
    ("min_pod_gpus above the node", pool("gpu1-od", min_pod_gpus=2), "pools[gpu1-od].min_pod_gpus"),
    # quantities
    ("overhead not a quantity", pool("gpu1-od", daemonset_overhead={"cpu": "1.5.3"}),
     "pools[gpu1-od].daemonset_overhead.cpu: not a quantity: '1.5.3'"),
    ("overhead negative", pool("gpu1-od", daemonset_overhead={"memory": "-1Gi"}),
     "pools[gpu1-od].daemonset_overhead.memory: '-1Gi' is negative"),
    ("overhead 1e400", pool("gpu1-od", daemonset_overhead={"cpu": "1e400"}),
     "pools[gpu1-od].daemonset_overhead.cpu"),
    ("overhead half a GPU", pool("gpu1-od", daemonset_overhead={"nvidia.com/gpu": "0.5"}),
     "pools[gpu1-od].daemonset_overhead.nvidia.com/gpu"),
    # cross-field
    ("overhead above the node", pool("gpu1-od", daemonset_overhead={"cpu": "8"}),
     "pools[gpu1-od].daemonset_overhead.cpu: 8 is more than g6.xlarge's allocatable cpu"),
    ("overhead pods above max_pods", pool("gpu1-od", daemonset_overhead={"pods": 200}),
     "pools[gpu1-od].daemonset_overhead.pods"),
    ("max_pods leaves no memory", pool("gpu1-od", max_pods=100000), "pools[gpu1-od].max_pods"),
    ("zone of another region", pool("gpu1-od", zones=["eu-west-1a"]),
     "pools[gpu1-od].zones: ['eu-west-1a'] are not zones of us-east-1"),
    ("zones of two regions, no region given", lambda c: (c.pop("region"), pool("gpu8-od", zones=["us-west-2a"])(c)),
     "pools[gpu8-od].zones: ['us-west-2a'] are not zones of us-east-1"),
    ("provision timeout below the GPU boot", top(timings={"provision_timeout": 200}),
     "timings.provision_timeout: 200 s is shorter than a GPU node's boot"),
    ("backoff bounds reversed", top(timings={"backoff_initial": 2000, "backoff_max": 600}),
     "timings.backoff_initial: 2000 s is above backoff_max"),
    ("unneeded time below a pass", top(timings={"unneeded_time": 5, "scan_interval": 10}),
     "timings.unneeded_time: 5 s is shorter than scan_interval"),
    ("adaptive unneeded time bounds reversed", top(scale_down={"unneeded_time_min": 900, "unneeded_time_max": 600}),
     "scale_down.unneeded_time_min: 900 s is above unneeded_time_max (600 s)"),
    ("max_gpus below one node", top(limits={"max_gpus": 4}), "limits.max_gpus: 4 is below one node of pool 'gpu8-od'"),
    ("cost cap below one node", top(limits={"max_cost_per_hour": 0.1}), "limits.max_cost_per_hour"),
    ("max_nodes below the minimums", lambda c: (pool("gpu1-od", min=3)(c), c.update(limits={"max_nodes": 2})),
     "limits.max_nodes: 2 is below the pools' minimums"),
    ("pool in another cloud", pool("gpu1-od", cloud="azure"), "pools[gpu1-od]"),
    ("DRA on a CPU pool", lambda c: c["pools"].append(
        {"name": "cpu", "role": "general", "instance_types": ["m5.large"], "zones": ["us-east-1a"], "max": 2,
         "gpu_allocation": "dra"}), "pools[cpu].gpu_allocation: gpu_allocation dra on a role general pool"),
    ("DRA on a GPU the catalogue cannot describe", lambda c: (
        c.update(catalogue={"g9.xlarge": {"vcpu": 4, "memory_gib": 16, "gpus": 1, "gpu_model": "X1",
                                          "gpu_memory_gib": 24, "price_per_hour": 1.0}}),
        pool("gpu1-od", instance_types=["g9.xlarge"], gpu_allocation="dra")(c)),
     "pools[gpu1-od].gpu_allocation: gpu_allocation dra: the catalogue cannot describe g9.xlarge's X1 24GB"),
    ("DRA with time-slicing", pool("gpu1-od", gpu_allocation="dra", gpu_sharing={"time_slicing": {"replicas": 2}}),
     "pools[gpu1-od].gpu_allocation: gpu_allocation dra with time_slicing"),
]


def write_pools(tmp_path: Path, content: bytes | Edit | None) -> Path:
    path = tmp_path / "pools.yaml"
    if content is None:
        return tmp_path / "no-such-pools.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
        return path
    cfg = copy.deepcopy(BASE)
    content(cfg)
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def write_trace(tmp_path: Path, rows: list[str], name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([TRACE_HEADER, *rows]) + "\n", encoding="utf-8")
    return path


def one_line(capsys: pytest.CaptureFixture[str], code: int, *names: str) -> str:
    """Exit 2, exactly one line on stderr, no traceback, and the line names every one of `names`."""
    _out, err = capsys.readouterr()
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


def test_the_base_config_is_good(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each case below is one change away from a config that loads and plans: the change is the fault."""
    pools = write_pools(tmp_path, lambda cfg: None)
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--pools", str(pools)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("command", ["plan", "explain", "simulate", "run"])
@pytest.mark.parametrize(("content", "field"), [c[1:] for c in POOLS_CASES], ids=[c[0] for c in POOLS_CASES])
def test_bad_pools_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str,
                        content: bytes | Edit | None, field: str) -> None:
    pools = write_pools(tmp_path, content)
    report = tmp_path / "report.json"
    args = {
        "plan": ["plan", "--snapshot", str(SNAPSHOT), "--pools", str(pools)],
        "explain": ["explain", "--snapshot", str(SNAPSHOT), "--pools", str(pools), "--json"],
        "simulate": ["simulate", "--trace", str(write_trace(tmp_path, ["j1,0,1,600,1"])), "--pools", str(pools),
                     "--quiet", "--report", str(report)],
        "run": ["run", "--config", str(pools), "--metrics-port", "0", "--log-format", "text"],
    }[command]
    one_line(capsys, main(args), str(pools), field)
    assert not report.exists()  # nothing half-written


SNAPSHOT_CASES: list[tuple[str, Callable[[dict[str, Any]], Any] | bytes | None, str]] = [
    ("missing file", None, "cannot read"),
    ("non-UTF-8 byte", b'{"items": []}\n\xff', ":2: not UTF-8"),
    ("not JSON", b'{"items": [', "not valid JSON"),
    ("not a List", lambda d: [], "expected a List with 'items'"),
    ("items not objects", lambda d: d.update(items=["pod"]), "items[0] is not an object"),
    ("no metadata.name", lambda d: d["items"][4].update(metadata={}), "items[4] (Pod): metadata.name"),
    ("negative cpu", lambda d: _container(d, 4)["resources"]["requests"].update(cpu="-1"),
     "pod ml/finetune-bert-0: spec.containers[0].resources.requests.cpu: '-1' is negative"),
    ("cpu 1e400", lambda d: _container(d, 4)["resources"]["requests"].update(cpu="1e400"),
     "pod ml/finetune-bert-0: spec.containers[0].resources.requests.cpu"),
    ("half a GPU", lambda d: _container(d, 4)["resources"]["limits"].update({"nvidia.com/gpu": "0.5"}),
     "spec.containers[0].resources.limits.nvidia.com/gpu: '0.5' is not a whole number"),
    ("negative GPUs", lambda d: _container(d, 4)["resources"]["limits"].update({"nvidia.com/gpu": -2}),
     "spec.containers[0].resources.limits.nvidia.com/gpu: -2 is negative"),
    ("memory not a quantity", lambda d: _container(d, 4)["resources"]["requests"].update(memory="lots"),
     "spec.containers[0].resources.requests.memory: not a quantity: 'lots'"),
    ("requests not a mapping", lambda d: _container(d, 4)["resources"].update(requests=["cpu"]),
     "spec.containers[0].resources.requests"),
    ("overhead bad", lambda d: d["items"][4]["spec"].update(overhead={"cpu": "x"}), "spec.overhead.cpu"),
    ("node allocatable bad", lambda d: d["items"][0]["status"]["allocatable"].update(memory="-5Gi"),
     "node ip-10-0-1-11.ec2.internal: status.allocatable.memory: '-5Gi' is negative"),
    ("label value a list", lambda d: d["items"][4]["metadata"].update(labels={"team": ["a"]}),
     "pod ml/finetune-bert-0: metadata.labels: expected a mapping of strings to strings"),
    ("tolerations a string", lambda d: d["items"][4]["spec"].update(tolerations="nvidia.com/gpu"),
     "pod ml/finetune-bert-0: spec.tolerations: expected a list of objects"),
    ("toleration operator unknown", lambda d: d["items"][4]["spec"].update(tolerations=[{"operator": "In"}]),
     "spec.tolerations[0].operator: 'In' is not Equal or Exists"),
    ("selector values not strings", lambda d: d["items"][4]["spec"].update(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": [1]}]}]}}}),
     "nodeSelectorTerms[0].matchExpressions[0].values: expected a list of strings"),
    ("node taint effect unknown", lambda d: d["items"][2]["spec"].update(taints=[{"key": "a", "effect": "Never"}]),
     "node ip-10-0-1-40.ec2.internal: spec.taints[0].effect: 'Never'"),
    ("namespace a number", lambda d: d["items"][4]["metadata"].update(namespace=7), "metadata.namespace"),
    ("creation time not a time", lambda d: d["items"][4]["metadata"].update(creationTimestamp="yesterday"),
     "metadata.creationTimestamp: not an RFC 3339 time"),
]


def _container(data: dict[str, Any], index: int) -> dict[str, Any]:
    container: dict[str, Any] = data["items"][index]["spec"]["containers"][0]
    return container


@pytest.mark.parametrize("command", ["plan", "explain"])
@pytest.mark.parametrize(("content", "field"), [c[1:] for c in SNAPSHOT_CASES], ids=[c[0] for c in SNAPSHOT_CASES])
def test_bad_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str,
                      content: Callable[[dict[str, Any]], Any] | bytes | None, field: str) -> None:
    path = tmp_path / "snapshot.json"
    if content is None:
        path = tmp_path / "no-such-snapshot.json"
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        data = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
        replaced = content(data)
        path.write_text(json.dumps(data if replaced is None else replaced), encoding="utf-8")
    one_line(capsys, main([command, "--snapshot", str(path), "--pools", str(EXAMPLE_POOLS)]), str(path), field)


TRACE_CASES: list[tuple[str, bytes, str]] = [
    ("non-UTF-8 byte", f"{TRACE_HEADER}\nj1,0,1,600,1\nj\xe9,5,1,600,1\n".encode("latin-1"), ":3: not UTF-8"),
    ("NUL byte", f"{TRACE_HEADER}\nj1,0,1,600,1\x00\n".encode(), ":2: num_workers is '1\\x00'"),
    ("empty", b"", "empty trace"),
    ("unknown header", b"id,when,gpus\n", ":1: unknown header"),
    ("short row", f"{TRACE_HEADER}\nj1,0,1\n".encode(), ":2: 3 fields, the header has 5"),
    ("empty job id", f"{TRACE_HEADER}\n,0,1,600,1\n".encode(), ":2: job_id is empty"),
    ("duplicate job id", f"{TRACE_HEADER}\nj1,0,1,600,1\nj1,5,1,600,1\n".encode(), ":3: job_id 'j1' appears twice"),
    ("negative GPUs", f"{TRACE_HEADER}\nj1,0,-1,600,1\n".encode(), ":2: gpus is '-1'"),
    ("half a GPU", f"{TRACE_HEADER}\nj1,0,0.5,600,1\n".encode(), ":2: gpus is '0.5', expected an integer"),
    ("a million GPUs and one", f"{TRACE_HEADER}\nj1,0,1000001,600,1\n".encode(), ":2: gpus is '1000001', more than"),
    ("duration not a number", f"{TRACE_HEADER}\nj1,0,1,abc,1\n".encode(), ":2: duration_s is 'abc'"),
    ("duration 1e400", f"{TRACE_HEADER}\nj1,0,1,1e400,1\n".encode(), ":2: duration_s is '1e400'"),
    ("duration of a century", f"{TRACE_HEADER}\nj1,0,1,3.2e9,1\n".encode(), ":2: duration_s is '3.2e9', more than"),
    ("submit NaN", f"{TRACE_HEADER}\nj1,nan,1,600,1\n".encode(), ":2: submit_s is 'nan'"),
    ("submit out of order", f"{TRACE_HEADER}\nj1,50,1,600,1\nj2,10,1,600,1\n".encode(), ":3: submit_s 10"),
    ("alibaba cpu negative",
     b"job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status\nj1,0,1,60,1000,-4,100,LS,Done\n",
     ":2: cpu is '-4'"),
    ("alibaba gpu_milli above 1000",
     b"job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status\nj1,0,1,60,1500,4,100,LS,Done\n",
     ":2: gpu_milli is '1500', more than 1000"),
    ("alibaba job with nothing",
     b"job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status\nj1,0,0,60,0,0,100,LS,Done\n",
     ":2: a job with neither GPUs nor cpu"),
]


@pytest.mark.parametrize(("content", "field"), [c[1:] for c in TRACE_CASES], ids=[c[0] for c in TRACE_CASES])
def test_bad_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, field: str) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_bytes(content)
    pools = write_pools(tmp_path, lambda cfg: None)
    report = tmp_path / "r.json"
    code = main(["simulate", "--trace", str(trace), "--pools", str(pools), "--quiet", "--report", str(report)])
    one_line(capsys, code, str(trace), field)
    assert not report.exists()


def test_missing_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pools = write_pools(tmp_path, lambda cfg: None)
    code = main(["simulate", "--trace", str(tmp_path / "none.csv"), "--pools", str(pools), "--quiet"])
    one_line(capsys, code, str(tmp_path / "none.csv"), "cannot read")


FLAG_CASES: list[tuple[str, list[str], str]] = [
    ("hours zero", ["--hours", "0"], "--hours 0.0: must be a finite number > 0"),
    ("hours NaN", ["--hours", "nan"], "--hours nan"),
    ("hours infinite", ["--hours", "inf"], "--hours inf"),
    ("start hour negative", ["--start-hour", "-1"], "--start-hour -1.0: must be a finite number >= 0"),
    ("start hour past the trace", ["--start-hour", "2"], "--start-hour 2: {trace} has no job submitted from hour 2 on"),
    ("interruption rate negative", ["--interruption-rate", "-0.1"], "--interruption-rate -0.1"),
    ("interruption rate NaN", ["--interruption-rate", "nan"], "--interruption-rate nan"),
    ("device plugin delay infinite", ["--device-plugin-delay", "inf"], "--device-plugin-delay inf"),
    ("outage malformed", ["--spot-outage", "us-east-1a:100"], "--spot-outage us-east-1a:100: expected ZONE"),
    ("outage ends before it starts", ["--spot-outage", "us-east-1a:100:50"], "--spot-outage us-east-1a:100:50"),
    ("outage zone of no pool", ["--spot-outage", "eu-west-1a:0:100"], "zone 'eu-west-1a' is in no pool"),
    ("report into a missing folder", ["--report", "{tmp}/nowhere/r.json"], "--report {tmp}/nowhere/r.json: folder"),
    ("plot into a missing folder", ["--plot", "{tmp}/nowhere/t.png"], "--plot {tmp}/nowhere/t.png: folder"),
    ("report onto a folder", ["--report", "{tmp}"], "--report {tmp}: is a folder"),
]


@pytest.mark.parametrize(("flags", "field"), [c[1:] for c in FLAG_CASES], ids=[c[0] for c in FLAG_CASES])
def test_bad_simulate_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], field: str) -> None:
    trace = write_trace(tmp_path, ["j1,0,1,600,1"])
    pools = write_pools(tmp_path, lambda cfg: None)
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    one_line(capsys, main(["simulate", "--trace", str(trace), "--pools", str(pools), "--quiet", *flags]),
             field.replace("{tmp}", str(tmp_path)).replace("{trace}", str(trace)))


ARGPARSE_CASES: list[tuple[str, list[str], str]] = [
    ("no command", [], "python -m scaler: the following arguments are required: command"),
    ("unknown command", ["simulte"], "python -m scaler: argument command: invalid choice: 'simulte'"),
    ("missing --trace", ["simulate", "--pools", "p.yaml"], "the following arguments are required: --trace"),
    ("hours not a number", ["simulate", "--trace", "t", "--pools", "p", "--hours", "two"],
     "argument --hours: invalid float value: 'two'"),
    ("unknown scheduler", ["simulate", "--trace", "t", "--pools", "p", "--scheduler", "fastest"],
     "argument --scheduler: invalid choice: 'fastest'"),
    ("seed not an integer", ["simulate", "--trace", "t", "--pools", "p", "--seed", "1.5"], "argument --seed"),
    ("plan without --snapshot", ["plan", "--pools", "p"], "the following arguments are required: --snapshot"),
    ("run without --config", ["run"], "the following arguments are required: --config"),
    ("run metrics port not a number", ["run", "--config", "c", "--metrics-port", "http"], "argument --metrics-port"),
]


@pytest.mark.parametrize(("args", "field"), [c[1:] for c in ARGPARSE_CASES], ids=[c[0] for c in ARGPARSE_CASES])
def test_bad_command_line(capsys: pytest.CaptureFixture[str], args: list[str], field: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert isinstance(exited.value.code, int)
    one_line(capsys, exited.value.code, field)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_report_into_a_read_only_folder_is_refused_before_the_run(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    trace, pools = write_trace(tmp_path, ["j1,0,1,600,1"]), write_pools(tmp_path, lambda cfg: None)
    code = main(["simulate", "--trace", str(trace), "--pools", str(pools), "--report", str(locked / "r.json")])
    one_line(capsys, code, "not writable")


def test_a_user_sees_one_line_and_no_traceback_from_the_real_command(tmp_path: Path) -> None:
    """The same through `python -m scaler` in a child process, as a user runs it."""
    trace = tmp_path / "t.csv"
    trace.write_bytes(f"{TRACE_HEADER}\nj1,0,1,600,1\nj\xe9,5,1,600,1\n".encode("latin-1"))
    pools = write_pools(tmp_path, pool("gpu1-od", daemonset_overhead={"cpu": "1.5.3"}))
    for args in (["simulate", "--trace", str(trace), "--pools", str(EXAMPLE_POOLS), "--quiet"],
                 ["plan", "--snapshot", str(SNAPSHOT), "--pools", str(pools)]):
        proc = subprocess.run([sys.executable, "-m", "scaler", *args], capture_output=True, text=True, check=False,
                              cwd=ROOT, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stdout == ""


def test_output_piped_into_a_closed_reader_ends_quietly(tmp_path: Path) -> None:
    """`python -m scaler explain ... | head -1`: the reader goes away; no BrokenPipeError traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "scaler", "explain", "--snapshot", str(SNAPSHOT), "--pools",
                             str(EXAMPLE_POOLS), "--verbose"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err, err
