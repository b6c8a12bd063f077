"""Adopting an existing cluster's groups: the tags of cluster-autoscaler, eksctl, kops and the
kubernetes-ec2-autoscaler mapped to pools, and what cannot be mapped reported."""

from __future__ import annotations

from typing import Any

from scaler.core.config.adopt import NodeGroup, adopt
from scaler.core.config.pool import Pool
from scaler.core.config.settings import parse_config
from scaler.core.model import keys

SEED = {keys.TAG_KUBERNETES_CLUSTER: "ml"}


def group(name: str, tags: dict[str, str], itype: str = "p3.16xlarge", *, spot: bool = False,
          zones: tuple[str, ...] = ("us-east-1a",), low: int = 0, high: int = 20, **kw: Any) -> NodeGroup:
    return NodeGroup(name=name, tags=tags, instance_types=(itype,), zones=zones, min_size=low, max_size=high,
                     spot=spot, **kw)


def pools(result: Any) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in result.config["pools"]}


def test_kubernetes_ec2_autoscaler_workers_become_pools_with_their_selectors() -> None:
    result = adopt([
        group("ml-gpu-od", {**SEED, "Role": "worker", "kube/openai.com/team": "rl"}, high=8),
        group("ml-gpu-spot", {**SEED, "KubernetesRole": "kubernetes-minion", "kube/openai.com/team": "rl"},
              spot=True, high=32),
        group("ml-cpu", {**SEED, "Role": "worker"}, "m5.4xlarge", low=1, high=10),
        group("ml-master", {**SEED, "Role": "master"}, "m5.large", low=1, high=1),
        group("other-cluster", {keys.TAG_KUBERNETES_CLUSTER: "prod", "Role": "worker"}),
    ], cloud="aws", cluster="ml", region="us-east-1")
    got = pools(result)
    assert sorted(got) == ["ml-cpu", "ml-gpu-od", "ml-gpu-spot"]  # the master and prod's group left out
    spot = got["ml-gpu-spot"]
    assert (spot["capacity_type"], spot["role"], spot["max"], spot["fallback"]) == ("spot", "gpu", 32, "ml-gpu-od")
    assert spot["labels"] == {"openai.com/team": "rl"} and spot["provider_ref"] == "ml-gpu-spot"
    assert (got["ml-cpu"]["role"], got["ml-cpu"]["min"]) == ("general", 1)
    assert [str(u) for u in result.unmapped] == [
        "ml-master: group: Role=master: the kubernetes-ec2-autoscaler scales only worker or kubernetes-minion groups"]
    parse_config(result.config, "imported")  # what simulate and run load


def test_tags_to_add_make_the_groups_the_scalers_by_its_own_discovery() -> None:
    result = adopt([group("ml-gpu-od", {**SEED, "Role": "worker"}, high=8)], cloud="aws", cluster="ml")
    tags = result.tags_to_add["ml-gpu-od"]
    assert tags[keys.TAG_CA_ENABLED] == "true" and tags[keys.tag_ca_cluster("ml")] == "owned"
    # With them added, the scaler's own reader of cluster-autoscaler tags sees the same pool.
    pool = Pool.from_tags({**SEED, "Role": "worker", **tags}, cloud="aws", cluster="ml", provider_ref="ml-gpu-od",
                          instance_types=["p3.16xlarge"], zones=["us-east-1a"], min_size=0, max_size=8)
    assert (pool.name, pool.gpus, pool.capacity_type) == ("ml-gpu-od", 8, "on-demand")


def test_eksctl_and_cluster_autoscaler_templates() -> None:
    tags = {keys.TAG_EKSCTL_CLUSTER: "ml", keys.TAG_EKSCTL_NODEGROUP: "A100-Spot",
            keys.TAG_CA_ENABLED: "true", keys.tag_ca_cluster("ml"): "owned",
            keys.TAG_CA_TEMPLATE_LABEL + "workload": "train",
            keys.TAG_CA_TEMPLATE_LABEL + keys.LABEL_EKS_CAPACITY_TYPE: "SPOT",
            keys.TAG_CA_TEMPLATE_TAINT + "dedicated": "train:NoSchedule",
            keys.TAG_CA_TEMPLATE_TAINT + "bad key!": "x:NoSchedule",
            "team": "research"}
    od = {keys.TAG_EKSCTL_CLUSTER: "ml", keys.TAG_EKSCTL_NODEGROUP: "a100-od"}
    result = adopt([group("eksctl-ml-nodegroup-A100-Spot-NodeGroup-1X2Y", tags, "p4d.24xlarge"),
                    group("eksctl-ml-nodegroup-a100-od-NodeGroup-9Z", od, "p4d.24xlarge")],
                   cloud="aws", cluster="ml")
    spot = pools(result)["a100-spot"]
    assert spot["capacity_type"] == "spot"  # from eks.amazonaws.com/capacityType=SPOT
    assert spot["labels"] == {"workload": "train"} and spot["taints"] == ["dedicated=train:NoSchedule"]
    assert spot["fallback"] == "a100-od"
    assert {(u.group[:25], u.what) for u in result.unmapped} == {
        ("eksctl-ml-nodegroup-A100-", "taint bad key!=x:NoSchedule"), ("eksctl-ml-nodegroup-A100-", "tag team")}


