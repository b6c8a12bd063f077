"""The real entry point (`program.main`, what `pulumi up` runs) under mocks: the cloud stack and the platform
on the cluster, wired with the cloud identity and the outputs the scaler needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gpuburst_infra.offline import CloudMocks, RecordingMonitor, stack_file_config
from stack_helpers import ROOT, write_stack

import pulumi


def run_main(path: Path) -> tuple[CloudMocks, RecordingMonitor]:
    from gpuburst_infra.program import main

    config, secrets = stack_file_config(path)
    stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    mocks = CloudMocks(config.get("aws:region") or config.get("azure-native:location") or "")
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuburst", stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(config, secrets)
    pulumi.runtime.test(main)()
    return mocks, monitor


def _one(mocks: CloudMocks, typ: str, name: str) -> dict[str, Any]:
    (found,) = [r[2] for r in mocks.registered if r[0] == typ and r[1] == name]
    return found


def _scaler(mocks: CloudMocks) -> dict[str, dict[str, Any]]:
    """The scaler's objects by kind: our chart rendered with the values of the platform's scaler release."""
    import helm_python as helm
    import yaml

    release = _one(mocks, "kubernetes:helm.sh/v3:Release", "platform-scaler")
    assert Path(release["chart"]).resolve() == ROOT / "charts" / "gpuburst-scaler"
    with helm.Chart.load(str(ROOT / "charts" / "gpuburst-scaler")) as chart:
        out = chart.render(release["values"], name=release["name"], namespace=release["namespace"], is_install=True)
    docs = [d for name, text in out.items() if name.endswith(".yaml") for d in yaml.safe_load_all(text) if d]
    return {d["kind"]: d for d in docs}


def _env(objects: dict[str, dict[str, Any]]) -> dict[str, str]:
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_aws_main_deploys_the_scaler_with_its_irsa_role_and_queue() -> None:
    mocks, monitor = run_main(ROOT / "Pulumi.aws-dev.yaml")
    # Nothing goes into the cluster before its core add-ons (and through coredns the system nodes) are up.
    deps = monitor.dependencies[("pulumi:providers:kubernetes", "platform-k8s")]
    assert {d.rsplit("::", 1)[1] for d in deps} >= {"vpc-cni", "kube-proxy", "coredns"}
    scaler = _scaler(mocks)
    role = _one(mocks, "aws:iam/role:Role", "scaler")
    sa = scaler["ServiceAccount"]
    assert sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith(f":role/{role['name']}")
    assert _env(scaler)["GPUBURST_INTERRUPTION_QUEUE_URL"].endswith("/gpuburst-dev-interruptions")
    assert sum(1 for r in mocks.registered if r[0] == "aws:autoscaling/group:Group") == 5


def test_azure_main_deploys_the_scaler_with_its_workload_identity() -> None:
    mocks, monitor = run_main(ROOT / "Pulumi.azure-dev.yaml")
    deps = monitor.dependencies[("pulumi:providers:kubernetes", "platform-k8s")]
    assert any(d.endswith("azure-native:containerservice:ManagedCluster::cluster") for d in deps)
    scaler = _scaler(mocks)
    assert scaler["ServiceAccount"]["metadata"]["annotations"]["azure.workload.identity/client-id"]
    env = _env(scaler)
    assert env["GPUBURST_AZURE_RESOURCE_GROUP"] == "gpuburst-azdev-rg"
    assert env["GPUBURST_AKS_CLUSTER"] == "gpuburst-azdev"
    assert env["AZURE_SUBSCRIPTION_ID"]


def test_bad_platform_settings_fail_before_any_resource(tmp_path: Path) -> None:
    path = write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path,
                       lambda c: c.__setitem__("gpuburst:platform", {"metrics": "graphite"}))
    with pytest.raises(pulumi.RunError, match=r"Pulumi\.aws-dev\.yaml: gpuburst:platform\.metrics: "):
        run_main(path)
