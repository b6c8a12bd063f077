"""Every label, taint, annotation and tag key gpuburst reads or writes, spelled once.

Nothing else in the repository (scaler, Pulumi program, Ansible roles' rendered values) may
spell these strings; import them from here.
"""

from __future__ import annotations

from typing import Final

# --- well-known Kubernetes node labels -------------------------------------------------------
LABEL_ARCH: Final = "kubernetes.io/arch"
LABEL_OS: Final = "kubernetes.io/os"
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
LABEL_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_REGION: Final = "topology.kubernetes.io/region"

# --- gpuburst's own labels -------------------------------------------------------------------
DOMAIN: Final = "gpuburst.io"
LABEL_POOL: Final = f"{DOMAIN}/pool"
LABEL_CAPACITY_TYPE: Final = f"{DOMAIN}/capacity-type"
LABEL_ROLE: Final = f"{DOMAIN}/role"
# How a GPU pool's GPUs are allocated: "dra" (the NVIDIA DRA driver publishes ResourceSlices); absent:
# the device plugin's nvidia.com/gpu. The platform installs the DRA driver where it says dra.
LABEL_GPU_ALLOCATION: Final = f"{DOMAIN}/gpu-allocation"
GPU_ALLOCATION_DRA: Final = "dra"
# a DRA pool whose GPUs claims share by memory: the step (GiB) of its shares (gpu_sharing: {memory: ...})
LABEL_GPU_MEMORY_STEP: Final = f"{DOMAIN}/gpu-memory-step-gib"
# A DRA pool whose GPUs the NVIDIA DRA driver cuts per claim (DynamicMIG): whole or any mix of slices.
LABEL_MIG_DYNAMIC: Final = f"{DOMAIN}/mig-dynamic"

# --- GPU labels --------------------------------------------------------------------------------
LABEL_GPU_PRESENT: Final = "nvidia.com/gpu.present"
LABEL_GPU_PRODUCT: Final = "nvidia.com/gpu.product"
LABEL_GPU_COUNT: Final = "nvidia.com/gpu.count"
# Shared GPUs: the device plugin's per-node config selector, GPU feature discovery's sharing labels
# and NVIDIA mig-manager's layout selector (scaler/core/config/sharing.py derives them from the pool).
LABEL_DEVICE_PLUGIN_CONFIG: Final = "nvidia.com/device-plugin.config"
LABEL_GPU_SHARING_STRATEGY: Final = "nvidia.com/gpu.sharing-strategy"
LABEL_GPU_REPLICAS: Final = "nvidia.com/gpu.replicas"
LABEL_MIG_STRATEGY: Final = "nvidia.com/mig.strategy"
LABEL_MIG_CONFIG: Final = "nvidia.com/mig.config"
# The label cluster-autoscaler treats as "this node has a GPU" per cloud.
LABEL_ACCELERATOR_AWS: Final = "k8s.amazonaws.com/accelerator"
LABEL_ACCELERATOR_AZURE: Final = "kubernetes.azure.com/accelerator"

# Capacity-type labels set by the clouds themselves (read when discovering foreign pools).
LABEL_EKS_CAPACITY_TYPE: Final = "eks.amazonaws.com/capacityType"
LABEL_KARPENTER_CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
LABEL_AZURE_SCALESET_PRIORITY: Final = "kubernetes.azure.com/scalesetpriority"

# --- resources -----------------------------------------------------------------------------
RES_CPU: Final = "cpu"
RES_MEMORY: Final = "memory"
RES_EPHEMERAL: Final = "ephemeral-storage"
RES_PODS: Final = "pods"
RES_GPU: Final = "nvidia.com/gpu"
# Not a Kubernetes resource: the planner's count of a node's free DRA devices (never on a real node)
RES_DRA_DEVICES: Final = "dra.gpuburst.io/devices"
# ... and of those, the ones without a NoSchedule/NoExecute device taint (what a claim tolerating none may take)
RES_DRA_UNTAINTED: Final = "dra.gpuburst.io/untainted-devices"
MIG_RESOURCE_PREFIX: Final = "nvidia.com/mig-"

