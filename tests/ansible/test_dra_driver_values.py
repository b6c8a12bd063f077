"""The cluster playbook's split between NVIDIA's device plugin and its DRA driver, per pool.

`ansible-playbook gpuburst.cluster.cluster` runs for real from the repository root on pools files with
both kinds of GPU pool (`gpu_allocation: dra` or the default device-plugin), the cluster calls off and
the chart values written to files. A node must run exactly one GPU agent: the checks place each
DaemonSet on every pool's template node as kube-scheduler would (node selector, required node affinity,
taints: `scaler.core.scheduling.predicates`), and compare the DRA driver's values with the ones the
Pulumi platform installs (gpuburst_platform.render.dra_driver_values).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.configfile import load_config
from scaler.core.config.pool import Pool
from scaler.core.model import keys
from scaler.core.scheduling.predicates import static_reason
from scaler.kube.convert import pod_from_json

REPO = Path(__file__).resolve().parents[2]
POOL_FILES = ["tests/platform/pools-aws-dra.yaml", "tests/platform/pools-azure-dra.yaml"]
ROLES = REPO / "ansible_collections/gpuburst/cluster/roles"


def _run(tmp_path: Path, pools_file: str, **extra: object) -> subprocess.CompletedProcess[str]:
    variables = {
        "gpuburst_env_pools_file": str(REPO / pools_file),
        "device_plugin_install": False, "device_plugin_render_dir": str(tmp_path),
        "dra_driver_install": False, "dra_driver_render_dir": str(tmp_path),
        "metrics_certs_kubernetes": False, "metrics_certs_dir": str(tmp_path / "pki"), **extra,
    }
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0"}
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "gpuburst.cluster.cluster",
                           "-e", json.dumps(variables)],
                          capture_output=True, text=True, env=env, cwd=REPO, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, Any]]]:
    out = {}
    for pools_file in POOL_FILES:
        where = tmp_path_factory.mktemp("render")
        _run(where, pools_file)
        out[pools_file] = {name: yaml.safe_load((where / f"{name}-values.yml").read_text())
                           for name in ("device-plugin", "dra-driver")}
    return out


def _lands(pool: Pool, node_selector: dict[str, str], affinity: dict[str, Any] | None,
           tolerations: list[dict[str, str]]) -> bool:
    spec: dict[str, Any] = {"nodeSelector": node_selector, "tolerations": tolerations,
                            "containers": [{"name": "agent"}]}
    if affinity:
        spec["affinity"] = affinity
    pod = pod_from_json({"metadata": {"name": "agent", "namespace": "kube-system"}, "spec": spec})
    return static_reason(pod, pool.template_node()) is None


@pytest.mark.parametrize("pools_file", POOL_FILES)
def test_each_gpu_pool_runs_exactly_one_gpu_agent(rendered: dict[str, dict[str, dict[str, Any]]],
                                                  pools_file: str) -> None:
    plugin, driver = rendered[pools_file]["device-plugin"], rendered[pools_file]["dra-driver"]
    pools = load_config(REPO / pools_file).pools
    assert {p.dra for p in pools if p.role == "gpu"} == {True, False}
    for pool in pools:
        on_plugin = _lands(pool, plugin["nodeSelector"], plugin.get("affinity"), plugin["tolerations"])
        kubelet_plugin = driver["kubeletPlugin"]
        on_driver = _lands(pool, {}, kubelet_plugin["affinity"], kubelet_plugin["tolerations"])
        assert (on_plugin, on_driver) == (pool.role == "gpu" and not pool.dra, pool.dra), pool.name
    # A DRA MIG pool's layout is the DRA driver's business: no device plugin config for it.
    assert not [p.name for p in pools if p.dra and p.name in (plugin.get("config") or {}).get("map", {})]


def test_the_dra_driver_values_are_the_pulumi_platforms(rendered: dict[str, dict[str, dict[str, Any]]]) -> None:
    sys.path.insert(0, str(REPO / "pulumi"))
    from gpuburst_platform import render

    for pools_file in POOL_FILES:
        ours = render.dra_driver_values(load_config(REPO / pools_file))
        theirs = rendered[pools_file]["dra-driver"]
        # Tolerations differ in form only (Exists per key and effect here, Equal per taint in Pulumi).
        assert {k: v for k, v in theirs.items() if k != "kubeletPlugin"} == \
            {k: v for k, v in ours.items() if k != "kubeletPlugin"}
        assert {k: v for k, v in theirs["kubeletPlugin"].items() if k != "tolerations"} == \
            {k: v for k, v in ours["kubeletPlugin"].items() if k != "tolerations"}
        assert {(t["key"], t["effect"]) for t in theirs["kubeletPlugin"]["tolerations"]} == \
            {(t["key"], t["effect"]) for t in ours["kubeletPlugin"]["tolerations"]}


def test_a_dynamic_mig_pool_gets_dynamic_mig_in_place_of_the_health_check(tmp_path: Path) -> None:
    """As the Pulumi platform sets them: the driver refuses to start with DynamicMIG beside NVMLDeviceHealthCheck
    (v0.4.1 pkg/featuregates/featuregates.go), and without DynamicMIG it would never cut the slices planned."""
    sys.path.insert(0, str(REPO / "pulumi"))
    from gpuburst_platform import render

    pools_file = "examples/pools-aws-mig-dynamic.yaml"
    _run(tmp_path, pools_file)
    values = yaml.safe_load((tmp_path / "dra-driver-values.yml").read_text())
    assert values["featureGates"] == render.dra_driver_values(load_config(REPO / pools_file))["featureGates"] \
        == {"DynamicMIG": True}


def test_no_dra_values_and_no_affinity_without_a_dra_pool(tmp_path: Path) -> None:
    _run(tmp_path, "examples/pools-aws.yaml")
    assert not (tmp_path / "dra-driver-values.yml").exists()
    assert "affinity" not in yaml.safe_load((tmp_path / "device-plugin-values.yml").read_text())


def test_the_roles_pool_label_is_the_pool_models() -> None:
    for role in ("device_plugin", "dra_driver"):
        defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
        assert defaults[f"{role}_pool_label"] == keys.LABEL_POOL
    assert yaml.safe_load((ROLES / "dra_driver" / "defaults" / "main.yml").read_text())[
        "dra_driver_mig_dynamic_label"] == keys.LABEL_MIG_DYNAMIC
    # ... and the DRA driver's chart is pinned at the version Pulumi pins.
    sys.path.insert(0, str(REPO / "pulumi"))
    from gpuburst_platform.versions import CHARTS

    pin = CHARTS["dra-driver-nvidia-gpu"]
    defaults = yaml.safe_load((ROLES / "dra_driver" / "defaults" / "main.yml").read_text())
    assert (defaults["dra_driver_chart"], defaults["dra_driver_chart_version"], defaults["dra_driver_chart_repo"]) \
        == (pin.chart, pin.version, pin.repo)
