"""The cluster playbook's device plugin values, rendered from this repository's pool files.

`ansible-playbook gpuburst.cluster.cluster` runs for real from the repository root (ansible.cfg,
the example inventory, the gpuburst_env site role reading a pools file through the scaler's pool
model) with the cluster calls switched off and the chart values written to a file. The test then
checks what a user would notice: the plugin's DaemonSet can land on every node of every GPU pool
(kube-scheduler's taint and node-selector rules, as scaler.core.scheduling.predicates implements them) and
on no CPU node.
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
from scaler.core.model import keys
from scaler.core.model.objects import Toleration
from scaler.core.scheduling.predicates import untolerated_taint

REPO = Path(__file__).resolve().parents[2]


def _render(tmp_path: Path, pools_file: str, **extra: object) -> dict[str, Any]:
    variables = {
        "gpuburst_env_pools_file": str(REPO / pools_file),
        "device_plugin_install": False, "device_plugin_render_dir": str(tmp_path),
        "metrics_certs_kubernetes": False, "metrics_certs_dir": str(tmp_path / "pki"),
        **extra,
    }
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0"}
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)  # ansible.cfg must be enough
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "gpuburst.cluster.cluster",
         "-e", json.dumps(variables)],
        capture_output=True, text=True, env=env, cwd=REPO, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    values: dict[str, Any] = yaml.safe_load((tmp_path / "device-plugin-values.yml").read_text())
    return values


POOL_FILES = ["examples/pools-aws.yaml", "examples/pools-azure.yaml"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """One playbook run per pools file (each run takes seconds)."""
    return {f: _render(tmp_path_factory.mktemp("render"), f) for f in POOL_FILES}


@pytest.mark.parametrize("pools_file", POOL_FILES)
def test_plugin_lands_on_every_gpu_pool_and_no_cpu_pool(rendered: dict[str, dict[str, Any]], pools_file: str) -> None:
    values = rendered[pools_file]
    tolerations = [Toleration(**t) for t in values["tolerations"]]
    selector = values["nodeSelector"]
    pools = load_config(REPO / pools_file).pools
    assert any(p.role == "gpu" for p in pools)
    for pool in pools:
        node = pool.template_node()
        selected = all(node.labels.get(k) == v for k, v in selector.items())
        assert selected == (pool.role == "gpu"), pool.name
        if pool.role == "gpu":
            assert untolerated_taint(tolerations, node.taints) is None, pool.name
    # Exactly the GPU pools' taints, nothing wider (no blanket toleration).
    wanted = {(t.key, t.effect) for p in pools if p.role == "gpu" for t in p.node_taints()}
    assert {(t.key, t.effect) for t in tolerations} == wanted
    assert all(t.key for t in tolerations)


def test_aws_and_azure_taints_are_all_covered(rendered: dict[str, dict[str, Any]]) -> None:
    aws = {t["key"] for t in rendered["examples/pools-aws.yaml"]["tolerations"]}
    azure = {t["key"] for t in rendered["examples/pools-azure.yaml"]["tolerations"]}
    assert {keys.TAINT_GPU, keys.TAINT_MIN_GPUS} <= aws
    # The Azure example has Spot GPU pools: AKS taints their nodes, and the plugin must still run there.
    assert {keys.TAINT_GPU, keys.TAINT_AZURE_SPOT} <= azure


def test_time_slicing_and_mig_settings(tmp_path: Path) -> None:
    values = _render(tmp_path, "examples/pools-aws.yaml",
                     device_plugin_time_slicing_replicas=4, device_plugin_mig_strategy="single")
    assert values["migStrategy"] == "single"
    config = yaml.safe_load(values["config"]["map"][values["config"]["default"]])
    assert config["flags"]["migStrategy"] == "single"
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": keys.RES_GPU, "replicas": 4}]


def test_no_time_slicing_config_by_default(rendered: dict[str, dict[str, Any]]) -> None:
    values = rendered["examples/pools-aws.yaml"]
    assert "config" not in values
    assert values["migStrategy"] == "none"


def test_bad_pools_file_is_refused_naming_the_file_and_pool(tmp_path: Path) -> None:
    bad = tmp_path / "pools.yaml"
    bad.write_text("cluster: c\ncloud: aws\npools:\n  - name: gpu1\n    instance_types: [g6.xlarge]\n"
                   "    zones: [us-east-1a]\n    min: 5\n    max: 2\n")
    proc = subprocess.run(
        [sys.executable, str(REPO / "roles" / "gpuburst_env" / "files" / "gpu_pools.py"), str(bad)],
        capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 1
    assert str(bad) in proc.stderr and "gpu1" in proc.stderr
    assert proc.stdout == ""


SHARED_POOLS = """\
cluster: c
cloud: aws
region: us-east-1
pools:
  - {name: whole, instance_types: [g6.xlarge], zones: [us-east-1a], max: 2}
  - {name: l4-shared, instance_types: [g6.xlarge], zones: [us-east-1a], max: 2,
     gpu_sharing: {time_slicing: {replicas: 4}}}
  - {name: h100-mig, instance_types: [p5.48xlarge], zones: [us-east-1a], max: 1,
     gpu_sharing: {mig: {strategy: mixed, layout: all-balanced}}}