# --- taints ----------------------------------------------------------------------------------
TAINT_GPU: Final = "nvidia.com/gpu"
TAINT_GPU_VALUE: Final = "present"
# The NVIDIA DRA driver's device taints on health events (an XID error, a GPU fallen off the bus).
DEVICE_TAINT_GPU_XID: Final = "gpu.nvidia.com/xid"
DEVICE_TAINT_GPU_LOST: Final = "gpu.nvidia.com/gpu-lost"
# Multi-GPU pools: only pods that ask for at least the pool's minimum GPUs tolerate it.
TAINT_MIN_GPUS: Final = f"{DOMAIN}/min-gpus"
# Pools whose nvidia.com/gpu is a share (time-slicing, MIG single): only pods that opt in land there.
TAINT_GPU_SHARING: Final = f"{DOMAIN}/gpu-sharing"
# Values of that taint, and of GPU feature discovery's sharing-strategy label for time-slicing.
SHARING_TIME_SLICING: Final = "time-slicing"
SHARING_MEMORY: Final = "memory"  # a DRA pool's GPUs shared by their memory (consumable capacity)
SHARING_MIG_SINGLE: Final = "mig-single"
TAINT_AZURE_SPOT: Final = LABEL_AZURE_SCALESET_PRIORITY
TAINT_AZURE_SPOT_VALUE: Final = "spot"
# Put on a node the scaler is draining, with spec.unschedulable.
TAINT_DISRUPTING: Final = f"{DOMAIN}/disrupting"
TAINT_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"
# Taints a booting node carries until the kubelet / cloud controller is done (Kubernetes owns them): not a
# reason to think the node will never take a pod.
TAINT_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_UNINITIALIZED: Final = "node.cloudprovider.kubernetes.io/uninitialized"
STARTUP_TAINTS: Final = frozenset({TAINT_NOT_READY, TAINT_UNINITIALIZED})

# --- pod annotations and labels the scaler honours ------------------------------------------
ANNOTATION_SAFE_TO_EVICT: Final = "cluster-autoscaler.kubernetes.io/safe-to-evict"
ANNOTATION_KARPENTER_DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
ANNOTATION_OPENAI_DO_NOT_DRAIN: Final = "openai/do-not-drain"
ANNOTATION_MIRROR_POD: Final = "kubernetes.io/config.mirror"
LABEL_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
ANNOTATION_POD_GROUP_MIN: Final = "scheduling.x-k8s.io/min-member"
# Seconds of run between a pod's checkpoints, as its workload declares them: a GPU repair drains a node when its
# pods have just checkpointed (scaler.core.planning.repair). Without it, all a pod ran is taken as at stake.
ANNOTATION_CHECKPOINT_INTERVAL: Final = f"{DOMAIN}/checkpoint-interval"

# --- gangs' own objects (scaler.core.model.podgroup) ---------------------------------------------------
# The Workload API's PodGroups (KEP-4671; pods name theirs by spec.schedulingGroup.podGroupName).
API_GROUP_SCHEDULING: Final = "scheduling.k8s.io"
# scheduler-plugins' coscheduling PodGroup CRD (spec.minMember; pods carry LABEL_POD_GROUP).
API_GROUP_COSCHEDULING: Final = "scheduling.x-k8s.io"
# Volcano's PodGroup (spec.minMember; pods carry the annotation below).
API_GROUP_VOLCANO: Final = "scheduling.volcano.sh"
ANNOTATION_VOLCANO_GROUP: Final = "scheduling.k8s.io/group-name"

# --- ProvisioningRequests (autoscaling.x-k8s.io/v1, Kueue's ProvisioningRequest admission check) ---
# The API group of ProvisioningRequests and CapacityBuffers (kubernetes/autoscaler's CRDs).
API_GROUP_AUTOSCALING: Final = "autoscaling.x-k8s.io"
# The pods of an admitted workload name the request whose capacity they use (Kueue writes both forms).
ANNOTATION_CONSUME_PROVREQ: Final = "autoscaling.x-k8s.io/consume-provisioning-request"
ANNOTATION_CONSUME_PROVREQ_CA: Final = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
# The gang label the scaler gives a request's stand-in pods, so the planner places them all or none.
PROVREQ_GANG_PREFIX: Final = "provreq-"

# --- CapacityBuffers (autoscaling.x-k8s.io/v1beta1, cluster-autoscaler's buffer API) ----------------------
# The placeholder pods a buffer stands for are never created; in the planner they carry upstream's fake-pod
# annotation (podType: capacityBufferFakePod) and the buffer they belong to.
ANNOTATION_BUFFER_POD_TYPE: Final = "podType"
BUFFER_POD_TYPE: Final = "capacityBufferFakePod"
ANNOTATION_BUFFER: Final = f"{DOMAIN}/capacity-buffer"
BUFFER_STRATEGY_ACTIVE: Final = "buffer.x-k8s.io/active-capacity"

