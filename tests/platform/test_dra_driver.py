"""NVIDIA's DRA driver as the platform installs it: on exactly the pools with `gpu_allocation: dra`,
rendered offline (the official chart at its pinned version, charts_helpers.official_chart) with the values
the component passes, for AWS and Azure.

A node runs one GPU agent: the driver's GPU kubelet plugin (here) or the device plugin (the Ansible
device_plugin role, tests/ansible/test_device_plugin_values.py). Placement is checked as
kube-scheduler decides it (node affinity and taints, `scaler.core.scheduling.predicates`) against each
pool's template node, the node a scale-up creates. The objects' schemas are checked with the rest of
the platform's in test_charts.py, and here once more through the repository's dev stacks given a DRA
pool (stack file -> stack -> platform), for the stacks' default Kubernetes version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from charts_helpers import Obj, Rendered, label_match, official_chart, releases, render
from gpuburst_platform.settings import DRA_DRIVER_NAME, DRA_DRIVER_NAMESPACE
from gpuburst_platform.versions import CHARTS
from platform_helpers import AWS_DRA_POOLS, AZURE_DRA_POOLS, ROOT, STACK_ENV, platform_program, run_program

from scaler.configfile import load_config
from scaler.core.config.repair import RepairSpec
from scaler.core.dra import convert, nvidia
from scaler.core.model.dra import DraObjects
from scaler.core.planning.repair import device_taints, signals
from scaler.core.scheduling.predicates import static_reason
from scaler.kube.convert import pod_from_json

POOLS = {"aws": AWS_DRA_POOLS, "azure": AZURE_DRA_POOLS}
PIN = CHARTS["dra-driver-nvidia-gpu"]
CHART = official_chart(PIN.chart.rsplit("/", 1)[-1], PIN.version)


def _driver(cloud: str, pools: Path | None) -> Rendered | None:
    recorder = platform_program(cloud, pools=pools)
    found = [r for r in releases(recorder) if json.loads(json.dumps(r.inputs))["name"] == DRA_DRIVER_NAME]
    if not found:
        return None
    (rel,) = found
    inputs = json.loads(json.dumps(rel.inputs))
    assert (inputs["chart"], inputs["version"]) == (PIN.chart, PIN.version)
    assert "repositoryOpts" not in inputs  # an OCI reference, no repository
    assert inputs["namespace"] == DRA_DRIVER_NAMESPACE
    return render(CHART, inputs["values"], DRA_DRIVER_NAME, inputs["namespace"])


@pytest.fixture(scope="module")
def drivers() -> dict[str, Rendered]:
    out = {}
    for cloud, pools in POOLS.items():
        driver = _driver(cloud, pools)
        assert driver is not None, f"{pools}: DRA pools but no DRA driver release"
        out[cloud] = driver
    return out


def _daemon_pod(ds: Any) -> Any:
    template = ds.body["spec"]["template"]
    return pod_from_json({"metadata": {"name": ds.name, "namespace": ds.namespace, **template["metadata"]},
                          "spec": template["spec"]})


@pytest.mark.parametrize("cloud", sorted(POOLS))
def test_the_gpu_kubelet_plugin_lands_exactly_on_the_dra_pools(drivers: dict[str, Rendered], cloud: str) -> None:
    driver = drivers[cloud]
    (ds,) = driver.of("DaemonSet")  # the GPU kubelet plugin, nothing else runs per node
    containers = [c["name"] for c in ds.body["spec"]["template"]["spec"]["containers"]]
    assert containers == ["gpus"], containers  # no compute-domains container
    pod = _daemon_pod(ds)
    pools = load_config(POOLS[cloud]).pools
    assert {p.dra for p in pools if p.role == "gpu"} == {True, False}  # both kinds of GPU pool
    for pool in pools:
        reason = static_reason(pod, pool.template_node())
        assert (reason is None) == pool.dra, f"{pool.name}: {reason}"


@pytest.mark.parametrize("cloud", sorted(POOLS))
def test_no_controller_and_no_compute_domain_class(drivers: dict[str, Rendered], cloud: str) -> None:
    driver = drivers[cloud]
    # The ComputeDomain controller is pinned to control-plane nodes, which EKS and AKS do not show.
    assert not driver.of("Deployment")
    # ... and no admission webhook: it needs cert-manager (or a CA bundle), which the platform does not run.
    assert not driver.of("ValidatingWebhookConfiguration") and not driver.of("Service")
    # The scaler's classes, and the chart's passthrough class, which selects devices only a driver with the
    # PassthroughSupport gate publishes (off: no device of ours matches it).
    assert {o.name for o in driver.of("DeviceClass")} == {c.name for c in nvidia.DEVICE_CLASSES} | {VFIO}
    assert "PassthroughSupport" not in driver.values.get("featureGates", {})


def test_no_driver_without_a_dra_pool() -> None:
    for cloud in POOLS:
        assert _driver(cloud, None) is None, cloud


VFIO = "vfio.gpu.nvidia.com"


def _class(obj: Any) -> tuple[str, tuple[str, ...]]:
    spec = obj.body["spec"]
    return obj.name, tuple(s["cel"]["expression"] for s in spec["selectors"])


def test_the_chart_makes_the_device_classes_the_scaler_plans_with(drivers: dict[str, Rendered]) -> None:
    """The scaler's DRA templates name the chart's classes; their selectors must be the chart's own."""
    chart = {_class(o) for o in drivers["aws"].of("DeviceClass") if o.name != VFIO}
    assert chart == {(c.name, tuple(c.selectors)) for c in nvidia.DEVICE_CLASSES}


