"""Pools the scaler warns about: a one-zone pool whose fallback spans zones (`zone_hints`), so a zone-pinned pod
(zone spread or affinity, a zonal volume) could never fall back. No shipped stack or example has one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from stack_helpers import ROOT, rendered

from scaler.configfile import load_config
from scaler.core.capacity import zone_hints
from scaler.core.config import parse_config

STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml"))
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if p.name.startswith(("pools-", "scaler-")))


@pytest.mark.parametrize("stack", STACKS)
def test_no_shipped_stack_has_a_pool_the_scaler_warns_about(stack: str) -> None:
    render = rendered(stack)
    # The configuration the stack gives the scaler (its ConfigMap), read as the scaler reads it at start.
    scaler = parse_config(yaml.safe_load(render.outputs["scalerConfig"]), f"{stack} scalerConfig")
    assert zone_hints(scaler.pools) == []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_no_example_has_a_pool_the_scaler_warns_about(path: Path) -> None:
    assert zone_hints(load_config(path).pools) == []


def test_examples_and_stacks_are_found() -> None:
    assert len(STACKS) >= 4 and {"pools-aws.yaml", "pools-azure.yaml"} <= {p.name for p in EXAMPLES}