"""


def _chart_keys(tree: Any, prefix: str = "") -> set[str]:
    if not isinstance(tree, dict) or not tree:
        return {prefix}
    return {k for key, sub in tree.items() for k in _chart_keys(sub, f"{prefix}.{key}" if prefix else key)}


def test_one_device_plugin_config_per_sharing_pool_selected_by_its_nodes_label(tmp_path: Path) -> None:
    pools_file = tmp_path / "pools.yaml"
    pools_file.write_text(SHARED_POOLS)
    values = _render(tmp_path, str(pools_file))
    config = values["config"]
    assert set(config["map"]) == {config["default"], "l4-shared", "h100-mig"}
    parsed = {name: yaml.safe_load(text) for name, text in config["map"].items()}
    assert parsed["l4-shared"]["sharing"]["timeSlicing"]["resources"] == [{"name": keys.RES_GPU, "replicas": 4}]
    assert parsed["h100-mig"]["flags"]["migStrategy"] == "mixed"
    assert parsed[config["default"]]["flags"]["migStrategy"] == "none"
    # A chart-wide migStrategy would override every per-node config.
    assert "migStrategy" not in values
    # Each sharing pool's nodes name their config; whole-GPU nodes take the default.
    pools = {p.name: p for p in load_config(pools_file).pools}
    for name in ("l4-shared", "h100-mig"):
        assert pools[name].template_node().labels[keys.LABEL_DEVICE_PLUGIN_CONFIG] == name
    assert keys.LABEL_DEVICE_PLUGIN_CONFIG not in pools["whole"].template_node().labels
    # The plugin tolerates the time-sliced pool's sharing taint.
    tolerations = [Toleration(**t) for t in values["tolerations"]]
    assert untolerated_taint(tolerations, pools["l4-shared"].template_node().taints) is None
    # Every key we set is one the pinned chart declares.
    chart = yaml.safe_load((REPO.parent / "shared" / "charts" / "nvidia-device-plugin" / "values.yaml").read_text())
    declared = _chart_keys(chart)
    for key in _chart_keys({k: v for k, v in values.items() if k != "config"}) | {"config.map", "config.default"}:
        assert any(key == d or key.startswith(d + ".") for d in declared), key


def test_relative_pools_file_and_missing_review_folder_as_the_docs_give_them(tmp_path: Path) -> None:
    """docs/ansible.md's review run, as written: a pools file relative to the repository root, and review folders
    that do not exist yet (created, the one holding keys private)."""
    review = tmp_path / "review"
    values = _render(review, "examples/pools-aws.yaml", gpuburst_env_pools_file="examples/pools-aws.yaml",
                     metrics_certs_render_dir=str(review / "certs"))
    assert values["tolerations"]
    assert (review / "certs" / "metrics-certs.yml").is_file()
    assert (review / "certs").stat().st_mode & 0o077 == 0


def test_missing_pools_file_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "gpuburst.cluster.cluster",
         "-e", "gpuburst_env_pools_file=examples/no-such-pools.yaml"],
        capture_output=True, text=True, env=env, cwd=REPO, check=False, timeout=300)
    assert proc.returncode != 0
    assert "gpuburst_env_pools_file examples/no-such-pools.yaml: cannot read it from" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