def test_kops_control_plane_skipped_and_instance_group_names_the_pool() -> None:
    base = {keys.TAG_KUBERNETES_CLUSTER: "ml.example.com", keys.TAG_K8S_CLUSTER_PREFIX + "ml.example.com": "owned"}
    result = adopt([
        group("nodes.ml.example.com", {**base, keys.TAG_KOPS_ROLE_PREFIX + "node": "1",
                                       keys.TAG_CA_TEMPLATE_LABEL + keys.LABEL_KOPS_INSTANCEGROUP: "nodes"},
              "m5.xlarge"),
        group("master-us-east-1a.masters.ml.example.com", {**base, keys.TAG_KOPS_ROLE_PREFIX + "master": "1"},
              "m5.large"),
    ], cloud="aws", cluster="ml.example.com")
    assert list(pools(result)) == ["nodes"]
    assert pools(result)["nodes"]["labels"] == {keys.LABEL_KOPS_INSTANCEGROUP: "nodes"}
    assert [u.reason for u in result.unmapped] == ["kops role master: not a worker group"]


def test_what_would_make_the_file_invalid_is_left_out_and_named() -> None:
    result = adopt([
        group("ml-x1", {**SEED, "Role": "worker"}, "x1.32xlarge"),  # not in the catalogue
        group("ml-spot-only", {**SEED, "Role": "worker"}, "g5.xlarge", spot=True),  # no on-demand to fall back to
        group("ml-empty", {**SEED, "Role": "worker"}, "m5.large", high=0),
        group("ml-far", {**SEED, "Role": "worker"}, "m5.large", zones=("eu-west-1a",)),
        group("ml-ok", {**SEED, "Role": "worker"}, "m5.large"),
    ], cloud="aws", cluster="ml", region="us-east-1")
    assert list(pools(result)) == ["ml-ok"]
    reasons = {u.group: u.reason for u in result.unmapped}
    assert "x1.32xlarge" in reasons["ml-x1"] and "catalogue" in reasons["ml-x1"]
    assert reasons["ml-spot-only"].startswith("fallback: is required for a spot GPU pool")
    assert reasons["ml-empty"].startswith("max: 0")
    assert "not zones of us-east-1" in reasons["ml-far"]
    parse_config(result.config, "imported")


def test_same_names_get_told_apart() -> None:
    result = adopt([group("a", {**SEED, "Role": "worker", keys.TAG_POOL: "cpu"}, "m5.large"),
                    group("b", {**SEED, "Role": "worker", keys.TAG_POOL: "cpu"}, "m5.large")],
                   cloud="aws", cluster="ml")
    assert sorted(pools(result)) == ["cpu", "cpu-2"]


def test_aks_agent_pools_labels_taints_and_azure_tag_form() -> None:
    spot = group("gpuspot", {"team": "ml"}, "Standard_NC4as_T4_v3", spot=True, zones=("1",), high=6,
                 labels={"workload": "infer", keys.LABEL_AZURE_SCALESET_PRIORITY: "spot"},
                 taints=(f"{keys.TAINT_AZURE_SPOT}={keys.TAINT_AZURE_SPOT_VALUE}:NoSchedule", "sku=gpu:NoSchedule"),
                 azure_kind="agentpool")
    od = group("gpuod", {}, "Standard_NC4as_T4_v3", zones=("1",), high=2, azure_kind="agentpool",
               bounds_note="AKS autoscaling is off")
    system = group("system", {}, "Standard_D4s_v5", zones=("1",), low=1, high=3, system=True,
                   azure_kind="agentpool")
    vmss = group("gpu-vmss", {keys.azure_tag_key(keys.tag_ca_cluster("burst")): "owned",
                              keys.azure_tag_key(keys.TAG_CA_TEMPLATE_LABEL + "pool-kind"): "vmss"},
                 "Standard_NC4as_T4_v3", zones=("1",), high=4, azure_kind="vmss")
    result = adopt([spot, od, system, vmss], cloud="azure", cluster="burst", region="eastus")
    got = pools(result)
    assert got["gpuspot"]["labels"] == {"workload": "infer"}  # the spot label and taint are the pool's own
    assert got["gpuspot"]["taints"] == ["sku=gpu:NoSchedule"]
    assert got["gpuspot"]["fallback"] == "gpu-vmss"  # the first on-demand pool of its VM size, by name
    assert got["system"]["role"] == "system" and got["gpu-vmss"]["azure_kind"] == "vmss"
    assert got["gpu-vmss"]["labels"] == {"pool-kind": "vmss"}
    assert {(u.group, u.what) for u in result.unmapped} == {("gpuspot", "tag team"), ("gpuod", "min/max")}
    assert all("/" not in k for tags in result.tags_to_add.values() for k in tags)  # Azure's tag form
    parse_config(result.config, "imported")
