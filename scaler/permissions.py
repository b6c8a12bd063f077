"""Least privilege, as data: exactly what the scaler's code calls, importable by the Pulumi program.

- `aws_scaler_policy(cluster, queue_arn)`: the IAM policy for the scaler's IRSA role. Reads are on
  `*` (Describe* calls cannot be scoped by resource), Service Quotas reads only on the six EC2 vCPU
  quotas' ARNs; every mutating Auto Scaling call is allowed only
  on groups tagged for this cluster (`k8s.io/cluster-autoscaler/<cluster>=owned` and
  `k8s.io/cluster-autoscaler/enabled=true`); SQS receive/delete only on the interruption queue.
- `AWS_INTERRUPTION_EVENTS`, `aws_interruption_queue_policy(queue_arn, rule_arns)`: the EventBridge rules that
  feed the interruption queue, and the queue's policy (only those rules may send to it).
- `aws_irsa_trust_policy(oidc_provider_arn, issuer, subject)`: who may assume that role (the scaler's service
  account, through the cluster's OIDC provider), and nobody else.
- `AZURE_SCALER_ACTIONS`: every action the scaler may call; `azure_scaler_actions(kinds)` the subset
  pools of the given kinds need (the Pulumi stack's AKS agent pools need no Compute action), for the
  scaler's custom role, assigned on each of its agent pools.
- `azure_role_definition(role, ...)`: the scaler's two custom roles (`pools`, assigned on its agent pools;
  `quotas`, on the subscription) as `az role definition create --role-definition` reads them.
- `KUBERNETES_RBAC_RULES` (ClusterRole) and `KUBERNETES_ROLE_RULES` (Role in the scaler's namespace):
  exactly the verbs scaler.kube uses.

tests/scaler/runtime/test_permissions.py checks these lists against the calls the adapters make.
"""

from __future__ import annotations

from typing import Any, Final

from scaler.core.config.ec2_quota_classes import QUOTAS
from scaler.core.model import keys

# Names of the objects the scaler owns in its own namespace (the Role scopes get/update to them).
LEASE_NAME: Final = "gpuburst-scaler"
STATUS_CONFIGMAP: Final = "gpuburst-scaler-status"

AWS_READ_ACTIONS: Final = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeWarmPool",  # a group with a warm pool: its instances ready to start
    "ec2:DescribeInstances",  # launch times; the vCPUs that count against a quota
)
# The EC2 vCPU quotas (scaler/providers/aws_quotas.py): only those quotas, by their ARNs.
AWS_QUOTA_ACTIONS: Final = ("servicequotas:GetServiceQuota",)
AWS_QUOTA_RESOURCES: Final = tuple(f"arn:aws:servicequotas:*:*:ec2/{code}" for code, _ in QUOTAS.values())
AWS_MUTATING_ACTIONS: Final = (
    "autoscaling:SetDesiredCapacity",
    "autoscaling:TerminateInstanceInAutoScalingGroup",
)
AWS_QUEUE_ACTIONS: Final = ("sqs:ReceiveMessage", "sqs:DeleteMessage")


def aws_scaler_policy(cluster: str, interruption_queue_arn: str | None = None) -> dict[str, Any]:
    """The IAM policy document (as a dict; `json.dumps` it for the cloud)."""
    statements: list[dict[str, Any]] = [
        {"Sid": "Read", "Effect": "Allow", "Action": list(AWS_READ_ACTIONS), "Resource": "*"},
        {"Sid": "ReadVcpuQuotas", "Effect": "Allow", "Action": list(AWS_QUOTA_ACTIONS),
         "Resource": list(AWS_QUOTA_RESOURCES)},
        {
            "Sid": "ScaleOwnedGroups",
            "Effect": "Allow",
            "Action": list(AWS_MUTATING_ACTIONS),
            "Resource": "*",
            "Condition": {
                "StringEquals": {
                    f"aws:ResourceTag/{keys.tag_ca_cluster(cluster)}": "owned",
                    f"aws:ResourceTag/{keys.TAG_CA_ENABLED}": "true",
                }
            },
        },
    ]
    if interruption_queue_arn:
        statements.append({
            "Sid": "InterruptionQueue", "Effect": "Allow",
            "Action": list(AWS_QUEUE_ACTIONS), "Resource": interruption_queue_arn,
        })
    return {"Version": "2012-10-17", "Statement": statements}

# The EventBridge rules that feed the interruption queue (rule name suffix -> the EC2 event's detail-type);
# scaler/providers/aws_messages.py reads these events.
AWS_INTERRUPTION_EVENTS: Final = {
    "spot-interruption": "EC2 Spot Instance Interruption Warning",
    "rebalance": "EC2 Instance Rebalance Recommendation",
    "state-change": "EC2 Instance State-change Notification",
}


def aws_interruption_rule_name(cluster: str, event: str) -> str:
    return f"{cluster}-{event}"


def aws_interruption_queue_policy(queue_arn: str, rule_arns: list[str]) -> dict[str, Any]:
    """The queue's resource policy: only the cluster's EventBridge rules may send to it, over TLS only."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "EventBridge", "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
         "Action": "sqs:SendMessage", "Resource": queue_arn, "Condition": {"ArnEquals": {"aws:SourceArn": rule_arns}}},
        {"Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": queue_arn,
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    ]}


def aws_irsa_trust_policy(oidc_provider_arn: str, issuer_url: str, subject: str) -> dict[str, Any]:
    """The role's trust policy: only `subject` (system:serviceaccount:<namespace>:<name>), with STS's audience,
    through the cluster's OIDC provider."""
    host = issuer_url.removeprefix("https://")
    return {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Federated": oidc_provider_arn}, "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {f"{host}:sub": subject, f"{host}:aud": "sts.amazonaws.com"}},
    }]}


