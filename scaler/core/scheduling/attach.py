"""How many block volumes a new node of an instance type can attach, per CSI driver.

A registered node reports its limit in its CSINode object (`spec.drivers[].allocatable.count`, set by
the driver's node plugin), and that is what kube-scheduler's NodeVolumeLimits filter reads. A node
that does not exist yet has no CSINode, so the planner uses these figures for its templates:

- AWS (EBS CSI driver): Xen instances (p3) attach 39 volumes. Nitro instances share 28 attachment
  slots between EBS volumes, network interfaces and NVMe instance-store volumes, and the driver also
  reserves the root volume's slot and one per GPU on the accelerated types: 28 - 1 ENI - 1 root -
  instance-store NVMe volumes - GPUs.
- Azure (Azure Disk CSI driver): the VM size's maximum data disks, as Azure documents them.

Instance types not listed get no limit (the scheduler does not limit a node without a CSINode
either); a registered node's CSINode always wins over this table.
"""

from __future__ import annotations

from typing import Final

from scaler.core.config.catalogue import CATALOGUE
from scaler.core.model import keys

NITRO_SLOTS: Final = 28
XEN_LIMIT: Final = 39
_XEN: Final = frozenset({"p3.2xlarge", "p3.8xlarge", "p3.16xlarge"})
# NVMe instance-store volumes per Nitro type of the catalogue (0 when EBS-only).
_INSTANCE_STORE: Final = {
    "g4dn.xlarge": 1, "g4dn.2xlarge": 1, "g4dn.4xlarge": 1, "g4dn.8xlarge": 1, "g4dn.12xlarge": 1,
    "g4dn.metal": 2, "g5.xlarge": 1, "g5.2xlarge": 1, "g5.4xlarge": 1, "g5.8xlarge": 1, "g5.12xlarge": 1,
    "g5.24xlarge": 1, "g5.48xlarge": 2, "g6.xlarge": 1, "g6.2xlarge": 1, "g6.4xlarge": 1, "g6.12xlarge": 4,
    "g6.24xlarge": 4, "g6.48xlarge": 8, "g6e.xlarge": 1, "g6e.2xlarge": 1, "g6e.12xlarge": 2,
    "g6e.24xlarge": 2, "g6e.48xlarge": 4, "p4d.24xlarge": 8, "p5.4xlarge": 1,
    "p5.48xlarge": 8,
}
# Azure maximum data disks per VM size.
_AZURE_DATA_DISKS: Final = {
    "Standard_NC4as_T4_v3": 8, "Standard_NC8as_T4_v3": 16, "Standard_NC16as_T4_v3": 32,
    "Standard_NC64as_T4_v3": 32, "Standard_NC24ads_A100_v4": 8, "Standard_NC48ads_A100_v4": 16,
    "Standard_NC96ads_A100_v4": 32, "Standard_ND96asr_v4": 16, "Standard_ND96amsr_A100_v4": 16,
    "Standard_ND96isr_H100_v5": 16, "Standard_D2s_v5": 4, "Standard_D4s_v5": 8, "Standard_D8s_v5": 16,
    "Standard_D16s_v5": 32, "Standard_D32s_v5": 32, "Standard_D48s_v5": 32, "Standard_F4s_v2": 8,
    "Standard_F8s_v2": 16, "Standard_F16s_v2": 32,
}


def template_limits(instance_type: str | None) -> dict[str, int]:
    """CSI driver -> volumes a new node of the type can attach; {} when unknown."""
    if instance_type is None:
        return {}
    if instance_type in _AZURE_DATA_DISKS:
        return {keys.CSI_AZURE_DISK: _AZURE_DATA_DISKS[instance_type]}
    itype = CATALOGUE.get(instance_type)
    if itype is None or itype.cloud != "aws":
        return {}
    if instance_type in _XEN:
        return {keys.CSI_EBS: XEN_LIMIT}
    reserved = 1 + 1 + _INSTANCE_STORE.get(instance_type, 0) + itype.gpus  # ENI, root, NVMe stores, GPUs
    return {keys.CSI_EBS: max(0, NITRO_SLOTS - reserved)}
