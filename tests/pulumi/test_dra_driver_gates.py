"""The NVIDIA DRA driver's feature gates and GPU sharing in the stacks (gpuburst_platform.versions).

The values turn NVMLDeviceHealthCheck on (the pinned dra-driver-nvidia-gpu 0.4.1 then taints an unhealthy GPU in
the node's ResourceSlice). The chart (rendered offline at the pinned version, tests/platform/charts_helpers.py)
passes `featureGates` to the GPU kubelet plugin as its FEATURE_GATES variable. A pool sharing GPUs by memory
(DRA consumable capacity) is refused in a stack: no driver release publishes shareable GPUs (upstream has it
on main only, the ConsumableShares gate; v0.4.1 lacks it), so its nodes would not take the shares the scaler plans.
A pool cutting its GPUs per claim (dynamic MIG) turns on DynamicMIG instead of the health check, which the driver
refuses beside it (v0.4.1 pkg/featuregates/featuregates.go, ValidateFeatureGates), and cannot share the stack with
a MIG layout made at boot on a DRA pool (the driver deletes it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from gpuburst_platform import render, versions
from gpuburst_platform.settings import DRA_DRIVER_NAME, DRA_DRIVER_NAMESPACE
from stack_helpers import ROOT, run_program, write_stack

import pulumi
from scaler.configfile import load_config

sys.path.insert(0, str(ROOT / "tests" / "platform"))
from charts_helpers import official_chart

DRA_POOLS = ROOT / "tests" / "platform" / "pools-aws-dra.yaml"


PIN = versions.CHARTS["dra-driver-nvidia-gpu"]


def _kubelet_plugin_env(values: dict[str, Any]) -> dict[str, str]:
    chart = official_chart(PIN.chart.rsplit("/", 1)[-1], PIN.version)
    with helm.Chart.load(str(chart)) as loaded:
        manifests = loaded.render(values, name=DRA_DRIVER_NAME, namespace=DRA_DRIVER_NAMESPACE,
                                  is_install=True)
    docs = [d for text in manifests.values() for d in yaml.safe_load_all(text) if d]
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    return {e["name"]: e.get("value", "") for c in ds["spec"]["template"]["spec"]["containers"]
            for e in c.get("env", [])}


def test_the_pinned_driver_gets_the_health_check_turned_on() -> None:
    values = render.dra_driver_values(load_config(DRA_POOLS))
    assert values["featureGates"] == {"NVMLDeviceHealthCheck": True}
    # the chart's own templates, from its values key to the plugin's variable
    assert _kubelet_plugin_env(values)["FEATURE_GATES"] == "NVMLDeviceHealthCheck=true,"


DYNAMIC = {"name": "h100-dynamic", "instance_types": ["p5.48xlarge"], "gpu_sharing": {"mig": {"dynamic": True}}}
BOOT_MIG = {"name": "a100-boot-mig", "instance_types": ["p4d.24xlarge"],
            "gpu_sharing": {"mig": {"strategy": "single", "profile": "1g.5gb"}}}


def _refusal(tmp_path: Path, *pools: dict[str, Any]) -> str:
    def edit(config: dict[str, Any]) -> None:
        where = {"zones": ["us-east-1a"], "max": 2, "gpu_allocation": "dra"}
        config["gpuburst:pools"].extend({**p, **where} for p in pools)

    with pytest.raises((pulumi.RunError, ValueError)) as err:  # (a RunError under `pulumi preview`)
        run_program(write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path, edit))
    return str(err.value)


def test_a_stack_pool_sharing_gpus_by_memory_is_refused_naming_the_pin(tmp_path: Path) -> None:
    pool = {"name": "l4-shared", "instance_types": ["g6.xlarge"], "gpu_sharing": {"memory": {"step_gib": 4}}}
    assert ("pool l4-shared: gpu_sharing.memory: the pinned NVIDIA DRA driver (dra-driver-nvidia-gpu 0.4.1) "
            "publishes each GPU for one claim") in _refusal(tmp_path, pool)


def test_a_dynamic_mig_pool_turns_on_dynamic_mig_instead_of_the_health_check() -> None:
    # v0.4.1 refuses to start with DynamicMIG beside NVMLDeviceHealthCheck (pkg/featuregates/featuregates.go)
    values = render.dra_driver_values(load_config(ROOT / "examples" / "pools-aws-mig-dynamic.yaml"))
    assert values["featureGates"] == {"DynamicMIG": True}
    assert _kubelet_plugin_env(values)["FEATURE_GATES"] == "DynamicMIG=true,"


def test_a_dynamic_mig_pool_beside_a_boot_mig_layout_on_dra_is_refused(tmp_path: Path) -> None:
    assert ("pool a100-boot-mig: gpu_sharing.mig: the NVIDIA DRA driver's DynamicMIG, turned on for pool "
            "h100-dynamic, deletes the MIG devices a boot layout made" in _refusal(tmp_path, DYNAMIC, BOOT_MIG))
