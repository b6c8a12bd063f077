"""`python -m scaler run` as a user runs it: the dry-run acceptance and a malformed config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scaler.configfile import load_config
from tests.fakes.aws import MotoAws
from tests.fakes.kubeapi import FakeKube, pod

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "scaler-aws.yaml"


def run(args: list[str], env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scaler", "run", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def aws_env(aws: MotoAws) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBERNETES_"))}
    env.update(AWS_ENDPOINT_URL=aws.endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1")
    return env


def test_dry_run_prints_the_plan_and_changes_nothing(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> None:
    groups = aws.make_groups(load_config(EXAMPLE), desired={"system": 2})
    for i in range(3):
        kube.put("pods", pod(f"train-{i}", namespace="ml", gpus=1, pending=True))
    kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig")
    result = run(["--dry-run", "--once", "--config", str(EXAMPLE), "--kubeconfig", str(kubeconfig),
                  "--metrics-port", "0", "--log-format", "text"], aws_env(aws))
    assert result.returncode == 0, result.stderr
    [line] = [ln for ln in result.stderr.splitlines() if "plan (dry run)" in ln]
    assert "3 pending" in line and "scale-ups ['gpu1-spot-" in line and "+3 -> 3" in line
    assert {aws.desired(g) for name, g in groups.items() if name != "system"} == {0}  # nothing asked
    writes = [r for r in kube.requests if r[0] != "GET"]
    assert writes == []  # no cordon, no event, no Lease, no status ConfigMap


def test_json_logs_carry_the_plan(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> None:
    aws.make_groups(load_config(EXAMPLE), desired={"system": 2})
    kube.put("pods", pod("train-0", gpus=1, pending=True))
    result = run(["--dry-run", "--once", "--config", str(EXAMPLE), "--kubeconfig",
                  str(kube.kubeconfig(tmp_path / "kc")), "--metrics-port", "0"], aws_env(aws))
    import json

    records = [json.loads(ln) for ln in result.stderr.splitlines() if ln.startswith("{")]
    [plan] = [r for r in records if r["message"].startswith("plan")]
    assert plan["dry_run"] is True and plan["pending"] == 1 and plan["scale_ups"][0].startswith("gpu1-spot-")
    assert plan["level"] == "info" and plan["logger"] == "scaler.loop"


@pytest.mark.parametrize(("text", "expect"), [
    ("cluster: c\ncloud: aws\npools:\n  - name: gpu\n    instance_types: [g6.xlarge\n", "not valid YAML"),
    ("cluster: c\ncloud: aws\npools:\n  - name: gpu\n    instance_types: [g6.xlarge]\n    zones: [a]\n"
     "    max: -1\n", "pools[gpu].max"),
    ("cluster: c\ncloud: aws\nscan_interval: 5\n", "scan_interval"),
])
def test_malformed_config_fails_clearly_and_does_nothing(kube: FakeKube, tmp_path: Path, text: str,
                                                        expect: str) -> None:
    bad = tmp_path / "scaler.yaml"
    bad.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBERNETES_"))}
    result = run(["--once", "--config", str(bad), "--kubeconfig", str(kube.kubeconfig(tmp_path / "kc")),
                  "--metrics-port", "0"], env, timeout=60)
    assert result.returncode == 2
    assert str(bad) in result.stderr and expect in result.stderr
    assert kube.requests == []  # the cluster was not even contacted
