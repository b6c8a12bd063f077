"""The NVIDIA DRA driver's feature gates and GPU sharing in the stacks (gpuburst_platform.versions).

The driver stops at startup on a gate it does not know, so the values turn a gate on only once the pinned
chart's release knows it: NVMLDeviceHealthCheck (the health taints gpu.nvidia.com/xid and gpu-lost that the
scaler repairs on) from v25.12.0; the pin is 25.8.1 (../shared/charts holds no newer release). The chart
(rendered offline from ../shared/charts, as it is pinned) passes `featureGates` to the GPU kubelet plugin as
its FEATURE_GATES variable. A pool sharing GPUs by memory (DRA consumable capacity) or cutting them per claim
(dynamic MIG) is refused in a stack: the pinned driver publishes neither, so its nodes would not take the shares
or slices the scaler plans.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from gpuburst_platform import render, versions
from stack_helpers import ROOT, run_program, write_stack

import pulumi
from scaler.configfile import load_config

CHART = ROOT.parent / "shared" / "charts" / "nvidia-dra-driver-gpu"
DRA_POOLS = ROOT / "tests" / "platform" / "pools-aws-dra.yaml"


def _kubelet_plugin_env(values: dict[str, Any]) -> dict[str, str]:
    with helm.Chart.load(str(CHART)) as chart:
        assert yaml.safe_load((CHART / "Chart.yaml").read_text())["version"] == "25.8.1"
        manifests = chart.render(values, name="nvidia-dra-driver-gpu", namespace="nvidia-dra-driver-gpu",
                                 is_install=True)
    docs = [d for text in manifests.values() for d in yaml.safe_load_all(text) if d]
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    return {e["name"]: e.get("value", "") for c in ds["spec"]["template"]["spec"]["containers"]
            for e in c.get("env", [])}


def test_the_pinned_driver_gets_no_gate_it_would_refuse() -> None:
    values = render.dra_driver_values(load_config(DRA_POOLS))
    assert "featureGates" not in values
    assert "FEATURE_GATES" not in _kubelet_plugin_env(values)


def test_a_driver_that_knows_the_health_check_gets_it_turned_on(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = versions.CHARTS["nvidia-dra-driver-gpu"]
    monkeypatch.setitem(versions.CHARTS, "nvidia-dra-driver-gpu", versions.Chart(pinned.chart, "25.12.0", pinned.repo))
    values = render.dra_driver_values(load_config(DRA_POOLS))
    assert values["featureGates"] == {"NVMLDeviceHealthCheck": True}
    # the chart's own templates, from its values key to the plugin's variable
    assert _kubelet_plugin_env(values)["FEATURE_GATES"] == "NVMLDeviceHealthCheck=true,"


@pytest.mark.parametrize(("pool", "words"), [
    ({"name": "l4-shared", "instance_types": ["g6.xlarge"], "gpu_sharing": {"memory": {"step_gib": 4}}},
     "pool l4-shared: gpu_sharing.memory: the pinned NVIDIA DRA driver 25.8.1"),
    ({"name": "h100-dynamic", "instance_types": ["p5.48xlarge"], "gpu_sharing": {"mig": {"dynamic": True}}},
     "pool h100-dynamic: gpu_sharing.mig.dynamic: the pinned NVIDIA DRA driver 25.8.1 has no DynamicMIG"),
])
def test_a_stack_pool_the_pinned_driver_cannot_serve_is_refused(tmp_path: Path, pool: dict[str, Any],
                                                                 words: str) -> None:
    def edit(config: dict[str, Any]) -> None:
        config["gpuburst:pools"].append({**pool, "zones": ["us-east-1a"], "max": 2, "gpu_allocation": "dra"})

    with pytest.raises((pulumi.RunError, ValueError)) as err:  # (a RunError under `pulumi preview`)
        run_program(write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path, edit))
    assert words in str(err.value), err.value
