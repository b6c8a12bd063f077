"""`simulate` and `plan` run on a laptop with no cluster and no cloud: they never load an SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SDKS = ("kubernetes", "boto3", "botocore", "azure", "urllib3")
# Runs a command through the CLI's own entry point in a fresh interpreter, then lists the SDKs it loaded.
PROBE = f"""
import json, sys
from scaler.cli import main
code = main(sys.argv[1:])
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({SDKS!r}))
print("LOADED=" + json.dumps([code, loaded]))
"""


@pytest.mark.parametrize("argv", [
    ["simulate", "--trace", "scaler/sim/data/philly-sample.csv", "--pools", "examples/pools-aws.yaml", "--hours", "2"],
    ["plan", "--snapshot", "examples/snapshot-aws.json", "--pools", "examples/pools-aws.yaml"],
], ids=["simulate", "plan"])
def test_simulate_and_plan_load_no_cloud_or_kubernetes_sdk(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("LOADED=")), None)
    assert line is not None, done.stderr[-2000:]
    code, loaded = json.loads(line.removeprefix("LOADED="))
    assert code == 0, done.stderr[-2000:]
    assert loaded == []