# --- cluster-autoscaler tag conventions (AWS form; Azure uses "_" for "/") -------------------
TAG_CA_PREFIX: Final = "k8s.io/cluster-autoscaler/"
TAG_CA_ENABLED: Final = f"{TAG_CA_PREFIX}enabled"
TAG_CA_TEMPLATE_LABEL: Final = f"{TAG_CA_PREFIX}node-template/label/"
TAG_CA_TEMPLATE_TAINT: Final = f"{TAG_CA_PREFIX}node-template/taint/"
TAG_CA_TEMPLATE_RESOURCES: Final = f"{TAG_CA_PREFIX}node-template/resources/"
TAG_POOL: Final = f"{DOMAIN}/pool"
TAG_ROLE: Final = f"{DOMAIN}/role"
TAG_FALLBACK: Final = f"{DOMAIN}/fallback"
TAG_CLUSTER: Final = f"{DOMAIN}/cluster"
# A prepaid pool's reservation, one tag per field: <prefix><field, '-' for '_'> (scaler/core/config/reservation.py).
TAG_RESERVATION_PREFIX: Final = f"{DOMAIN}/reservation-"


# --- other tools' group tags, read when adopting an existing cluster (scaler/core/config/adopt.py) -----
# OpenAI's kubernetes-ec2-autoscaler (and kops before 1.x): the cluster, the group's role, and
# `kube/<label>` tags that name the labels its nodes carry (the autoscaler's node selectors).
TAG_KUBERNETES_CLUSTER: Final = "KubernetesCluster"
TAG_SEED_ROLES: Final = ("KubernetesRole", "Role")
SEED_WORKER_ROLES: Final = ("worker", "kubernetes-minion")
TAG_SEED_SELECTOR_PREFIX: Final = "kube/"
# eksctl's self-managed and EKS managed node groups.
TAG_EKSCTL_CLUSTER: Final = "alpha.eksctl.io/cluster-name"
TAG_EKSCTL_NODEGROUP: Final = "alpha.eksctl.io/nodegroup-name"
TAG_EKS_CLUSTER: Final = "eks:cluster-name"
TAG_EKS_NODEGROUP: Final = "eks:nodegroup-name"
# kops: `k8s.io/role/<node|master|control-plane|bastion>` = "1"; its instance group as a node label.
TAG_KOPS_ROLE_PREFIX: Final = "k8s.io/role/"
KOPS_WORKER_ROLE: Final = "node"
LABEL_KOPS_INSTANCEGROUP: Final = "kops.k8s.io/instancegroup"
# The in-tree cloud provider's ownership tag: kubernetes.io/cluster/<name> = owned | shared.
TAG_K8S_CLUSTER_PREFIX: Final = "kubernetes.io/cluster/"
# Tags the clouds and tools write for their own bookkeeping: read, never mapped, never reported.
TAG_BOOKKEEPING_PREFIXES: Final = ("aws:", "eks:", "alpha.eksctl.io/", "eksctl.io/", "eksctl.cluster.k8s.io/",
                                   "aks-managed-")
TAG_AKS_MANAGED_PREFIX: Final = "aks-managed-"  # on the scale sets AKS makes for its agent pools
TAG_NAME: Final = "Name"
# cluster-autoscaler's Azure auto-discovery of plain scale sets (`label:` discovery): these tags, with
# the group's bounds in `min` / `max`.
TAG_CA_AZURE_ENABLED: Final = "cluster-autoscaler-enabled"
TAG_CA_AZURE_NAME: Final = "cluster-autoscaler-name"
TAG_CA_AZURE_MIN: Final = "min"
TAG_CA_AZURE_MAX: Final = "max"


def tag_ca_cluster(cluster: str) -> str:
    """The ownership tag cluster-autoscaler's auto-discovery matches (value "owned")."""
    return f"{TAG_CA_PREFIX}{cluster}"


def azure_tag_key(aws_key: str) -> str:
    """Azure tag names may not contain '/': cluster-autoscaler's Azure form uses '_'."""
    return aws_key.replace("/", "_")

# --- what kube-scheduler's volume, topology and affinity filters read ------------------------
# Deprecated zone / region labels, still honoured on PersistentVolumes by VolumeZone.
LABEL_ZONE_BETA: Final = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA: Final = "failure-domain.beta.kubernetes.io/region"
# Set by the API server on every Namespace: what a namespaceSelector can always match.
LABEL_NAMESPACE_NAME: Final = "kubernetes.io/metadata.name"
# PVC annotations of the PV controller / scheduler.
ANNOTATION_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
ANNOTATION_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
# CSI drivers whose per-node attach limits the planner knows for templates, and the in-tree
# provisioner names that CSI migration maps onto them.
CSI_EBS: Final = "ebs.csi.aws.com"
CSI_AZURE_DISK: Final = "disk.csi.azure.com"
INTREE_EBS: Final = "kubernetes.io/aws-ebs"
INTREE_AZURE_DISK: Final = "kubernetes.io/azure-disk"
# A StorageClass for pre-created local volumes: nothing provisions nor attaches its claims.
NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"
