"""Shared GPU pools: what one `gpu_sharing` declaration yields, and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.core.config.pool import Pool
from scaler.core.config.settings import ConfigError, parse_config
from scaler.core.model import keys


def _config(**pool: Any) -> dict[str, Any]:
    base = {"name": "shared", "cloud": "aws", "role": "gpu", "capacity_type": "on-demand", "zones": ["us-east-1a"],
            "max": 4}
    return {"cluster": "c", "cloud": "aws", "region": "us-east-1", "pools": [{**base, **pool}]}


def _pool(**pool: Any) -> Pool:
    return parse_config(_config(**pool), "pools.yaml").pools[0]


def test_time_slicing_multiplies_the_gpu_and_keeps_whole_gpu_pods_off() -> None:
    pool = _pool(instance_type="g6.xlarge", gpu_sharing={"time_slicing": {"replicas": 4}})
    node = pool.template_node()
    assert node.allocatable[keys.RES_GPU] == 4
    assert node.labels[keys.LABEL_DEVICE_PLUGIN_CONFIG] == "shared"
    assert node.labels[keys.LABEL_GPU_REPLICAS] == "4"
    assert node.labels[keys.LABEL_GPU_SHARING_STRATEGY] == "time-slicing"
    assert node.labels[keys.LABEL_GPU_PRODUCT] == "NVIDIA-L4-SHARED"
    assert any(t.key == keys.TAINT_GPU_SHARING and t.value == "time-slicing" for t in node.taints)
    tags = pool.to_tags("c")
    assert tags[keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU] == "4"
    assert tags[keys.TAG_CA_TEMPLATE_LABEL + keys.LABEL_DEVICE_PLUGIN_CONFIG] == "shared"


def test_mig_mixed_advertises_mig_devices_and_no_whole_gpu() -> None:
    pool = _pool(instance_type="p5.48xlarge",
                 gpu_sharing={"mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}})
    alloc = pool.template_node().allocatable
    assert keys.RES_GPU not in alloc
    assert alloc[keys.MIG_RESOURCE_PREFIX + "3g.40gb"] == 8
    assert alloc[keys.MIG_RESOURCE_PREFIX + "1g.10gb"] == 16
    # Mixed MIG needs no sharing taint: whole-GPU pods find no nvidia.com/gpu there.
    assert all(t.key != keys.TAINT_GPU_SHARING for t in pool.node_taints())
    parted = pool.sharing.mig_parted_config("shared") if pool.sharing else None
    assert parted == {"version": "v1", "mig-configs": {"gpuburst-shared": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]}}


def test_mig_mixed_on_some_gpus_leaves_the_others_whole_for_whole_gpu_pods() -> None:
    """An 8-GPU node cut only where slices are wanted: the device plugin's mixed strategy advertises the GPUs
    left whole as nvidia.com/gpu, and mig-parted's config disables MIG on them (its per-device form)."""
    pool = _pool(instance_type="p4d.24xlarge",
                 gpu_sharing={"mig": {"strategy": "mixed", "layout": {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2},
                                      "gpus": 2}})
    alloc = pool.template_node().allocatable
    assert alloc[keys.RES_GPU] == 6
    assert alloc[keys.MIG_RESOURCE_PREFIX + "3g.20gb"] == 2
    assert alloc[keys.MIG_RESOURCE_PREFIX + "1g.5gb"] == 4
    parted = pool.sharing.mig_parted_config("shared") if pool.sharing else None
    assert parted == {"version": "v1", "mig-configs": {"gpuburst-shared": [
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
        {"devices": [2, 3, 4, 5, 6, 7], "mig-enabled": False}]}}


def test_mig_single_and_named_layouts() -> None:
    single = _pool(instance_type="p4d.24xlarge", gpu_sharing={"mig": {"strategy": "single", "profile": "1g.5gb"}})
    assert single.template_node().allocatable[keys.RES_GPU] == 56
    assert single.node_labels()[keys.LABEL_GPU_PRODUCT] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert any(t.key == keys.TAINT_GPU_SHARING for t in single.node_taints())
    balanced = _pool(instance_type="p4d.24xlarge", gpu_sharing={"mig": {"strategy": "mixed", "layout": "all-balanced"}})
    assert balanced.template_node().allocatable[keys.MIG_RESOURCE_PREFIX + "1g.5gb"] == 16


