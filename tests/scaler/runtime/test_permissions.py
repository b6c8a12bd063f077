"""The least-privilege documents the Pulumi program deploys."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from scaler import permissions
from scaler.cli import main as cli_main
from scaler.core.model import keys
from scaler.kube import convert_podgroup as podgroups


def test_aws_policy_scopes_every_mutating_action_to_the_clusters_tagged_groups() -> None:
    doc = permissions.aws_scaler_policy("prod-1", "arn:aws:sqs:us-east-1:123456789012:prod-1-interruptions")
    json.dumps(doc)  # serialisable as the cloud wants it
    for st in doc["Statement"]:
        mutating = [a for a in st["Action"] if not a.split(":")[1].startswith(("Describe", "Receive", "Delete", "Get"))]
        if st["Resource"] == "*" and mutating:
            cond = st["Condition"]["StringEquals"]
            assert cond[f"aws:ResourceTag/{keys.tag_ca_cluster('prod-1')}"] == "owned"
            assert cond[f"aws:ResourceTag/{keys.TAG_CA_ENABLED}"] == "true"
    actions = {a for st in doc["Statement"] for a in st["Action"]}
    assert {"autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"} <= actions
    queue = [st for st in doc["Statement"] if "sqs:ReceiveMessage" in st["Action"]]
    assert queue[0]["Resource"].endswith(":prod-1-interruptions")
    assert not any(a.endswith("*") for a in actions)


def test_aws_policy_without_queue_grants_no_sqs() -> None:
    doc = permissions.aws_scaler_policy("c")
    assert not [a for st in doc["Statement"] for a in st["Action"] if a.startswith("sqs:")]


def test_rbac_has_no_wildcards_and_no_secrets() -> None:
    for rule in [*permissions.KUBERNETES_RBAC_RULES, *permissions.KUBERNETES_ROLE_RULES]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "secrets" not in rule["resources"]
    evict = [r for r in permissions.KUBERNETES_RBAC_RULES if "pods/eviction" in r["resources"]]
    assert evict[0]["verbs"] == ["create"]
    # The deletes: Node objects whose instance is gone (clusters without a cloud controller manager), and
    # the pods of a gang on an ending Capacity Block (nothing else: no patch or create of pods).
    assert [r["resources"] for r in permissions.KUBERNETES_RBAC_RULES if "delete" in r["verbs"]] == [["nodes"],
                                                                                                    ["pods"]]
    pods = [r for r in permissions.KUBERNETES_RBAC_RULES if r["resources"] == ["pods"]]
    assert sorted(v for r in pods for v in r["verbs"]) == ["delete", "list", "watch"]


ROOT = Path(__file__).resolve().parents[3]


def calls(path: str, receivers: str) -> set[str]:
    text = (ROOT / path).read_text()
    return set(re.findall(rf"self\.(?:{receivers})\.([a-z_]+)", text))


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def test_aws_policy_is_exactly_what_the_provider_calls() -> None:
    asg = {f"autoscaling:{camel(m)}" for m in calls("scaler/providers/aws.py", "asg")}
    sqs = {f"sqs:{camel(m)}" for m in calls("scaler/providers/aws.py", "sqs")}
    sqs |= {f"ec2:{camel(m)}" for m in calls("scaler/providers/aws.py", "ec2")}
    sqs |= {f"ec2:{camel(m)}" for m in calls("scaler/providers/aws_quotas.py", "ec2")}
    sqs |= {f"servicequotas:{camel(m)}" for m in calls("scaler/providers/aws_quotas.py", "quotas")}
    doc = permissions.aws_scaler_policy("c", "arn:aws:sqs:us-east-1:123456789012:q")
    granted = {a for st in doc["Statement"] for a in st["Action"]}
    assert asg | sqs == granted


# Client method -> (API group, resource, verb) it needs.
KUBE_METHODS = {
    "list_pod_for_all_namespaces": ("", "pods", "list"),
    "list_node": ("", "nodes", "list"),
    "list_pod_disruption_budget_for_all_namespaces": ("policy", "poddisruptionbudgets", "list"),
    "list_persistent_volume_claim_for_all_namespaces": ("", "persistentvolumeclaims", "list"),
    "list_persistent_volume": ("", "persistentvolumes", "list"),
    "list_namespace": ("", "namespaces", "list"),
    "list_storage_class": ("storage.k8s.io", "storageclasses", "list"),
    "list_csi_node": ("storage.k8s.io", "csinodes", "list"),
    "list_device_class": ("resource.k8s.io", "deviceclasses", "list"),
    "list_resource_claim_for_all_namespaces": ("resource.k8s.io", "resourceclaims", "list"),
    "list_resource_claim_template_for_all_namespaces": ("resource.k8s.io", "resourceclaimtemplates", "list"),
    "list_resource_slice": ("resource.k8s.io", "resourceslices", "list"),
    "list_device_taint_rule": ("resource.k8s.io", "devicetaintrules", "list"),
    "patch_node": ("", "nodes", "patch"),
    "delete_node": ("", "nodes", "delete"),
    "create_namespaced_pod_eviction": ("", "pods/eviction", "create"),
    "delete_namespaced_pod": ("", "pods", "delete"),
    "create_namespaced_event": ("", "events", "create"),
    "patch_namespaced_event": ("", "events", "patch"),
    "list_namespaced_event": ("", "events", "list"),
    "replace_namespaced_config_map": ("", "configmaps", "update"),
    "create_namespaced_config_map": ("", "configmaps", "create"),
    "read_namespaced_pod_template": ("", "podtemplates", "get"),
    "list_pod_template_for_all_namespaces": ("", "podtemplates", "list"),
    "read_namespaced_deployment": ("apps", "deployments", "get"),
    "read_namespaced_replica_set": ("apps", "replicasets", "get"),
    "read_namespaced_stateful_set": ("apps", "statefulsets", "get"),
}
# The custom objects API serves every CRD: what a call needs depends on the file that makes it.
CUSTOM_METHODS = {
    ("scaler/kube/provreq.py", "list_cluster_custom_object"): ("autoscaling.x-k8s.io", "provisioningrequests", "list"),
    ("scaler/kube/provreq.py", "patch_namespaced_custom_object_status"):
        ("autoscaling.x-k8s.io", "provisioningrequests/status", "patch"),
    ("scaler/kube/cache.py", "list_cluster_custom_object"): ("autoscaling.x-k8s.io", "capacitybuffers", "list"),
    ("scaler/kube/buffers.py", "patch_namespaced_custom_object_status"):
        ("autoscaling.x-k8s.io", "capacitybuffers/status", "patch"),
}
# The Lease is driven by the client's LeaseLock: read, create, replace.
LEASE = {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}


def granted_kube(rules: list[dict[str, list[str]]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_rbac_is_exactly_what_the_adapter_calls() -> None:
    cache = (ROOT / "scaler/kube/cache.py").read_text()
    informed = set(re.findall(r"\.(list_[a-z_]+)\b", cache))
    custom = {(f, m) for f in ("scaler/kube/provreq.py", "scaler/kube/cache.py", "scaler/kube/buffers.py")
              for m in re.findall(r"custom(?:_object)?\.([a-z_]+_custom_object[a-z_]*)\b", (ROOT / f).read_text())}
    custom |= {("scaler/kube/cache.py", m) for m in informed if "custom_object" in m}
    used = calls("scaler/kube/actions.py", "core") | {m for m in informed if "custom_object" not in m}
    used |= calls("scaler/kube/provreq.py", "core") - {"api_client"}  # read each pass, not watched
    used |= calls("scaler/kube/buffers.py", "apps") - {"api_client"}  # a buffer's scalableRef, read each pass
    assert used == set(KUBE_METHODS) and custom == set(CUSTOM_METHODS)
    needed = {KUBE_METHODS[m] for m in used} | {CUSTOM_METHODS[c] for c in custom}
    needed |= {(*KUBE_METHODS[m][:2], "watch") for m in informed if m in KUBE_METHODS}  # informers watch
    needed.add((*CUSTOM_METHODS[("scaler/kube/cache.py", "list_cluster_custom_object")][:2], "watch"))
    # cache.py's custom-object informers also watch the gangs' PodGroups of each API it reads them from
    needed |= {(group, podgroups.PLURAL, v) for group, _ in podgroups.SOURCES for v in ("list", "watch")}
    assert granted_kube(permissions.KUBERNETES_RBAC_RULES) | granted_kube(permissions.KUBERNETES_ROLE_RULES) \
        == needed | LEASE


AZURE_METHODS = {
    "agent_pools.get": "Microsoft.ContainerService/managedClusters/agentPools/read",
    "machines.list": "Microsoft.ContainerService/managedClusters/agentPools/machines/read",
    "agent_pools.begin_create_or_update": "Microsoft.ContainerService/managedClusters/agentPools/write",
    "agent_pools.begin_delete_machines": "Microsoft.ContainerService/managedClusters/agentPools/deleteMachines/action",
    "virtual_machine_scale_sets.get": "Microsoft.Compute/virtualMachineScaleSets/read",
    "virtual_machine_scale_sets.begin_update": "Microsoft.Compute/virtualMachineScaleSets/write",
    "virtual_machine_scale_sets.begin_delete_instances": "Microsoft.Compute/virtualMachineScaleSets/delete/action",
    "virtual_machine_scale_set_vms.list": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read",
    "usage.list": "Microsoft.Compute/locations/usages/read",
}


def test_azure_actions_are_exactly_what_the_provider_calls() -> None:
    text = (ROOT / "scaler/providers/azure.py").read_text() + (ROOT / "scaler/providers/azure_quotas.py").read_text()
    used = set(re.findall(r"self\.(?:aks|compute)\.([a-z_]+\.[a-z_]+)", text))
    assert used == set(AZURE_METHODS)
    polling = {a for a in permissions.AZURE_SCALER_ACTIONS if a.endswith("/locations/operations/read")}
    assert set(permissions.AZURE_SCALER_ACTIONS) == set(AZURE_METHODS.values()) | polling


def _printed(capsys: Any, *argv: str) -> tuple[int, Any]:
    code = cli_main(["permissions", *argv])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err)


def test_permissions_command_prints_the_policy_the_program_deploys(capsys: Any) -> None:
    queue = "arn:aws:sqs:eu-west-1:123456789012:ml-eks-interruptions"
    code, doc = _printed(capsys, "--cloud", "aws", "--cluster", "ml-eks", "--queue-arn", queue)
    assert code == 0
    scale = next(st for st in doc["Statement"] if "autoscaling:SetDesiredCapacity" in st["Action"])
    assert scale["Condition"]["StringEquals"][f"aws:ResourceTag/{keys.tag_ca_cluster('ml-eks')}"] == "owned"
    assert next(st for st in doc["Statement"] if "sqs:ReceiveMessage" in st["Action"])["Resource"] == queue
    provider = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/ABC"
    code, trust = _printed(capsys, "--cloud", "aws", "--cluster", "ml-eks", "--trust-oidc-provider", provider)
    (st,) = trust["Statement"]
    assert st["Principal"] == {"Federated": provider}
    assert st["Condition"]["StringEquals"]["oidc.eks.eu-west-1.amazonaws.com/id/ABC:sub"] == \
        "system:serviceaccount:gpuburst-system:gpuburst-scaler"
    code, policy = _printed(capsys, "--cloud", "aws", "--cluster", "ml-eks", "--queue-arn", queue, "--queue-policy")
    send = policy["Statement"][0]
    assert send["Resource"] == queue and send["Principal"] == {"Service": "events.amazonaws.com"}
    assert "arn:aws:events:eu-west-1:123456789012:rule/ml-eks-spot-interruption" in \
        send["Condition"]["ArnEquals"]["aws:SourceArn"]


def test_permissions_command_prints_azure_roles_az_can_create(capsys: Any) -> None:
    base = ("--cloud", "azure", "--cluster", "ml-aks", "--azure-subscription-id", "s1", "--azure-resource-group", "rg")
    code, pools = _printed(capsys, *base)
    assert code == 0
    assert pools["Name"] == "gpuburst scaler (rg/ml-aks)" and pools["IsCustom"] is True
    assert "Microsoft.ContainerService/managedClusters/agentPools/write" in pools["Actions"]
    assert not [a for a in pools["Actions"] if a.startswith("Microsoft.Compute/")]
    assert pools["AssignableScopes"] == ["/subscriptions/s1/resourceGroups/rg"]
    code, quotas = _printed(capsys, *base, "--role", "quotas")
    assert quotas["Actions"] == ["Microsoft.Compute/locations/usages/read"]
    assert quotas["AssignableScopes"] == ["/subscriptions/s1"]
    code, err = _printed(capsys, *base, "--kinds", "vmss")
    assert code == 2 and err.count("\n") == 1 and "--node-resource-group" in err
    code, err = _printed(capsys, "--cloud", "aws", "--cluster", "c", "--trust-oidc-provider", "oidc.eks.x")
    assert code == 2 and "--trust-oidc-provider" in err