AZURE_AGENT_POOL_ACTIONS: Final = (
    # AKS agent pools: read count and machines, set count (PUT agentPools), remove one node (deleteMachines).
    "Microsoft.ContainerService/managedClusters/agentPools/read",
    "Microsoft.ContainerService/managedClusters/agentPools/machines/read",
    "Microsoft.ContainerService/managedClusters/agentPools/write",
    "Microsoft.ContainerService/managedClusters/agentPools/deleteMachines/action",
    # Polling the long-running operations above (Azure-AsyncOperation / Location URLs).
    "Microsoft.ContainerService/locations/operations/read",
)
AZURE_VMSS_ACTIONS: Final = (
    # Plain VM scale sets (pools with azure_kind vmss): read capacity and instances, set capacity,
    # delete one instance.
    "Microsoft.Compute/virtualMachineScaleSets/read",
    "Microsoft.Compute/virtualMachineScaleSets/write",
    "Microsoft.Compute/virtualMachineScaleSets/delete/action",
    "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read",
    "Microsoft.Compute/locations/operations/read",
)
# The region's compute usages (every family's quota and use, in one call): a subscription-level read, so
# granted by a role of its own assigned on the subscription (the others are scoped to resource groups).
AZURE_QUOTA_ACTIONS: Final = ("Microsoft.Compute/locations/usages/read",)
AZURE_SCALER_ACTIONS: Final = AZURE_AGENT_POOL_ACTIONS + AZURE_VMSS_ACTIONS + AZURE_QUOTA_ACTIONS


def azure_scaler_actions(kinds: set[str]) -> list[str]:
    """The actions a scaler of pools of these kinds (`agentpool`, `vmss`) calls, and no other."""
    return [*(AZURE_AGENT_POOL_ACTIONS if "agentpool" in kinds else ()),
            *(AZURE_VMSS_ACTIONS if "vmss" in kinds else ())]


AZURE_ROLES: Final = {  # role -> (name prefix, description)
    "pools": ("gpuburst scaler", "Read the cluster's agent pools, set their count, delete one machine."),
    "quotas": ("gpuburst scaler quotas", "Read the region's compute usages and quotas."),
}


def azure_role_name(role: str, resource_group: str, cluster: str) -> str:
    """Unique in the tenant: one pair of roles per cluster."""
    return f"{AZURE_ROLES[role][0]} ({resource_group}/{cluster})"


def azure_role_definition(role: str, resource_group: str, cluster: str, kinds: set[str],
                          scopes: list[str]) -> dict[str, Any]:
    """The custom role `role` (`pools` or `quotas`) in the form `az role definition create` reads."""
    actions = azure_scaler_actions(kinds) if role == "pools" else list(AZURE_QUOTA_ACTIONS)
    return {"Name": azure_role_name(role, resource_group, cluster), "IsCustom": True,
            "Description": AZURE_ROLES[role][1], "Actions": actions, "NotActions": [], "DataActions": [],
            "NotDataActions": [], "AssignableScopes": scopes}


# ClusterRole: cluster-wide reads of what a pass observes, cordon, eviction, Events.
KUBERNETES_RBAC_RULES: Final[list[dict[str, list[str]]]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    # delete: a Node whose instance is long gone, where no cloud controller manager deletes it
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch", "patch", "delete"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"]},
    # kube-scheduler's volume filters and namespaceSelector: read only.
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes", "namespaces"],
     "verbs": ["list", "watch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes"], "verbs": ["list", "watch"]},
    # kube-scheduler's DynamicResources filter (DRA): read only.
    {"apiGroups": ["resource.k8s.io"],
     "resources": ["deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices",
                   "devicetaintrules"],
     "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    # delete: only a gang's pods on an ending Capacity Block (its budget allows no eviction; EC2 takes it anyway)
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
    # list: an Event written before a restart is updated, not created again
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "list"]},
    # ProvisioningRequests (Kueue's admission check): read them and the PodTemplates they name, answer
    # through the status subresource only.
    {"apiGroups": [keys.API_GROUP_AUTOSCALING], "resources": ["provisioningrequests"], "verbs": ["list"]},
    {"apiGroups": [keys.API_GROUP_AUTOSCALING], "resources": ["provisioningrequests/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["podtemplates"], "verbs": ["get", "list", "watch"]},
    # CapacityBuffers (issue 27): watched, answered through the status subresource only; the workloads a
    # buffer's scalableRef names are read for their pod template and replicas.
    {"apiGroups": [keys.API_GROUP_AUTOSCALING], "resources": ["capacitybuffers"], "verbs": ["list", "watch"]},
    {"apiGroups": [keys.API_GROUP_AUTOSCALING], "resources": ["capacitybuffers/status"], "verbs": ["patch"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets"], "verbs": ["get"]},
    # Gangs' PodGroups (issue 39): the Workload API's, scheduler-plugins' coscheduling and Volcano's; read only.
    {"apiGroups": [keys.API_GROUP_SCHEDULING, keys.API_GROUP_COSCHEDULING, keys.API_GROUP_VOLCANO],
     "resources": ["podgroups"], "verbs": ["list", "watch"]},
]

# Role in the scaler's own namespace: its Lease and its status ConfigMap. `create` cannot be
# limited by name (the object does not exist yet); get/update can. The status ConfigMap is replaced
# (update), created when missing, never read.
KUBERNETES_ROLE_RULES: Final[list[dict[str, list[str]]]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE_NAME],
     "verbs": ["get", "update"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [STATUS_CONFIGMAP], "verbs": ["update"]},
]
