"""Readers of what the mocked engine received: tags, user data, policies, stack files."""

from __future__ import annotations

import base64
import email
import json
from pathlib import Path
from typing import Any

import yaml

from scaler.core.config.pool import TaintSpec


def asg_tags(inputs: dict[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in inputs["tags"]}


def kubelet_flags(user_data_b64: str) -> dict[str, str]:
    """The NodeConfig nodeadm would read from the user data: its kubelet flags as {flag: value}."""
    message = email.message_from_string(base64.b64decode(user_data_b64).decode())
    assert message.is_multipart()
    parts = [p for p in message.walk() if p.get_content_type() == "application/node.eks.aws"]
    assert len(parts) == 1, "exactly one NodeConfig part"
    doc = yaml.safe_load(parts[0].get_payload())
    assert doc["kind"] == "NodeConfig" and doc["apiVersion"] == "node.eks.aws/v1alpha1"
    return dict(flag.removeprefix("--").split("=", 1) for flag in doc["spec"]["kubelet"]["flags"])


def parse_labels(flag: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in flag.split(","))


def parse_taints(flag: str) -> set[tuple[str, str, str]]:
    return {(t.key, t.value, t.effect) for t in (TaintSpec.parse(x) for x in flag.split(","))}


def policy(text: str) -> dict[str, Any]:
    return json.loads(text)


def write_stack(src: Path, dest_dir: Path, edit: Any) -> Path:
    """Copy a stack file under the same name, changed by `edit(config)`."""
    data = yaml.safe_load(src.read_text())
    edit(data["config"])
    out = dest_dir / src.name
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def pool_entry(config: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in config["gpuburst:pools"] if p["name"] == name)


ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).parent / "snapshots"
_cache: dict[str, Any] = {}


def rendered(stack: str) -> Any:
    """One mocked run per stack file and test session (a run takes one to two seconds)."""
    from gpuburst_infra.offline import render

    if stack not in _cache:
        _cache[stack] = render(ROOT / f"Pulumi.{stack}.yaml")
    return _cache[stack]


def run_program(path: Path) -> Any:
    """The real entry point (program.main) under mocks, as `pulumi preview` / `up` would run it; returns the
    mocks (what was registered)."""
    from gpuburst_infra.offline import CloudMocks, RecordingMonitor, stack_file_config
    from gpuburst_infra.program import main

    import pulumi

    config, secrets = stack_file_config(path)
    mocks = CloudMocks("us-east-1")
    pulumi.runtime.set_mocks(mocks, project="gpuburst", stack="aws-dev", preview=True,
                             monitor=RecordingMonitor(mocks))
    pulumi.runtime.set_all_config(config, secrets)
    pulumi.runtime.test(main)()
    return mocks
