"""`pulumi up` as typed on a stack whose GPU pools the scaler has grown: an unrelated change (a new tag) must
reach each pool as that change only, never as a resize.

What the engine does with a pool, modelled from its documented rules: the state holds the pool's inputs (the
live ones when the project refreshes before every operation, else those of the last `pulumi up`); each path in
`ignoreChanges` takes the state's value instead of the program's; then the provider sends the cloud either the
changed properties only (the AWS provider's UpdateAutoScalingGroup) or the whole object (azure-native's PUT of
an agent pool or a managed cluster, ignored properties included, as the state holds them).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpuburst_infra.offline import render, stack_file_config
from gpuburst_infra.stack import load_stack
from stack_helpers import ROOT, write_stack

SCALED = 6  # nodes the scaler added to each GPU pool since the last `pulumi up`
# (resource type, the path of its scaler-owned size, whether the provider sends the whole object)
POOLS = {
    "aws": [("aws:autoscaling/group:Group", "desiredCapacity", False)],
    "azure": [("azure-native:containerservice:AgentPool", "count", True),
              ("azure-native:containerservice:ManagedCluster", "agentPoolProfiles[0].count", True)],
}


def _steps(path: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]


def _get(obj: Any, path: str) -> Any:
    for step in _steps(path):
        obj = obj[step]
    return obj


def _set(obj: Any, path: str, value: Any) -> None:
    *head, last = _steps(path)
    for step in head:
        obj = obj[step]
    obj[last] = value


def _refreshes_first() -> bool:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    return (project.get("options") or {}).get("refresh") == "always"


def _sent(state: dict[str, Any], program: dict[str, Any], ignore: list[str], whole: bool) -> dict[str, Any]:
    """What the provider sends the cloud for an update from `state` to the program's inputs."""
    news = copy.deepcopy(program)
    for path in ignore:
        _set(news, path, _get(state, path))
    return news if whole else {k: v for k, v in news.items() if state.get(k) != v}


def _changed(old: Any, new: Any, path: str = "") -> set[str]:
    """The paths whose values differ (dicts and lists walked into)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {p for k in old.keys() | new.keys()
                for p in _changed(old.get(k), new.get(k), f"{path}.{k}" if path else k)}
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return {p for i, (a, b) in enumerate(zip(old, new, strict=True)) for p in _changed(a, b, f"{path}[{i}]")}
    return set() if old == new else {path}


def _with_tag(config: dict[str, Any]) -> None:
    config["gpuburst:tags"] = {**config["gpuburst:tags"], "cost-center": "ml-4711"}


@pytest.mark.parametrize("stack", ["aws-dev", "azure-dev"])
def test_an_unrelated_change_sends_no_gpu_pool_a_new_size(stack: str, tmp_path: Path) -> None:
    cloud = stack.partition("-")[0]
    before = render(ROOT / f"Pulumi.{stack}.yaml")
    after = render(write_stack(ROOT / f"Pulumi.{stack}.yaml", tmp_path, _with_tag))
    checked = []
    for type_, size, whole in POOLS[cloud]:
        for old in before.of_type(type_):
            new = after.one(type_, old.name)
            assert size in new.ignore_changes, f"{old.name}: {size} is the scaler's"
            live = copy.deepcopy(old.inputs)
            _set(live, size, SCALED)  # the scaler grew the pool
            state = live if _refreshes_first() else old.inputs
            sent = _sent(state, new.inputs, new.ignore_changes, whole)
            if whole:
                assert _get(sent, size) == SCALED, f"{old.name}: the update would resize it to {_get(sent, size)}"
            else:
                assert size not in sent, f"{old.name}: the update would set its size"
            changed = _changed(live, {**live, **sent})
            assert changed and all(".tags" in f".{p}" for p in changed), f"{old.name}: {sorted(changed)} change"
            checked.append(old.name)
    config, _ = stack_file_config(ROOT / f"Pulumi.{stack}.yaml")
    decoded = {k: json.loads(v) if v[:1] in "[{" else v for k, v in config.items()}
    gpu = {p.name for p in load_stack(decoded, stack).pools if p.role == "gpu"}
    assert gpu and gpu <= set(checked), checked