@pytest.mark.parametrize(("pool", "field", "words"), [
    ({"instance_type": "g6.xlarge", "gpu_sharing": {"mig": {"strategy": "single", "profile": "1g.10gb"}}},
     "gpu_sharing.mig", "does not support MIG"),
    ({"instance_type": "p5.48xlarge",
      "gpu_sharing": {"mig": {"strategy": "mixed", "layout": {"3g.40gb": 2, "1g.10gb": 1}}}},
     "gpu_sharing.mig.layout", "does not fit"),
    ({"instance_type": "p5.48xlarge", "gpu_sharing": {"mig": {"strategy": "mixed", "layout": {"4g.40gb": 2}}}},
     "gpu_sharing.mig.layout", "at most 1 x 4g.40gb"),
    ({"instance_type": "p5.48xlarge", "gpu_sharing": {"mig": {"strategy": "single", "profile": "1g.5gb"}}},
     "gpu_sharing.mig.profile", "not a MIG profile"),
    ({"instance_type": "m6i.large", "role": "general", "gpu_sharing": {"time_slicing": {"replicas": 2}}},
     "gpu_sharing", "no GPU"),
    ({"instance_type": "g6.48xlarge", "gpu_sharing": {"time_slicing": {"replicas": 20}}},
     "gpu_sharing", "exceed max_pods"),
    ({"instance_type": "g6.xlarge", "gpu_sharing": {"time_slicing": {"replicas": 2}, "mig": None}, "min_pod_gpus": 1},
     "gpu_sharing", "drop min_pod_gpus"),
    ({"instance_type": "g6.xlarge", "gpu_sharing": {"time_slicing": {"replicas": 1}}},
     "gpu_sharing.time_slicing.replicas", "greater than or equal to 2"),
    ({"instance_type": "g6.xlarge", "gpu_sharing": {}}, "gpu_sharing", "exactly one of"),
    ({"instance_type": "p4d.24xlarge", "gpu_sharing": {"mig": {"strategy": "mixed", "layout": "all-balanced",
                                                               "gpus": 9}}},
     "gpu_sharing.mig.gpus", "p4d.24xlarge has 8"),
    ({"instance_type": "p4d.24xlarge", "gpu_sharing": {"mig": {"strategy": "single", "profile": "1g.5gb", "gpus": 2}}},
     "gpu_sharing.mig", "gpus is for strategy mixed"),
    # Dynamic MIG (the DRA driver cuts a GPU per claim) needs DRA and Hopper, and takes no fixed layout.
    ({"instance_type": "p4d.24xlarge", "gpu_allocation": "dra", "gpu_sharing": {"mig": {"dynamic": True}}},
     "gpu_sharing.mig.dynamic", "only on Hopper"),
    ({"instance_type": "p5.48xlarge", "gpu_sharing": {"mig": {"dynamic": True}}},
     "gpu_sharing.mig.dynamic", "declare gpu_allocation: dra"),
    ({"instance_type": "p5.48xlarge", "gpu_allocation": "dra",
      "gpu_sharing": {"mig": {"dynamic": True, "strategy": "mixed", "layout": "all-balanced"}}},
     "gpu_sharing.mig", "give no strategy, profile, layout or gpus"),
    ({"instance_type": "p5.48xlarge", "gpu_sharing": {"mig": {"layout": "all-balanced"}}},
     "gpu_sharing.mig", "give a strategy"),
])
def test_invalid_sharing_is_refused_naming_the_pool_and_field(pool: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        _pool(**pool)
    message = str(err.value)
    assert f"pools[shared].{field}" in message
    assert words in message


@pytest.mark.parametrize("sharing", [
    {"time_slicing": {"replicas": 4}},
    {"mig": {"strategy": "single", "profile": "2g.20gb"}},
    {"mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "4g.40gb": 1}}},
    {"mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "4g.40gb": 1}, "gpus": 3}},
    {"mig": {"dynamic": True}},
])
def test_sharing_round_trips_through_cluster_autoscaler_tags(sharing: dict[str, Any]) -> None:
    itype = "g6.xlarge" if "time_slicing" in sharing else "p5.48xlarge"
    dra = {"gpu_allocation": "dra"} if sharing.get("mig", {}).get("dynamic") else {}
    pool = _pool(instance_type=itype, gpu_sharing=sharing, **dra)
    back = Pool.from_tags(pool.to_tags("c"), cloud="aws", cluster="c", provider_ref="asg-shared",
                          instance_types=[itype], zones=["us-east-1a"], min_size=0, max_size=4)
    assert back.gpu_sharing == pool.gpu_sharing
    assert back.labels == {}
    assert back.template_node().allocatable == pool.template_node().allocatable


# --- the planner on shared pools ------------------------------------------------------------------
def _planning_config(*extra: dict[str, Any]) -> Any:
    from core_builders import POOLS, config
    return config([*POOLS, *extra])


MIG_POOL = {"name": "h100-mig", "cloud": "aws", "instance_type": "p5.48xlarge", "zones": ["us-east-1a"], "max": 2,
            "gpu_sharing": {"mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}}}
SHARED_POOL = {"name": "l4-shared", "cloud": "aws", "instance_type": "g6.xlarge", "zones": ["us-east-1a"], "max": 10,
               "gpu_sharing": {"time_slicing": {"replicas": 4}}}


def _mig_pod(name: str) -> Any:
    from core_builders import GPU_TOL, MIN_GPUS_TOL, pod
    return pod(name, extra={keys.MIG_RESOURCE_PREFIX + "1g.10gb": 1}, tolerations=(GPU_TOL, MIN_GPUS_TOL))


def test_a_mig_pod_scales_up_a_mig_pool_and_explain_says_why_not_the_others() -> None:
    from core_builders import plan, snapshot

    from scaler.core.planning.state import State
    cfg = _planning_config(MIG_POOL)
    result, _ = plan(snapshot(cfg, [_mig_pod(f"m{i}") for i in range(20)]), State(), cfg)
    # 16 x 1g.10gb per node: 20 pods need two nodes of the MIG pool and nothing else.
    assert {(u.pool, u.count) for u in result.scale_ups} == {("h100-mig", 2)}
    without, _ = plan(snapshot(_planning_config(), [_mig_pod("m0")]), State(), _planning_config())
    verdict = without.verdicts["default/m0"]
    assert verdict.outcome == "unschedulable"
    assert without.scale_ups == []
    gpu_pools = [p.name for p in _planning_config().pools if p.role == "gpu"]
    for name in gpu_pools:
        assert f"Insufficient {keys.MIG_RESOURCE_PREFIX}1g.10gb" in verdict.reasons[name], name


def test_time_sliced_pool_takes_only_pods_that_opt_in() -> None:
    from core_builders import GPU_TOL, plan, pod, snapshot

    from scaler.core.model.objects import Toleration
    from scaler.core.planning.state import State
    cfg = _planning_config(SHARED_POOL)
    sharing_tol = Toleration(keys.TAINT_GPU_SHARING, "Equal", "time-slicing", "NoSchedule")
    shared = [pod(f"s{i}", gpu=1, tolerations=(GPU_TOL, sharing_tol),
                  selector={keys.LABEL_GPU_SHARING_STRATEGY: "time-slicing"}) for i in range(6)]
    whole = [pod("w0", gpu=1)]
    result, _ = plan(snapshot(cfg, [*shared, *whole]), State(), cfg)
    ups = {u.pool: u.count for u in result.scale_ups}
    assert ups.get("l4-shared") == 2  # 6 replicas of 4 per node
    whole_verdict = result.verdicts["default/w0"]
    assert whole_verdict.pool == "gpu1-spot-a"  # the cheapest whole-GPU pool, never the shared one
    assert whole_verdict.reasons["l4-shared"] == "node(s) had untolerated taint {gpuburst.io/gpu-sharing: time-slicing}"


def test_a_shared_gpu_counts_as_used_while_any_replica_is() -> None:
    from core_builders import GPU_TOL, node_of, pod

    from scaler.core.model.objects import Toleration
    from scaler.core.planning.scaledown import utilization
    cfg = _planning_config(SHARED_POOL, MIG_POOL)
    tol = (GPU_TOL, Toleration(keys.TAINT_GPU_SHARING, "Equal", "time-slicing", "NoSchedule"))
    one_replica = node_of(cfg, "l4-shared", "s1", [pod("nb", gpu=1, tolerations=tol)])
    assert utilization(one_replica, cfg.pool("l4-shared")) == 1.0  # its only GPU is busy
    idle = node_of(cfg, "l4-shared", "s2")
    assert utilization(idle, cfg.pool("l4-shared")) == 0.0
    mig = node_of(cfg, "h100-mig", "m1", [_mig_pod("a"), _mig_pod("b")])
    assert utilization(mig, cfg.pool("h100-mig")) == 2 / 8  # two slices keep at most two of eight GPUs busy


def test_a_ready_mig_mixed_node_with_its_slices_published_is_not_coming() -> None:
    """A MIG mixed node advertises MIG devices and no whole GPU: once Ready with every slice published it
    is an existing node (a pod on it fits existing; idle, it is unneeded), not one still booting."""
    from core_builders import node_of, plan, snapshot

    from scaler.core.planning.state import State
    cfg = _planning_config(MIG_POOL)
    now = 1000.0
    busy = node_of(cfg, "h100-mig", "m-busy", created_at=now - 30)
    idle = node_of(cfg, "h100-mig", "m-idle", created_at=now - 30)
    assert keys.RES_GPU not in busy.allocatable  # mixed: only the slices
    result, _ = plan(snapshot(cfg, [_mig_pod("p0")], [busy, idle], now=now), State(), cfg)
    verdict = result.verdicts["default/p0"]
    assert (verdict.outcome, verdict.pool) == ("fits-existing", "h100-mig")
    assert result.scale_ups == []
    assert {busy.name, idle.name} - {verdict.node} <= set(result.unneeded)
