"""The pool model: validation messages, derived labels/taints, templates and tag round-trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from core_builders import POOLS, config, shipped_example

from scaler.configfile import load_config
from scaler.core.config.catalogue import CATALOGUE
from scaler.core.config.pool import Pool
from scaler.core.config.settings import ConfigError, parse_config
from scaler.core.model import keys
from scaler.core.planning.capacity import zone_hints
from scaler.core.scheduling.predicates import fits

ROOT = Path(__file__).resolve().parents[3]


def _config(*pools: dict[str, Any], cloud: str = "aws") -> dict[str, Any]:
    return {"cluster": "c1", "cloud": cloud, "pools": list(pools)}


GPU_SPOT = {"name": "gpu-a", "capacity_type": "spot", "instance_types": ["g5.2xlarge"],
            "zones": ["us-east-1a"], "max": 10, "fallback": "gpu-od"}
GPU_OD = {"name": "gpu-od", "instance_types": ["g5.2xlarge"], "zones": ["us-east-1a"], "max": 10}


def test_example_pools_load_and_resolve() -> None:
    for name in ("pools-aws.yaml", "pools-azure.yaml"):
        path = ROOT / "examples" / name
        if not path.exists():
            continue
        cfg = load_config(path)
        assert cfg.pools, name
        for pool in cfg.pools:
            assert pool.instance is not None
            assert pool.gpus == CATALOGUE[pool.instance.name].gpus


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"min": 5, "max": 2}, "pools[gpu-a].max: min (5) is greater than max (2)"),
        ({"instance_types": ["m5.large"]}, "pools[gpu-a].role: role gpu on m5.large, which has no GPU"),
        ({"instance_types": ["g9.huge"]}, "pools[gpu-a].instance_types: instance type 'g9.huge' is not in"),
        ({"fallback": None}, "pools[gpu-a].fallback: is required for a spot GPU pool"),
        ({"fallback": "nope"}, "pools[gpu-a].fallback: 'nope' is not a declared pool"),
        ({"gpus_per_node": 4}, "pools[gpu-a].gpus_per_node: gpus_per_node is 4 but g5.2xlarge has 1"),
        ({"colour": "red"}, "pools[gpu-a].colour: Extra inputs are not permitted"),
        ({"instance_types": ["g5.2xlarge", "g5.12xlarge"]}, "mix GPU counts [1, 4]"),
    ],
)
def test_bad_pool_names_pool_and_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_config({**GPU_SPOT, **change}, GPU_OD), "stack.yaml")
    assert "stack.yaml" in str(err.value)
    assert message in str(err.value)


def test_fallback_loop_is_rejected() -> None:
    a = {**GPU_SPOT, "fallback": "gpu-b"}
    b = {**GPU_SPOT, "name": "gpu-b", "fallback": "gpu-a"}
    with pytest.raises(ConfigError, match="loops"):
        parse_config(_config(a, b), "x.yaml")


def test_azure_spot_system_pool_is_refused() -> None:
    pool = {"name": "sys", "role": "system", "cloud": "azure", "capacity_type": "spot",
            "vm_size": "Standard_D4s_v5", "zones": ["1"], "max": 3}
    with pytest.raises(ConfigError, match=r"pools\[sys\].*Spot system pool"):
        parse_config(_config(pool, cloud="azure"), "Pulumi.azure-dev.yaml")


def test_yaml_error_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "pools.yaml"
    f.write_text("cluster: c\npools:\n  - name: [\n")
    with pytest.raises(ConfigError, match=r"pools.yaml:\d+:\d+: not valid YAML"):
        load_config(f)


def _pool(**kw: Any) -> Pool:
    cfg = parse_config(_config({**GPU_SPOT, **kw}, GPU_OD), "t")
    return cfg.pools[0]


def test_template_node_is_what_a_new_node_looks_like() -> None:
    pool = _pool(labels={"team": "ml"}, taints=["dedicated=ml:NoSchedule"])
    node = pool.template_node()
    assert node.labels[keys.LABEL_INSTANCE_TYPE] == "g5.2xlarge"
    assert node.labels[keys.LABEL_ZONE] == "us-east-1a"
    assert node.labels[keys.LABEL_CAPACITY_TYPE] == "spot"
    assert node.labels[keys.LABEL_GPU_PRESENT] == "true"
    assert node.labels[keys.LABEL_ACCELERATOR_AWS] == "nvidia-a10g"
    assert node.labels["team"] == "ml"
    assert {str(t) for t in node.taints} == {"nvidia.com/gpu=present:NoSchedule", "dedicated=ml:NoSchedule"}
    # Allocatable is below capacity (kubelet reserve) and DaemonSets take their share.
    assert node.allocatable["nvidia.com/gpu"] == 1
    assert node.allocatable["cpu"] < 8000
    assert node.allocatable["memory"] < 32 * 2**30
    assert sum(p.requests.get("cpu", 0) for p in node.pods) > 0


def test_azure_spot_pool_knows_the_taint_aks_adds() -> None:
    pool = parse_config(_config(
        {"name": "t4", "cloud": "azure", "capacity_type": "spot", "vm_size": "Standard_NC4as_T4_v3",
         "zones": ["1"], "max": 5, "fallback": "t4od"},
        {"name": "t4od", "cloud": "azure", "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 5},
        cloud="azure"), "t").pools[0]
    assert "kubernetes.azure.com/scalesetpriority=spot:NoSchedule" in {str(t) for t in pool.node_taints()}


def test_multi_gpu_pool_taint_keeps_single_gpu_pods_off() -> None:
    from scaler.core.model.objects import Pod, Toleration

    pool = parse_config(_config(
        {"name": "big", "instance_types": ["g5.48xlarge"], "zones": ["us-east-1a"], "max": 2, "min_pod_gpus": 2},
    ), "t").pools[0]
    gpu_tol = Toleration(keys.TAINT_GPU, "Exists")
    small = Pod("one", requests={"nvidia.com/gpu": 1, "pods": 1}, tolerations=(gpu_tol,))
    big = Pod("eight", requests={"nvidia.com/gpu": 8, "pods": 1},
              tolerations=(gpu_tol, Toleration(keys.TAINT_MIN_GPUS, "Equal", "2", "NoSchedule")))
    node = pool.template_node()
    assert not fits(small, node)
    assert fits(big, node)


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_tags_round_trip(cloud: str) -> None:
    if cloud == "aws":
        raw = {**GPU_SPOT, "labels": {"team": "ml", "example.com/tier": "a"}, "taints": ["dedicated=ml:NoExecute"]}
        other = GPU_OD
    else:
        raw = {"name": "a100", "cloud": "azure", "capacity_type": "spot", "vm_size": "Standard_NC24ads_A100_v4",
               "zones": ["1"], "max": 3, "fallback": "a100-od", "labels": {"team": "ml"}}
        other = {"name": "a100-od", "cloud": "azure", "vm_size": "Standard_NC24ads_A100_v4", "zones": ["1"], "max": 3}
    pool = parse_config(_config(raw, other, cloud=cloud), "t").pools[0]
    tags = pool.to_tags("c1")
    if cloud == "azure":
        assert all("/" not in k for k in tags)
        assert tags["k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu"] == "1"
    else:
        assert tags["k8s.io/cluster-autoscaler/enabled"] == "true"
        assert tags["k8s.io/cluster-autoscaler/c1"] == "owned"
        assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "1"
        assert tags["k8s.io/cluster-autoscaler/node-template/taint/dedicated"] == "ml:NoExecute"
    back = Pool.from_tags(tags, cloud=pool.cloud, cluster="c1", provider_ref=pool.provider_ref or pool.name,
                          instance_types=pool.instance_types, zones=pool.zones,
                          min_size=pool.min_size, max_size=pool.max_size)
    assert back.model_dump(exclude={"provider_ref"}) == pool.model_dump(exclude={"provider_ref"})
    assert back.template_node().labels == pool.template_node().labels
    assert back.node_taints() == pool.node_taints()


def test_from_tags_reads_an_eksctl_group() -> None:
    tags = {
        "k8s.io/cluster-autoscaler/enabled": "true",
        "k8s.io/cluster-autoscaler/prod": "owned",
        "k8s.io/cluster-autoscaler/node-template/label/eks.amazonaws.com/capacityType": "SPOT",
        "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu": "true:NoSchedule",
        "alpha.eksctl.io/nodegroup-name": "gpu-ng",
    }
    pool = Pool.from_tags(tags, cloud="aws", cluster="prod", provider_ref="eksctl-prod-nodegroup-gpu-ng-NodeGroup-1X",
                          instance_types=["g4dn.xlarge"], zones=["us-east-1a"], min_size=0, max_size=4)
    assert pool.capacity_type == "spot"
    assert pool.role == "gpu"
    assert pool.gpus == 1
    assert any(t.key == "nvidia.com/gpu" for t in pool.node_taints())
    with pytest.raises(ValueError, match="not tagged for cluster-autoscaler"):
        Pool.from_tags({}, cloud="aws", cluster="prod", provider_ref="x", instance_types=["g4dn.xlarge"],
                       zones=["a"], min_size=0, max_size=1)


def test_a_single_zone_pool_falling_back_across_zones_gets_a_hint() -> None:
    hints = zone_hints(config(POOLS).pools)  # the planner tests' pools: gpu1-spot-a -> gpu1-od (a and b)
    assert any(h.startswith("pools[gpu1-spot-a].fallback: gpu1-od spans us-east-1a, us-east-1b") for h in hints)
    assert zone_hints(shipped_example().pools) == []  # the examples give every fallback one zone
