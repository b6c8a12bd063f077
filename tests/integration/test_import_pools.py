"""`python -m scaler import-pools` against moto's server (groups made the way the kubernetes-ec2-autoscaler,
eksctl and kops recipes make them) and against the ARM fake (AKS agent pools, a tagged scale set)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
import yaml

from scaler.cli import main
from scaler.configfile import load_config
from scaler.core.model import keys
from scaler.providers.aws import AwsProvider
from tests.fakes.arm import FakeArm, FakeCredential
from tests.fakes.aws import MotoAws

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
AMI = "ami-12c6146b"


def seed_groups(aws: MotoAws, cluster: str) -> None:
    """The kubernetes-ec2-autoscaler's recipe: launch configurations (a SpotPrice for spot), groups tagged
    KubernetesCluster + Role / KubernetesRole, node selectors as kube/<label> tags; a master group beside."""
    aws.ec2.describe_images(ImageIds=[AMI])

    def lc(name: str, itype: str, spot: str | None = None) -> None:
        aws.asg.create_launch_configuration(LaunchConfigurationName=name, ImageId=AMI, InstanceType=itype,
                                            **({"SpotPrice": spot} if spot else {}))

    def asg(name: str, config: str, low: int, high: int, zones: list[str], tags: dict[str, str]) -> None:
        aws.asg.create_auto_scaling_group(
            AutoScalingGroupName=name, LaunchConfigurationName=config, MinSize=low, MaxSize=high,
            DesiredCapacity=low, AvailabilityZones=zones,
            Tags=[{"Key": k, "Value": v, "PropagateAtLaunch": True, "ResourceId": name,
                   "ResourceType": "auto-scaling-group"} for k, v in tags.items()])

    lc("k8s-p3-od", "p3.16xlarge")
    lc("k8s-p3-spot", "p3.16xlarge", spot="10.0")
    lc("k8s-cpu", "m5.4xlarge")
    lc("k8s-master", "m5.large")
    seed = {keys.TAG_KUBERNETES_CLUSTER: cluster}
    asg(f"{cluster}-p3-od", "k8s-p3-od", 0, 8, ["us-east-1a", "us-east-1b"],
        {**seed, "Role": "worker", "kube/openai.com/gpu": "v100"})
    asg(f"{cluster}-p3-spot", "k8s-p3-spot", 0, 32, ["us-east-1a"],
        {**seed, "KubernetesRole": "kubernetes-minion", "kube/openai.com/gpu": "v100", "owner": "rl-team"})
    asg(f"{cluster}-cpu", "k8s-cpu", 1, 20, ["us-east-1a", "us-east-1b"], {**seed, "Role": "worker"})
    asg(f"{cluster}-master", "k8s-master", 1, 1, ["us-east-1a"], {**seed, "Role": "master"})
    asg("someone-else", "k8s-cpu", 0, 5, ["us-east-1a"], {keys.TAG_KUBERNETES_CLUSTER: "other", "Role": "worker"})


def cli_env(aws: MotoAws) -> dict[str, str]:
    return {**os.environ, "AWS_ENDPOINT_URL": aws.endpoint, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": str(ROOT)}


def run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scaler", *argv], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120, check=False)


def test_seed_autoscaler_groups_import_into_a_pools_file_simulate_accepts(aws: MotoAws, tmp_path: Path) -> None:
    seed_groups(aws, "ml")
    env = cli_env(aws)
    done = run("import-pools", "--cloud", "aws", "--cluster", "ml", "--apply", env=env)
    assert done.returncode == 0, done.stderr
    pools_file = tmp_path / "pools.yaml"
    pools_file.write_text(done.stdout, encoding="utf-8")
    data = yaml.safe_load(done.stdout)
    pools = {p["name"]: p for p in data["pools"]}
    assert sorted(pools) == ["ml-cpu", "ml-p3-od", "ml-p3-spot"]
    assert pools["ml-p3-spot"]["capacity_type"] == "spot" and pools["ml-p3-spot"]["fallback"] == "ml-p3-od"
    assert pools["ml-p3-spot"]["labels"] == {"openai.com/gpu": "v100"} and pools["ml-p3-spot"]["max"] == 32
    assert "#   ml-master: group: Role=master" in done.stdout and "#   ml-p3-spot: tag owner:" in done.stdout

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,num_workers\n1,0,8,600,1\n2,30,16,1200,2\n3,60,0,300,1\n",
                     encoding="utf-8")
    report = tmp_path / "report.json"
    sim = run("simulate", "--trace", str(trace), "--pools", str(pools_file), "--quiet", "--strict",
              "--report", str(report), env=env)
    assert sim.returncode == 0, sim.stderr
    summary = json.loads(report.read_text(encoding="utf-8"))
    assert (summary["jobs_total"], summary["jobs_completed"]) == (3, 3)  # every job ran on the imported pools

    # The groups now carry the tags the scaler finds its groups by: run adopts them from the file alone.
    config = load_config(pools_file)
    observed = AwsProvider(config, session=aws.session, endpoint_url=aws.endpoint).observe(0)
    assert {name: (o.pool.max_size, o.instances) for name, o in observed.items()} == \
        {"ml-cpu": (20, 1), "ml-p3-od": (8, 0), "ml-p3-spot": (32, 0)}


def test_dry_run_prints_the_tags_and_tags_nothing(aws: MotoAws, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    seed_groups(aws, "ml")
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.endpoint)
    out = tmp_path / "pools.yaml"
    assert main(["import-pools", "--cloud", "aws", "--cluster", "ml", "--dry-run", "--output", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    tags_block = text.split("# Tags to add")[1]
    assert f"{keys.tag_ca_cluster('ml')}: owned" in tags_block and "ml-p3-spot:" in tags_block
    assert f"{keys.TAG_CA_TEMPLATE_LABEL}openai.com/gpu: v100" in tags_block
    tags = {t["Key"] for t in aws.asg.describe_auto_scaling_groups(AutoScalingGroupNames=["ml-p3-spot"])
            ["AutoScalingGroups"][0]["Tags"]}
    assert keys.TAG_CA_ENABLED not in tags  # nothing written
    load_config(out)


def test_eksctl_mixed_instances_and_kops_groups(aws: MotoAws, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    aws.ec2.describe_images(ImageIds=[AMI])
    aws.ec2.create_launch_template(LaunchTemplateName="eksctl-ml-a10g",
                                   LaunchTemplateData={"ImageId": AMI, "InstanceType": "g5.xlarge"})

    def tags(name: str, values: dict[str, str]) -> list[dict[str, Any]]:
        return [{"Key": k, "Value": v, "PropagateAtLaunch": False, "ResourceId": name,
                 "ResourceType": "auto-scaling-group"} for k, v in values.items()]

    eks = {keys.TAG_EKSCTL_CLUSTER: "ml", keys.TAG_CA_ENABLED: "true", keys.tag_ca_cluster("ml"): "owned"}
    spot_name = "eksctl-ml-nodegroup-a10g-spot-NodeGroup-ABC"
    aws.asg.create_auto_scaling_group(
        AutoScalingGroupName=spot_name, MinSize=0, MaxSize=10, AvailabilityZones=["us-east-1a"],
        MixedInstancesPolicy={
            "LaunchTemplate": {"LaunchTemplateSpecification": {"LaunchTemplateName": "eksctl-ml-a10g",
                                                               "Version": "$Latest"},
                               "Overrides": [{"InstanceType": "g5.xlarge"}, {"InstanceType": "g5.2xlarge"}]},
            "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0,
                                      "SpotAllocationStrategy": "price-capacity-optimized"}},
        Tags=tags(spot_name, {**eks, keys.TAG_EKSCTL_NODEGROUP: "a10g-spot"}))
    od_name = "eksctl-ml-nodegroup-a10g-od-NodeGroup-DEF"
    aws.asg.create_auto_scaling_group(
        AutoScalingGroupName=od_name, MinSize=0, MaxSize=4, AvailabilityZones=["us-east-1a"],
        LaunchTemplate={"LaunchTemplateName": "eksctl-ml-a10g", "Version": "$Latest"},
        Tags=tags(od_name, {**eks, keys.TAG_EKSCTL_NODEGROUP: "a10g-od"}))
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.endpoint)
    assert main(["import-pools", "--cloud", "aws", "--cluster", "ml", "--dry-run"]) == 0
    pools = {p["name"]: p for p in yaml.safe_load(capsys.readouterr().out)["pools"]}
    assert pools["a10g-spot"]["instance_types"] == ["g5.xlarge", "g5.2xlarge"]
    assert (pools["a10g-spot"]["capacity_type"], pools["a10g-spot"]["fallback"]) == ("spot", "a10g-od")
    assert pools["a10g-od"]["capacity_type"] == "on-demand"


def test_no_group_of_the_cluster_is_one_line(aws: MotoAws, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    seed_groups(aws, "ml")
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.endpoint)
    assert main(["import-pools", "--cloud", "aws", "--cluster", "nope"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no node group of cluster 'nope'" in err[0]


SUB, RG, CLUSTER = "00000000-0000-0000-0000-000000000001", "burst-rg", "burst"


@pytest.fixture
def arm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArm]:
    from scaler.providers import azure_groups

    monkeypatch.setattr(azure_groups, "default_credential", FakeCredential)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield FakeArm(rsps, SUB, RG, CLUSTER)


def test_aks_agent_pools_and_a_tagged_scale_set(arm: FakeArm, capsys: pytest.CaptureFixture[str]) -> None:
    arm.add_agent_pool("system", 2, "Standard_D4s_v5", mode="System", enableAutoScaling=True, minCount=1,
                       maxCount=3)
    arm.add_agent_pool("gpuspot", 0, "Standard_NC4as_T4_v3", spot=True, enableAutoScaling=True, minCount=0,
                       maxCount=8, nodeLabels={"workload": "train"}, nodeTaints=["sku=gpu:NoSchedule"])
    arm.add_agent_pool("gpuod", 1, "Standard_NC4as_T4_v3")  # AKS autoscaling off: bounds are a guess, reported
    arm.add_scale_set("gpu-vmss", 0, "Standard_NC4as_T4_v3", spot=True, tags={
        keys.TAG_CA_AZURE_ENABLED: "true", keys.TAG_CA_AZURE_NAME: CLUSTER, keys.TAG_CA_AZURE_MIN: "0",
        keys.TAG_CA_AZURE_MAX: "6"})
    arm.add_scale_set("aks-system-123-vmss", 2, "Standard_D4s_v5", tags={"aks-managed-poolName": "system"})
    argv = ["import-pools", "--cloud", "azure", "--cluster", CLUSTER, "--region", "eastus",
            "--azure-subscription-id", SUB, "--azure-resource-group", RG, "--apply"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    pools = {p["name"]: p for p in yaml.safe_load(out)["pools"]}
    assert sorted(pools) == ["gpu-vmss", "gpuod", "gpuspot", "system"]
    assert pools["gpuspot"]["labels"] == {"workload": "train"} and pools["gpuspot"]["max"] == 8
    assert (pools["gpu-vmss"]["azure_kind"], pools["gpu-vmss"]["max"]) == ("vmss", 6)
    assert pools["system"]["role"] == "system" and pools["gpuod"]["max"] == 1
    assert "#   gpuod: min/max: AKS autoscaling is off" in out
    # Tags merged onto the agent pool and the scale set, in Azure's form.
    pool_tags = arm.agent_pools["gpuspot"]["properties"]["tags"]
    assert pool_tags[keys.azure_tag_key(keys.tag_ca_cluster(CLUSTER))] == "owned"
    vmss_tags = arm.scale_sets["gpu-vmss"]["tags"]
    assert vmss_tags[keys.TAG_CA_AZURE_MAX] == "6" and vmss_tags[keys.azure_tag_key(keys.TAG_CA_ENABLED)] == "true"


def test_azure_without_its_subscription_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)
    monkeypatch.delenv("GPUBURST_AZURE_RESOURCE_GROUP", raising=False)
    assert main(["import-pools", "--cloud", "azure", "--cluster", CLUSTER]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--azure-subscription-id" in err[0]
