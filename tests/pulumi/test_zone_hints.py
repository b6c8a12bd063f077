"""Pools the scaler warns about: a one-zone pool whose fallback spans zones (`zone_hints`), so a zone-pinned pod
(zone spread or affinity, a zonal volume) could never fall back. No shipped stack or example has one, and a stack
that does deploys with the hint as a warning (`pulumi preview` / `up`, and the offline renderer)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gpuburst_infra.offline import main as offline
from stack_helpers import ROOT, pool_entry, rendered, run_program, write_stack

from scaler.configfile import load_config
from scaler.core.config.settings import parse_config
from scaler.core.planning.capacity import zone_hints

STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml"))
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if p.name.startswith(("pools-", "scaler-")))
HINT = ("Pulumi.aws-dev.yaml: gpuburst:pools[gpu1-spot-a].fallback: gpu1-od-a spans us-east-1a, us-east-1b, "
        "so a pod that needs us-east-1a cannot fall back there")


@pytest.mark.parametrize("stack", STACKS)
def test_no_shipped_stack_has_a_pool_the_scaler_warns_about(stack: str) -> None:
    render = rendered(stack)
    # The configuration the stack gives the scaler (its ConfigMap), read as the scaler reads it at start.
    scaler = parse_config(yaml.safe_load(render.outputs["scalerConfig"]), f"{stack} scalerConfig")
    assert zone_hints(scaler.pools) == []
    assert render.warnings == []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_no_example_has_a_pool_the_scaler_warns_about(path: Path) -> None:
    assert zone_hints(load_config(path).pools) == []


def test_examples_and_stacks_are_found() -> None:
    assert len(STACKS) >= 4 and {"pools-aws.yaml", "pools-azure.yaml"} <= {p.name for p in EXAMPLES}


def _fallback_across_zones(tmp_path: Path) -> Path:
    """Pulumi.aws-dev.yaml with gpu1-spot-a's on-demand fallback spread over both zones."""
    return write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path,
                       lambda c: pool_entry(c, "gpu1-od-a").update(zones=["us-east-1a", "us-east-1b"]))


def test_pulumi_shows_a_hint_as_a_warning_and_still_deploys(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"):
        mocks = run_program(_fallback_across_zones(tmp_path))  # program.main, as `pulumi up` runs it
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and warned[0].startswith(HINT)
    assert sum(1 for r in mocks.registered if r[0] == "aws:autoscaling/group:Group") == 5


def test_the_offline_renderer_prints_a_hint_and_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert offline([str(_fallback_across_zones(tmp_path))]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"warning: {HINT}") and err.count("warning: ") == 1
    assert "gpuburst-dev-gpu1-od-a" in out  # the stack is rendered all the same


def test_the_offline_renderer_is_quiet_on_a_shipped_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert offline([str(ROOT / "Pulumi.azure-dev.yaml")]) == 0
    assert capsys.readouterr().err == ""
