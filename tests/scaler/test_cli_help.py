"""What a newcomer types first: --version and --help of every command and script, and the words they print."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scaler.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, check=False,
                          timeout=120, env={**os.environ, "COLUMNS": "200", **(env or {})})


def test_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"python -m scaler {version}"


def test_run_help_explains_every_option_and_its_environment_fallback() -> None:
    proc = _run("-m", "scaler", "run", "--help", env={"GPUBURST_AKS_CLUSTER": "burst-aks"})
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    options = re.findall(r"^  (--[a-z-]+)", text, re.M)
    assert {"--log-format", "--azure-subscription-id", "--sync-timeout", "--config"} <= set(options)
    # Every option has words after it (no bare "--log-format {json,text}" line).
    blocks = re.split(r"\n(?=  -)", text.split("options:", 1)[1])
    for block in blocks[1:]:
        head, _, rest = block.partition("\n")
        words = re.sub(r"^\s*-\S+(?: [A-Z{][^ ]*)?(?:, -\S+(?: [A-Z{][^ ]*)?)*", "", head) + rest
        assert len(words.split()) >= 3, block
    for option, variable in (("--kubeconfig", "KUBECONFIG"), ("--namespace", "POD_NAMESPACE"),
                             ("--identity", "POD_NAME"),
                             ("--interruption-queue-url", "GPUBURST_INTERRUPTION_QUEUE_URL"),
                             ("--azure-subscription-id", "AZURE_SUBSCRIPTION_ID"),
                             ("--azure-resource-group", "GPUBURST_AZURE_RESOURCE_GROUP"),
                             ("--aks-cluster", "GPUBURST_AKS_CLUSTER")):
        block = next(b for b in blocks if b.lstrip().startswith(option))
        assert f"env {variable}" in " ".join(block.split()), block
    assert "now: burst-aks" in text  # the value it would take now


def test_offline_render_help_prints_the_usage() -> None:
    proc = _run("-m", "gpuburst_infra.offline", "--help", env={"PYTHONPATH": str(ROOT / "pulumi")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: PYTHONPATH=pulumi .venv/bin/python -m gpuburst_infra.offline Pulumi.")
    assert "cannot read" not in proc.stdout + proc.stderr


def test_bench_help_is_whole_sentences() -> None:
    proc = _run("bench/simulate_traces.py", "--help")
    assert proc.returncode == 0, proc.stderr
    description = proc.stdout.split("\n\n", 2)[1]
    assert description.rstrip().endswith(".")
    assert "--readme" in proc.stdout and "rewrite the results table" in proc.stdout
    assert not re.findall(r"\bissues? \d+", proc.stdout, re.I)  # a reader cannot look the tracker up


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_speaks_to_the_user_not_to_the_tracker(command: str) -> None:
    """--help explains each option in the user's words: no "issue 27" a reader cannot look up."""
    parser = argparse.ArgumentParser(prog=f"python -m scaler {command}")
    importlib.import_module(COMMANDS[command][0]).add_arguments(parser)
    assert not re.findall(r"\bissues? \d+", parser.format_help(), re.I)
