"""The pools `scaler tune` wrote (examples/pools-aws-tuned.yaml) are what `pulumi up` takes: as a stack's
`gpuburst:pools`, with its knobs under `gpuburst:scaler`, they pass the stack's own loader (its spot ladders end
on demand, the CPU spot pool's too). The candidates file had one zone, which an EKS stack refuses (its subnets span
two): the stack's own system pool stands in for the file's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from gpuburst_infra.offline import stack_file_config
from gpuburst_infra.stack import load_stack
from stack_helpers import ROOT, write_stack

TUNED = ROOT / "examples/pools-aws-tuned.yaml"


def test_the_tuned_pools_load_as_a_stack(tmp_path: Path) -> None:
    tuned = yaml.safe_load(TUNED.read_text(encoding="utf-8"))

    def edit(config: dict[str, Any]) -> None:
        system = [p for p in config["gpuburst:pools"] if p.get("role") == "system"]
        config["gpuburst:pools"] = system + [p for p in tuned["pools"] if p.get("role") != "system"]
        config["gpuburst:scaler"] = {"spot_price_factor": tuned["spot_price_factor"],
                                     "scale_down": tuned["scale_down"]}

    path = write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path, edit)
    config, _ = stack_file_config(path)
    decoded = {k: json.loads(v) if v[:1] in "[{" else v for k, v in config.items()}
    stack = load_stack(decoded, path.name)
    assert {p.name for p in stack.pools if p.role != "system"} == {p["name"] for p in tuned["pools"]} - {"system"}
    assert {p.gpus_per_node for p in stack.pools if p.gpus_per_node} == {1, 4, 8}
