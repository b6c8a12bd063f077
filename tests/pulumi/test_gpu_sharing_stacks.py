"""Shared GPU pools in the stacks: MIG cut at boot on EKS, gpuInstanceProfile on AKS, refusals named."""

from __future__ import annotations

import base64
import email
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpuburst_infra.offline import render
from gpuburst_infra.stack import StackConfigError
from stack_helpers import ROOT, asg_tags, kubelet_flags, parse_labels, parse_taints, write_stack

from scaler.core.model import keys

GROUP = "aws:autoscaling/group:Group"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AGENT_POOL = "azure-native:containerservice:AgentPool"


def _aws_shared(config: dict[str, Any]) -> None:
    config["gpuburst:pools"] += [
        {"name": "h100-mig", "instance_types": ["p5.48xlarge"], "zones": ["us-east-1a"], "max": 2,
         "gpu_sharing": {"mig": {"strategy": "mixed", "layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}}},
        {"name": "l4-shared", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 4,
         "gpu_sharing": {"time_slicing": {"replicas": 4}}},
    ]


def _shell_parts(user_data_b64: str) -> list[str]:
    message = email.message_from_string(base64.b64decode(user_data_b64).decode())
    return [str(p.get_payload()) for p in message.walk() if p.get_content_type() == "text/x-shellscript"]


def test_eks_mig_pool_cuts_its_gpus_at_boot_and_registers_as_the_template_says(tmp_path: Path) -> None:
    r = render(write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path, _aws_shared))
    mig = r.one(TEMPLATE, "h100-mig").inputs["userData"]
    (script,) = _shell_parts(mig)
    body = script.split("<<'MIGCONFIG'\n", 1)[1].split("\nMIGCONFIG", 1)[0]
    assert yaml.safe_load(body) == {"version": "v1", "mig-configs": {"gpuburst-h100-mig": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]}}
    assert "nvidia-mig-parted apply -f /etc/gpuburst/mig-parted.yaml -c gpuburst-h100-mig" in script
    assert "nvidia-smi mig -cgi 3g.40gb,2g.20gb,1g.10gb,1g.10gb -C" in script
    labels = parse_labels(kubelet_flags(mig)["node-labels"])
    assert labels[keys.LABEL_DEVICE_PLUGIN_CONFIG] == "h100-mig"
    assert labels[keys.LABEL_MIG_STRATEGY] == "mixed"
    tags = asg_tags(r.one(GROUP, "h100-mig").inputs)
    assert tags[keys.TAG_CA_TEMPLATE_RESOURCES + keys.MIG_RESOURCE_PREFIX + "1g.10gb"] == "16"
    assert keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU not in tags

    shared = r.one(TEMPLATE, "l4-shared").inputs["userData"]
    assert _shell_parts(shared) == []  # time-slicing is the device plugin's work, not the node's
    flags = kubelet_flags(shared)
    assert parse_labels(flags["node-labels"])[keys.LABEL_GPU_REPLICAS] == "4"
    assert (keys.TAINT_GPU_SHARING, "time-slicing", "NoSchedule") in parse_taints(flags["register-with-taints"])
    assert asg_tags(r.one(GROUP, "l4-shared").inputs)[keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU] == "4"
    # Whole-GPU pools boot as before: no script part.
    assert _shell_parts(r.one(TEMPLATE, "gpu1-spot-a").inputs["userData"]) == []


def test_eks_mig_pool_cut_on_some_gpus_leaves_the_others_whole(tmp_path: Path) -> None:
    def edit(config: dict[str, Any]) -> None:
        config["gpuburst:pools"].append(
            {"name": "a100-part", "instance_types": ["p4d.24xlarge"], "zones": ["us-east-1a"], "max": 2,
             "gpu_sharing": {"mig": {"strategy": "mixed", "layout": "all-balanced", "gpus": 2}}})
    r = render(write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path, edit))
    (script,) = _shell_parts(r.one(TEMPLATE, "a100-part").inputs["userData"])
    body = script.split("<<'MIGCONFIG'\n", 1)[1].split("\nMIGCONFIG", 1)[0]
    assert yaml.safe_load(body)["mig-configs"]["gpuburst-a100-part"][1] == {"devices": [2, 3, 4, 5, 6, 7],
                                                                             "mig-enabled": False}
    assert "nvidia-smi -i 0,1 -mig 1" in script
    assert "nvidia-smi mig -i 0,1 -cgi 3g.20gb,2g.10gb,1g.5gb,1g.5gb -C" in script
    tags = asg_tags(r.one(GROUP, "a100-part").inputs)
    assert tags[keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU] == "6"
    assert tags[keys.TAG_CA_TEMPLATE_RESOURCES + keys.MIG_RESOURCE_PREFIX + "1g.5gb"] == "4"


def _azure_mig(strategy: str) -> Any:
    def edit(config: dict[str, Any]) -> None:
        mig = {"strategy": strategy, "profile": "1g.10gb"} if strategy == "single" else \
            {"strategy": "mixed", "layout": "all-balanced"}
        config["gpuburst:pools"].append({"name": "a100-mig", "vm_size": "Standard_NC24ads_A100_v4", "zones": ["1"],
                                         "max": 2, "gpu_sharing": {"mig": mig}})
    return edit


def test_aks_mig_pool_uses_the_agent_pools_gpu_instance_profile(tmp_path: Path) -> None:
    r = render(write_stack(ROOT / "Pulumi.azure-dev.yaml", tmp_path, _azure_mig("single")))
    pool = r.one(AGENT_POOL, "a100-mig").inputs
    assert pool["gpuInstanceProfile"] == "MIG1g"
    assert pool["nodeLabels"][keys.LABEL_GPU_PRODUCT] == "NVIDIA-A100-80GB-PCIe-MIG-1g.10gb"


def test_aks_refuses_a_mixed_mig_layout_naming_the_pool_and_field(tmp_path: Path) -> None:
    with pytest.raises(StackConfigError) as err:
        render(write_stack(ROOT / "Pulumi.azure-dev.yaml", tmp_path, _azure_mig("mixed")))
    assert "gpuburst:pools[a100-mig].gpu_sharing.mig.strategy" in str(err.value)
    assert "one profile per GPU" in str(err.value)
