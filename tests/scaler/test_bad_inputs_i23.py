"""Issue 23's bad inputs: each is refused with exit 2 and one line naming the flag (or file and field), no
traceback, and nothing written or contacted before the check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scaler.cli import main
from scaler.core.config.settings import ConfigError, parse_config
from scaler.kube.convert import SnapshotError
from scaler.kube.view import cluster_view

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "scaler-aws.yaml"


def scaler(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scaler", *argv], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=60, check=False)


def refused(done: subprocess.CompletedProcess[str], *named: str) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    for n in named:
        assert n in line
    return line


@pytest.mark.parametrize(("flag", "value"), [
    ("--metrics-port", "70000"), ("--metrics-port", "-1"), ("--interval", "-5"), ("--interval", "0"),
    ("--interval", "nan"), ("--sync-timeout", "-1"),
])
def test_run_numeric_flags_are_range_checked(tmp_path: Path, flag: str, value: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"  # never read: the flags are checked first
    done = scaler("run", "--config", str(EXAMPLE), "--kubeconfig", str(kubeconfig), "--once", flag, value)
    refused(done, flag, value)
    assert not kubeconfig.exists()


def test_unavailable_ttl_shorter_than_the_scan_interval_is_refused() -> None:
    raw = {"cluster": "c", "cloud": "aws", "region": "us-east-1",
           "timings": {"scan_interval": 30, "unavailable_ttl": 10},
           "pools": [{"name": "gpu", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 2}]}
    with pytest.raises(ConfigError) as err:
        parse_config(raw, "scaler.yaml")
    [line] = str(err.value).splitlines()
    assert "scaler.yaml" in line and "timings.unavailable_ttl" in line and "scan_interval" in line


def no_aws_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", **extra)
    return env


@pytest.mark.parametrize(("argv", "named"), [
    (["--cluster", ""], "--cluster"),
    (["--cluster", "ml cluster"], "--cluster"),
    (["--cluster", "ml", "--output", "{tmp}"], "--output"),
    (["--cluster", "ml", "--output", "{tmp}/missing/pools.yaml"], "--output"),
    (["--cluster", "ml", "--apply", "--dry-run"], "--apply"),
    (["--cluster", "ml", "--region", "us east 1", "--output", "{tmp}/pools.yaml"], "--region"),
    (["--cluster", "ml", "--output", "{tmp}/pools.yaml"], "--region"),  # no region anywhere
])
def test_import_pools_checks_its_flags_before_the_cloud(tmp_path: Path, argv: list[str], named: str) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    done = scaler("import-pools", "--cloud", "aws", *args, env=no_aws_env(tmp_path))
    refused(done, named)
    assert not (tmp_path / "pools.yaml").exists() and not (tmp_path / "missing").exists()


# --- simulate: its outputs and flags checked before the run ------------------------------------------------
TRACE_HEADER = "job_id,submit_s,gpus,duration_s,num_workers"
SHARE_HEADER = "job_id,submit_s,gpus,duration_s,gpu_milli,cpu,mem_mib,qos,status"
SHARED_POOLS = ROOT / "examples" / "pools-aws-shared.yaml"
WHOLE_POOLS = ROOT / "examples" / "pools-aws.yaml"


@pytest.mark.parametrize(("argv", "named"), [
    (["--report", "{trace}"], "--report {trace}: is the --trace file"),
    (["--report", "{pools}"], "--report {pools}: is the --pools file"),
    (["--plot", "{tmp}/timeline.txt"], "--plot {tmp}/timeline.txt: the timeline is written as .png, .svg, .pdf"),
    (["--plot", "{tmp}/timeline"], "--plot {tmp}/timeline"),
    (["--plot", "{trace}"], "--plot {trace}"),
    (["--report", "{tmp}/r.json", "--plot", "{tmp}/r.json"], "--plot {tmp}/r.json: is the --report file"),
    (["--interruption-rate", "1e9"], "--interruption-rate 1e+09: at most 10"),
    (["--interruption-rate", "11"], "--interruption-rate 11: at most 10"),
    (["--gpu-sharing", "--pools", "{shared}"], "--gpu-sharing: {trace} has no job of a GPU share"),
    (["--gpu-sharing", "--trace", "{shares}"], "--gpu-sharing: {pools} has no time-sliced or MIG pool"),
])
def test_simulate_checks_its_outputs_and_flags_before_the_run(tmp_path: Path, argv: list[str], named: str) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(f"{TRACE_HEADER}\nj1,0,1,600,1\n", encoding="utf-8")
    shares = tmp_path / "shares.csv"
    shares.write_text(f"{SHARE_HEADER}\nf0,0,1,600,250,2,1024,LS,Running\n", encoding="utf-8")
    pools = tmp_path / "pools.yaml"
    pools.write_text(WHOLE_POOLS.read_text(encoding="utf-8"), encoding="utf-8")
    subst = {"{trace}": str(trace), "{pools}": str(pools), "{tmp}": str(tmp_path), "{shared}": str(SHARED_POOLS),
             "{shares}": str(shares)}

    def fill(text: str) -> str:
        for k, v in subst.items():
            text = text.replace(k, v)
        return text

    given = [fill(a) for a in argv]
    base = {"--trace": str(trace), "--pools": str(pools)}
    for flag in ("--trace", "--pools"):
        if flag in given:
            base[flag] = given.pop(given.index(flag) + 1)
            given.remove(flag)
    before = {p: p.read_bytes() for p in (trace, pools)}
    done = scaler("simulate", "--quiet", *(x for kv in base.items() for x in kv), *given)
    refused(done, fill(named))
    assert {p: p.read_bytes() for p in (trace, pools)} == before  # no input overwritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pools.yaml", "shares.csv", "t.csv"]  # nothing written


# --- plan / explain: what the API server refuses is refused, not reinterpreted -----------------------------
SNAPSHOT = ROOT / "examples" / "snapshot-aws.json"
POD = "pod ml/finetune-bert-0"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _spec(data: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = data["items"][4]["spec"]
    return spec


def _spread(**fields: Any) -> Callable[[dict[str, Any]], None]:
    constraint = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "x"}}, **fields}
    return lambda d: _spec(d).update(topologySpreadConstraints=[constraint])


def _anti(term: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda d: _spec(d).update(affinity={"podAntiAffinity": {REQUIRED: [term]}})


def _node_affinity(expr: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda d: _spec(d).update(affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
        {"matchExpressions": [expr]}]}}})


def _storage_class(mode: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["items"].append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                        "metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
                                        "volumeBindingMode": mode})


SPREAD = "spec.topologySpreadConstraints[0]"
ANTI = f"spec.affinity.podAntiAffinity.{REQUIRED}[0]"
TERM = f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0]"
API_REFUSED: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("maxSkew 0", _spread(maxSkew=0), f"{POD}: {SPREAD}.maxSkew: 0 must be an integer greater than zero"),
    ("whenUnsatisfiable unknown", _spread(whenUnsatisfiable="Sometimes"), f"{POD}: {SPREAD}.whenUnsatisfiable"),
    ("whenUnsatisfiable missing", _spread(whenUnsatisfiable=None), f"{POD}: {SPREAD}.whenUnsatisfiable"),
    ("spread topologyKey empty", _spread(topologyKey=""), f"{POD}: {SPREAD}.topologyKey"),
    ("minDomains 0", _spread(minDomains=0), f"{POD}: {SPREAD}.minDomains"),
    ("spread selector operator Equals", _spread(labelSelector={"matchExpressions": [
        {"key": "app", "operator": "Equals", "values": ["x"]}]}),
     f"{POD}: {SPREAD}.labelSelector.matchExpressions[0].operator: 'Equals' is not a valid selector operator"),
    ("label selector Gt", _spread(labelSelector={"matchExpressions": [
        {"key": "a", "operator": "Gt", "values": ["1"]}]}),
     f"{POD}: {SPREAD}.labelSelector.matchExpressions[0].operator"),
    ("anti-affinity topologyKey missing", _anti({"labelSelector": {"matchLabels": {"app": "x"}}}),
     f"{POD}: {ANTI}.topologyKey"),
    ("anti-affinity selector operator Equals", _anti({"topologyKey": "kubernetes.io/hostname", "labelSelector": {
        "matchExpressions": [{"key": "app", "operator": "Equals", "values": ["x"]}]}}),
     f"{POD}: {ANTI}.labelSelector.matchExpressions[0].operator"),
    ("In without values", _anti({"topologyKey": "kubernetes.io/hostname", "labelSelector": {
        "matchExpressions": [{"key": "app", "operator": "In", "values": []}]}}),
     f"{POD}: {ANTI}.labelSelector.matchExpressions[0].values"),
    ("node selector Gt not an integer", _node_affinity({"key": "gpu-count", "operator": "Gt", "values": ["four"]}),
     f"{POD}: {TERM}.values: 'four' is not an integer"),
    ("node selector Lt with two values", _node_affinity({"key": "gpu-count", "operator": "Lt", "values": ["1", "2"]}),
     f"{POD}: {TERM}.values"),
    ("node selector Exists with values", _node_affinity({"key": "gpu", "operator": "Exists", "values": ["x"]}),
     f"{POD}: {TERM}.values"),
    ("volumeBindingMode unknown", _storage_class("Eventually"),
     "storageclass gp3: volumeBindingMode: 'Eventually' is not one of Immediate, WaitForFirstConsumer"),
]


@pytest.mark.parametrize("command", ["plan", "explain"])
@pytest.mark.parametrize(("edit", "named"), [c[1:] for c in API_REFUSED], ids=[c[0] for c in API_REFUSED])
def test_plan_refuses_what_the_api_server_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str,
                                                  edit: Callable[[dict[str, Any]], None], named: str) -> None:
    data = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code = main([command, "--snapshot", str(path), "--pools", str(WHOLE_POOLS)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert str(path) in line and named in line, line


def test_the_loop_skips_such_an_object_and_scales_the_rest() -> None:
    """In the loop the same SnapshotError goes to `skip` (a FailedToRead Warning Event on the object)."""
    data = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    _spread(maxSkew=0)(data)
    nodes = [o for o in data["items"] if o["kind"] == "Node"]
    pods = [o for o in data["items"] if o["kind"] == "Pod"]
    skipped: list[str] = []

    def skip(err: SnapshotError, obj: dict[str, Any]) -> None:
        skipped.append(str(err))

    view = cluster_view(nodes, pods, skip=skip)
    assert skipped == [f"{POD}: {SPREAD}.maxSkew: 0 must be an integer greater than zero"]
    assert view.pending and all(p.name != "finetune-bert-0" for p in view.pending)


# --- pools that contradict each other or the pool model ----------------------------------------------------
def _pools(**edits: dict[str, Any]) -> dict[str, Any]:
    pools = {
        "gpu1-spot": {"capacity_type": "spot", "instance_types": ["g6.xlarge"], "max": 4, "fallback": "gpu1-od"},
        "gpu1-od": {"instance_types": ["g6.xlarge"], "max": 4},
        "ts-spot": {"capacity_type": "spot", "instance_types": ["g6.xlarge"], "max": 4, "fallback": "ts-od",
                    "gpu_sharing": {"time_slicing": {"replicas": 4}}},
        "ts-od": {"instance_types": ["g6.xlarge"], "max": 4, "gpu_sharing": {"time_slicing": {"replicas": 4}}},
    }
    for name, fields in edits.items():
        pools[name].update(fields)
    return {"cluster": "c", "cloud": "aws", "region": "us-east-1",
            "pools": [{"name": n, "zones": ["us-east-1a"], **p} for n, p in pools.items()]}


CONTRADICTIONS: list[tuple[str, dict[str, Any], str]] = [
    ("shared pool falls back to whole GPUs", _pools(**{"ts-spot": {"fallback": "gpu1-od"}}),
     "pools[ts-spot].fallback: 'gpu1-od' gives whole GPUs, this pool time-slicing"),
    ("whole-GPU pool falls back to a shared one", _pools(**{"gpu1-spot": {"fallback": "ts-od"}}),
     "pools[gpu1-spot].fallback: 'ts-od' gives time-slicing, this pool whole GPUs"),
    ("replicas label against gpu_sharing", _pools(**{"ts-od": {"labels": {"nvidia.com/gpu.replicas": "8"}}}),
     "pools[ts-od].labels.nvidia.com/gpu.replicas: '8' overrides '4'"),
    ("replicas label on a whole-GPU pool", _pools(**{"gpu1-od": {"labels": {"nvidia.com/gpu.replicas": "4"}}}),
     "pools[gpu1-od].labels.nvidia.com/gpu.replicas: is spelled by gpu_sharing"),
    ("pool label", _pools(**{"gpu1-od": {"labels": {"gpuburst.io/pool": "other"}}}),
     "pools[gpu1-od].labels.gpuburst.io/pool: 'other' overrides 'gpu1-od'"),
    ("capacity-type label", _pools(**{"gpu1-od": {"labels": {"gpuburst.io/capacity-type": "spot"}}}),
     "pools[gpu1-od].labels.gpuburst.io/capacity-type: 'spot' overrides 'on-demand'"),
    ("sharing taint against gpu_sharing",
     _pools(**{"ts-od": {"taints": ["gpuburst.io/gpu-sharing=mig-single:NoSchedule"]}}),
     "pools[ts-od].taints[0]: gpuburst.io/gpu-sharing=mig-single:NoSchedule overrides"),
    ("sharing taint on a whole-GPU pool",
     _pools(**{"gpu1-od": {"taints": ["gpuburst.io/gpu-sharing=time-slicing:NoSchedule"]}}),
     "pools[gpu1-od].taints[0]: gpuburst.io/gpu-sharing is spelled by gpu_sharing"),
    ("GPU taint with another effect", _pools(**{"gpu1-od": {"taints": ["nvidia.com/gpu=present:NoExecute"]}}),
     "pools[gpu1-od].taints[0]: nvidia.com/gpu=present:NoExecute overrides the pool's own nvidia.com/gpu"),
]


@pytest.mark.parametrize(("raw", "named"), [c[1:] for c in CONTRADICTIONS], ids=[c[0] for c in CONTRADICTIONS])
def test_pools_that_contradict_the_pool_model_are_refused_at_load(raw: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(raw, "pools.yaml")
    [line] = str(err.value).splitlines()
    assert line.startswith("pools.yaml: ") and named in line, line


def test_what_the_pool_model_derives_may_be_repeated() -> None:
    """A label or taint equal to the derived one contradicts nothing (import-pools may write them)."""
    parse_config(_pools(), "pools.yaml")
    parse_config(_pools(**{"ts-od": {"labels": {"nvidia.com/gpu.replicas": "4", "team": "ml"},
                                     "taints": ["gpuburst.io/gpu-sharing=time-slicing:NoSchedule"]}}), "pools.yaml")


def test_a_contradiction_is_one_line_from_the_command(tmp_path: Path) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text(json.dumps(_pools(**{"ts-spot": {"fallback": "gpu1-od"}})), encoding="utf-8")
    refused(scaler("plan", "--snapshot", str(SNAPSHOT), "--pools", str(pools)), str(pools), "pools[ts-spot].fallback")


# --- messages that leaked internals --------------------------------------------------------------------------
def _gpu_pool(sharing: Any, cluster: str = "c") -> dict[str, Any]:
    return {"cluster": cluster, "cloud": "aws", "region": "us-east-1", "pools": [
        {"name": "g", "instance_types": ["p4de.24xlarge"], "zones": ["us-east-1a"], "max": 2, "gpu_sharing": sharing}]}


LEAKS: list[tuple[str, dict[str, Any], str, str]] = [
    ("layout a number", _gpu_pool({"mig": {"strategy": "mixed", "layout": 5}}),
     "pools[g].gpu_sharing.mig.layout: expected a string or a mapping", "layout.str"),
    ("layout count not a number", _gpu_pool({"mig": {"strategy": "mixed", "layout": {"1g.10gb": "x"}}}),
     "pools[g].gpu_sharing.mig.layout.1g.10gb: expected an integer", "dict[str,int]"),
    ("time_slicing a number", _gpu_pool({"time_slicing": 4}),
     "pools[g].gpu_sharing.time_slicing: expected a mapping", "TimeSlicing"),
    ("gpu_sharing a list", _gpu_pool([1]), "pools[g].gpu_sharing: expected a mapping", "GpuSharing"),
    ("cluster empty", _gpu_pool(None, cluster=""), "cluster: '' must be 1-100 letters, digits", "^["),
]


@pytest.mark.parametrize(("raw", "named", "leak"), [c[1:] for c in LEAKS], ids=[c[0] for c in LEAKS])
def test_config_messages_name_the_field_not_the_validator(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          raw: dict[str, Any], named: str, leak: str) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text(json.dumps(raw), encoding="utf-8")
    code = main(["plan", "--snapshot", str(SNAPSHOT), "--pools", str(pools)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    [line] = err.strip().splitlines()
    assert f"{pools}: {named}" in line and leak not in line and "Input should" not in line, line


def test_a_pod_term_without_topology_key_is_named_not_a_key_error(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    _spec(data).update(affinity={"podAffinity": {REQUIRED: [{"labelSelector": {"matchLabels": {"app": "x"}}}]}})
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code = main(["plan", "--snapshot", str(path), "--pools", str(WHOLE_POOLS)])
    err = capsys.readouterr().err
    [line] = err.strip().splitlines()
    assert code == 2 and "KeyError" not in line, line
    assert f"{POD}: spec.affinity.podAffinity.{REQUIRED}[0].topologyKey" in line


def test_an_azure_credential_failure_is_one_line_said_once(caplog: pytest.LogCaptureFixture) -> None:
    """azure-identity logs its multi-paragraph diagnostic as a WARNING and raises it again: the loop says it
    once, on one line, with the link to the troubleshooting guide."""
    import logging

    from azure.core.exceptions import ClientAuthenticationError

    from scaler.providers.azure import provider_error

    diagnostic = ("DefaultAzureCredential failed to retrieve a token from the included credentials.\n"
                  "Attempted credentials:\n\tEnvironmentCredential: EnvironmentCredential authentication unavailable."
                  "\n\tAzureCliCredential: Azure CLI not found on path\nTo mitigate this issue, please refer to the "
                  "troubleshooting guidelines here at https://aka.ms/azsdk/python/identity/defaultazurecredential/"
                  "troubleshoot.")
    err = provider_error("list agent pools", ClientAuthenticationError(message=diagnostic))
    [line] = str(err).splitlines()
    assert line == ("azure list agent pools: DefaultAzureCredential failed to retrieve a token from the included "
                    "credentials. (see https://aka.ms/azsdk/python/identity/defaultazurecredential/troubleshoot)")
    assert err.kind == "auth" and not err.retryable
    with caplog.at_level(logging.WARNING):
        logging.getLogger("azure.identity._credentials.chained").warning(diagnostic)
    assert not caplog.records  # azure-identity's own copy is not shown


def test_a_log_level_from_the_environment_is_checked_like_the_flag(tmp_path: Path) -> None:
    """argparse checks a flag's choices, not a default taken from GPUBURST_LOG_LEVEL: checked before anything runs."""
    import os

    env = {**os.environ, "GPUBURST_LOG_LEVEL": "verbose"}
    line = refused(scaler("run", "--config", str(EXAMPLE), "--once", env=env), "--log-level", "GPUBURST_LOG_LEVEL")
    assert "VERBOSE" in line