def test_the_chart_gpu_class_serves_nvidia_com_gpu_on_a_live_cluster(drivers: dict[str, Rendered]) -> None:
    """The chart (since 25.12.0) gives its GPU class `extendedResourceName: nvidia.com/gpu` where the cluster serves
    resource.k8s.io/v1 (every DRA cluster of the platform: 1.34+). The API server keeps the field where
    DRAExtendedResource is on, and the scaler reads a live cluster's classes from it: an nvidia.com/gpu pod may
    then get a DRA node's GPU, as kube-scheduler gives it. The scaler's own template classes (snapshots, simulate)
    still serve no extended resource, as on a cluster without the gate."""
    classes = {o.name: o.body for o in drivers["aws"].of("DeviceClass")}
    assert classes[nvidia.DRIVER]["apiVersion"] == "resource.k8s.io/v1"
    live = {name: convert.device_class(body).extended_resource_name for name, body in classes.items()}
    assert live == {nvidia.GPU_CLASS.name: "nvidia.com/gpu", nvidia.MIG_CLASS.name: None, VFIO: None}
    assert {c.name: c.extended_resource_name for c in nvidia.DEVICE_CLASSES} == {nvidia.GPU_CLASS.name: None,
                                                                               nvidia.MIG_CLASS.name: None}


# The device taints the pinned GPU kubelet plugin sets on health events, copied from kubernetes-sigs/
# dra-driver-nvidia-gpu v0.4.1, cmd/gpu-kubelet-plugin/device_health.go (healthEventToTaint; DriverName
# "gpu.nvidia.com", cmd/gpu-kubelet-plugin/main.go): (key, value, effect).
PLUGIN_TAINTS = [
    ("gpu.nvidia.com/xid", "79", "NoSchedule"),  # a critical XID (79: fallen off the bus)
    ("gpu.nvidia.com/xid", "13", "None"),  # an XID of its skip list (an application's error): informational
    ("gpu.nvidia.com/gpu-lost", "", "NoSchedule"),  # NVML: GPU lost, or an event naming no GPU (every device)
    ("gpu.nvidia.com/unmonitored", "", "None"),  # the plugin could not watch the device
]


