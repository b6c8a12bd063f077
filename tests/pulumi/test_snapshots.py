"""The offline render of each stack (type, name, inputs, ignored properties, outputs) against a committed
snapshot, so a pull request shows what it does to the infrastructure without cloud credentials.

Regenerate after an intended change: `UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/pulumi` and review the diff.
"""

from __future__ import annotations

import difflib
import os

import pytest
from stack_helpers import ROOT, SNAPSHOTS, rendered

STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml"))


def test_every_stack_file_has_a_snapshot() -> None:
    assert STACKS, "no stack files found"
    if os.environ.get("UPDATE_SNAPSHOTS") != "1":
        assert sorted(p.stem for p in SNAPSHOTS.glob("*.yaml")) == STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_render_matches_the_committed_snapshot(stack: str) -> None:
    text = rendered(stack).snapshot()
    path = SNAPSHOTS / f"{stack}.yaml"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot {path.name}: run UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/pulumi"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"snapshots/{path.name}", "render", n=2))
        pytest.fail(f"the {stack} stack changed; review, then UPDATE_SNAPSHOTS=1 to accept:\n{diff[:6000]}")


def test_render_is_deterministic() -> None:
    from gpuburst_infra.offline import render

    assert render(ROOT / "Pulumi.aws-dev.yaml").snapshot() == rendered("aws-dev").snapshot()
