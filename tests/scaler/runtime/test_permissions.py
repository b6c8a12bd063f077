"""The least-privilege documents the Pulumi program deploys."""

from __future__ import annotations

import json

from scaler import permissions
from scaler.core import keys


def test_aws_policy_scopes_every_mutating_action_to_the_clusters_tagged_groups() -> None:
    doc = permissions.aws_scaler_policy("prod-1", "arn:aws:sqs:us-east-1:123456789012:prod-1-interruptions")
    json.dumps(doc)  # serialisable as the cloud wants it
    for st in doc["Statement"]:
        mutating = [a for a in st["Action"] if not a.split(":")[1].startswith(("Describe", "Receive", "Delete"))]
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
    assert not any("delete" in r["verbs"] for r in permissions.KUBERNETES_RBAC_RULES)
