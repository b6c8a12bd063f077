"""Bad stack files through the offline renderer and the Pulumi program: one line naming the file and key.

`python -m gpuburst_infra.offline Pulumi.<stack>.yaml` exits 2 with `error: <line>` and no traceback, and the
line is exactly what the program raises under `pulumi preview` (a RunError with the same message), so a pull
request without cloud credentials sees what the deploy would. The platform section is validated on both paths.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpuburst_infra.offline import main as offline
from stack_helpers import ROOT, pool_entry, run_program, write_stack

import pulumi

DEV = ROOT / "Pulumi.aws-dev.yaml"
F = "Pulumi.aws-dev.yaml"
Edit = Callable[[dict[str, Any]], Any]


def _set(key: str, value: Any) -> Edit:
    return lambda c: c.__setitem__(key, value)


def _pool(name: str, **changes: Any) -> Edit:
    return lambda c: pool_entry(c, name).update(changes)


def _scaler(**knobs: Any) -> Edit:
    return lambda c: c.setdefault("gpuburst:scaler", {}).update(knobs)


# (id, change to Pulumi.aws-dev.yaml's config, the key the line must name after the file)
CASES: list[tuple[str, Edit, str]] = [
    ("cloud unknown", _set("gpuburst:cloud", "gcp"), "gpuburst:cloud: must be one of aws, azure"),
    ("cloud a list", _set("gpuburst:cloud", ["aws"]), "gpuburst:cloud: must be one of aws, azure"),
    ("region a mapping", _set("aws:region", {"name": "us-east-1"}), "aws:region: {'name': 'us-east-1'} is not"),
    ("region unsupported", _set("aws:region", "mars-north-1"), "aws:region: 'mars-north-1' is not a supported"),
    ("Kubernetes too old", _set("gpuburst:kubernetes_version", "1.20"), "gpuburst:kubernetes_version: '1.20'"),
    ("cluster name a JSON-looking string", _set("gpuburst:cluster", "[abc"), "gpuburst:cluster: String should match"),
    ("tags not a mapping", _set("gpuburst:tags", ["a"]), "gpuburst:tags: Input should be a valid dictionary"),
    ("log retention zero", _set("gpuburst:log_retention_days", 0), "gpuburst:log_retention_days"),
    ("cidr not a block", _set("gpuburst:network", {"cidr": "10.0.0.300/16"}), "gpuburst:network.cidr"),
    ("admins not ARNs", _set("gpuburst:admins", ["alice"]), "gpuburst:admins: ['alice'] are not IAM role or user ARNs"),
    ("pools empty", _set("gpuburst:pools", []), "gpuburst:pools: List should have at least 1 item"),
    ("pool max negative", _pool("gpu1-od-a", max=-1), "gpuburst:pools[gpu1-od-a].max"),
    ("pool max infinite", _pool("gpu1-od-a", max=float("inf")), "gpuburst:pools[gpu1-od-a].max"),
    ("pool max text", _pool("gpu1-od-a", max="many"), "gpuburst:pools[gpu1-od-a].max"),
    ("overhead not a quantity", _pool("gpu1-od-a", daemonset_overhead={"cpu": "1.5.3"}),
     "gpuburst:pools[gpu1-od-a].daemonset_overhead.cpu: not a quantity"),
    ("max_pods leaves no memory", _pool("gpu1-od-a", max_pods=100000), "gpuburst:pools[gpu1-od-a].max_pods"),
    ("zone of another region", _pool("gpu1-od-a", zones=["us-west-2a", "us-east-1b"]),
     "gpuburst:pools[gpu1-od-a].zones: ['us-west-2a'] are not zones of us-east-1"),
    ("provision timeout below boot", _scaler(timings={"provision_timeout": 120}),
     "gpuburst:scaler.timings.provision_timeout: 120 s is shorter"),
    ("backoff reversed", _scaler(timings={"backoff_initial": 900, "backoff_max": 300}),
     "gpuburst:scaler.timings.backoff_initial"),
    ("GPU cap below one node", _scaler(limits={"max_gpus": 0}), "gpuburst:scaler.limits.max_gpus: 0 is below"),
    ("unknown scaler knob", _scaler(speed=11), "gpuburst:scaler.speed: Extra inputs"),
    ("platform metrics bogus", _set("gpuburst:platform", {"metrics": "bogus"}), "gpuburst:platform.metrics"),
    ("platform replicas zero", _set("gpuburst:platform", {"scaler_replicas": 0}), "gpuburst:platform.scaler_replicas"),
    ("platform image latest", _set("gpuburst:platform", {"scaler_image": "ghcr.io/x/scaler:latest"}),
     "gpuburst:platform.scaler_image"),
    ("platform not a mapping", _set("gpuburst:platform", "keda"), "gpuburst:platform"),
    ("alert receiver without its secret", _set("gpuburst:platform", {"alerts": {"receiver": "slack"}}),
     "gpuburst:platform.alerts.receiver: slack needs the receiver's URL as the stack secret gpuburst:alertsUrl"),
]


def _preview(path: Path) -> str:
    """The message `pulumi preview` shows: program.main under mocks raises it as a RunError."""
    with pytest.raises(pulumi.RunError) as err:
        run_program(path)
    return str(err.value)


@pytest.mark.parametrize(("edit", "key"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_stack_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, key: str) -> None:
    path = write_stack(DEV, tmp_path, edit)
    code = offline([str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: {F}: {key}"), line
    assert line == f"error: {_preview(path)}"  # what the deploy would say, word for word


FILE_CASES: list[tuple[str, bytes | None, str]] = [
    ("missing file", None, "cannot read"),
    ("non-UTF-8 byte", b"config:\n  gpuburst:cloud: aws\n  gpuburst:cluster: caf\xe9\n", f"{F}:3: not UTF-8"),
    ("YAML syntax", b"config:\n  gpuburst:pools: [\n", "not valid YAML"),
    ("config a list", b"config:\n  - gpuburst:cloud\n", f"{F}: config: expected a mapping"),
    ("top level a list", b"- config\n", f"{F}: config: expected a mapping"),
    ("no config at all", b"{}\n", f"{F}: gpuburst:cloud: must be one of aws, azure"),
]


@pytest.mark.parametrize(("content", "message"), [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_unreadable_stack_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None,
                               message: str) -> None:
    path = tmp_path / F
    if content is not None:
        path.write_bytes(content)
    assert offline([str(path)]) == 2
    _out, err = capsys.readouterr()
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert message in line, line


def test_a_key_without_namespace_is_the_projects_as_the_cli_reads_it(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(DEV.read_text())
    data["config"]["cloud"] = data["config"].pop("gpuburst:cloud")
    data["config"]["platform"] = {"metrics": "bogus"}
    path = tmp_path / F
    path.write_text(yaml.safe_dump(data))
    assert offline([str(path)]) == 2
    assert "gpuburst:platform.metrics" in capsys.readouterr().err


def _offline_process(path: Path, **kw: Any) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pulumi")}
    return subprocess.Popen([sys.executable, "-m", "gpuburst_infra.offline", str(path)], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, **kw)


def test_the_renderer_as_a_user_runs_it(tmp_path: Path) -> None:
    path = write_stack(DEV, tmp_path, _set("gpuburst:platform", {"metrics": "bogus"}))
    proc = _offline_process(path, stdout=subprocess.PIPE)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == b""
    assert err.decode().startswith(f"error: {F}: gpuburst:platform.metrics: Input should be")
    assert len(err.decode().strip().splitlines()) == 1 and b"Traceback" not in err


def test_the_renderer_piped_into_a_closed_reader_ends_quietly() -> None:
    proc = _offline_process(DEV, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=180) == 0
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err
