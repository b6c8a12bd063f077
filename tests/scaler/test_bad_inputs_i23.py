"""Issue 23's bad inputs: each is refused with exit 2 and one line naming the flag (or file and field), no
traceback, and nothing written or contacted before the check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scaler.core.config.settings import ConfigError, parse_config

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
    (["--gpu-sharing", "--trace", "{shares}"], "--gpu-sharing: {pools} has no time-sliced or MIG mixed pool"),
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