@pytest.mark.parametrize("cloud", sorted(POOLS))
def test_the_gpu_kubelet_plugin_runs_the_health_check_and_taints_what_the_scaler_repairs(
        drivers: dict[str, Rendered], cloud: str) -> None:
    """The renamed chart dra-driver-nvidia-gpu 0.4.1 (registry.k8s.io) runs with NVMLDeviceHealthCheck (the chart
    passes `featureGates` as FEATURE_GATES, which the plugin parses at startup): a GPU with a critical XID, or
    lost, is tainted NoSchedule in the node's ResourceSlice (25.12.0 withdrew it from the slice instead). Objects keep
    the old chart's names (nameOverride), so a cluster running 25.12.0 upgrades in place. The taints, as the
    plugin publishes them and the scaler reads the slice, are repair signals exactly when they block allocation."""
    driver = drivers[cloud]
    (ds,) = driver.of("DaemonSet")
    assert ds.name == f"{DRA_DRIVER_NAME}-kubelet-plugin"
    (gpus,) = ds.body["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in gpus["env"]}
    assert env["FEATURE_GATES"] == "NVMLDeviceHealthCheck=true,"
    assert gpus["image"] == "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"

    node = next(p for p in load_config(POOLS[cloud]).pools if p.dra).template_node()
    devices = [{"name": f"gpu-{i}", "taints": [{"key": k, "value": v, "effect": e}] if v else [{"key": k, "effect": e}]}
               for i, (k, v, e) in enumerate(PLUGIN_TAINTS)]
    published = convert.resource_slice({"metadata": {"name": f"{node.name}-gpu"}, "spec": {
        "driver": nvidia.DRIVER, "nodeName": node.name, "pool": {"name": node.name}, "devices": devices}})
    found = signals(node, RepairSpec(), device_taints(DraObjects(slices=[published])).get(node.name, []))
    assert [s.text for s in found] == ["device gpu-0 tainted gpu.nvidia.com/xid=79:NoSchedule",
                                       "device gpu-2 tainted gpu.nvidia.com/gpu-lost:NoSchedule"]


@pytest.mark.parametrize("cloud", sorted(POOLS))
def test_the_gpu_kubelet_plugin_may_reach_the_api_server_only(drivers: dict[str, Rendered], cloud: str) -> None:
    """Least privilege: the plugin (privileged, on every DRA node) talks to the API server and nothing else."""
    driver = drivers[cloud]
    (policy,) = driver.of("NetworkPolicy")
    pod = driver.one("DaemonSet").body["spec"]["template"]
    assert label_match(policy.body["spec"]["podSelector"], pod["metadata"]["labels"])
    assert policy.body["spec"]["policyTypes"] == ["Egress"]
    (rule,) = policy.body["spec"]["egress"]
    assert "to" not in rule and {(p["protocol"], p["port"]) for p in rule["ports"]} == {("TCP", 443), ("TCP", 6443)}
    assert not pod["spec"].get("hostNetwork")  # (a host-network pod would escape it)


# --- the repository's stacks, each given a DRA pool -----------------------------------------------
DRA_POOL = {"aws": {"name": "l4-dra-a", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 2,
                    "gpu_allocation": "dra"},
            "azure": {"name": "t4dra1", "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 2,
                      "gpu_allocation": "dra"}}
DEV_STACKS = [ROOT / "Pulumi.aws-dev.yaml", ROOT / "Pulumi.azure-dev.yaml"]


@pytest.mark.parametrize("path", DEV_STACKS, ids=[p.name for p in DEV_STACKS])
def test_a_stack_with_a_dra_pool_installs_the_driver_there_valid_for_its_version(path: Path, tmp_path: Path) -> None:
    """Through the stack's own path (stack file -> validated stack -> the platform it feeds), at the
    stacks' Kubernetes version (the default), the driver's objects schema-checked for that version."""
    import pulumi_kubernetes as k8s
    from charts_helpers import Validator
    from gpuburst_infra.offline import stack_file_config
    from gpuburst_infra.program import read_pulumi_config
    from gpuburst_infra.stack import load_stack
    from gpuburst_infra.stack_models import DEFAULT_KUBERNETES
    from gpuburst_platform import Platform, PlatformSettings

    import pulumi

    data = yaml.safe_load(path.read_text())
    cloud = data["config"]["gpuburst:cloud"]
    data["config"]["gpuburst:pools"].append(DRA_POOL[cloud])
    edited = tmp_path / path.name
    edited.write_text(yaml.safe_dump(data, sort_keys=False))
    config, secrets = stack_file_config(edited)
    pulumi.runtime.set_all_config(config, secrets)
    try:
        stack = load_stack(read_pulumi_config(), path.name)
    finally:
        pulumi.runtime.set_all_config({}, [])
    version = stack.settings.kubernetes_version
    assert version == DEFAULT_KUBERNETES

    def program() -> Any:
        return Platform("platform", provider=k8s.Provider("k8s", kubeconfig="{}"), config=stack.scaler,
                        cloud=stack.cloud, identity="id", kubernetes_version=version, settings=PlatformSettings(),
                        scaler_env=STACK_ENV[stack.cloud])

    (rel,) = [r for r in releases(run_program(program)) if r.inputs["name"] == DRA_DRIVER_NAME]
    inputs = json.loads(json.dumps(rel.inputs))
    driver = render(CHART, inputs["values"], DRA_DRIVER_NAME, inputs["namespace"])
    pod = _daemon_pod(driver.one("DaemonSet"))
    for pool in stack.scaler.pools:
        assert (static_reason(pod, pool.template_node()) is None) == (pool.name == DRA_POOL[cloud]["name"]), pool.name
    validator = Validator(driver.crds)
    objects = [*driver.objects, *(Obj("crds/", c) for c in driver.crds)]
    assert [m for o in objects if (m := validator.validate(o, version))] == []
