"""EC2's vCPU quota classes: which quota an instance type and market count against. Pure (no SDK), so the
simulator's `--quota` caps the same quotas the AWS provider reads (scaler/providers/aws_quotas.py).

EC2 counts vCPUs per instance class and market: the on-demand "Running On-Demand ... instances" and the
"All ... Spot Instance Requests" quotas of the G and VT, P and Standard classes. Prepaid pools launch into
their reservation and count against none of them here.
"""

from __future__ import annotations

from typing import Final

from scaler.core.config.pool import Pool

# (instance class, spot) -> (Service Quotas code, the quota's name in the console).
QUOTAS: Final = {
    ("G", False): ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("G", True): ("L-3819A6DF", "All G and VT Spot Instance Requests"),
    ("P", False): ("L-417A185B", "Running On-Demand P instances"),
    ("P", True): ("L-7212CCBC", "All P Spot Instance Requests"),
    ("Standard", False): ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    ("Standard", True): ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
}
STANDARD_LETTERS: Final = frozenset("acdhimrtz")


def instance_class(instance_type: str) -> str | None:
    """The quota class of an instance type (g6.xlarge -> G, p5.48xlarge -> P, m6i.large -> Standard)."""
    family = instance_type.split(".", 1)[0].lower()
    if family.startswith(("g", "vt")):
        return "G"
    if family.startswith("p"):
        return "P"
    return "Standard" if family[:1] in STANDARD_LETTERS else None


def quota_key(pool: Pool) -> tuple[str, bool] | None:
    """(class, spot) of the quota the pool's new nodes count against, or None (prepaid, or no class)."""
    cls = instance_class(pool.instance_types[0])
    if cls is None or pool.prepaid:
        return None
    return cls, pool.capacity_type == "spot"


def family_name(key: tuple[str, bool]) -> str:
    """The simulator's spelling of a quota family: G-spot, G-on-demand, P-spot, ... (`--quota FAMILY=VCPUS`)."""
    return f"{key[0]}-{'spot' if key[1] else 'on-demand'}"


FAMILIES: Final = {family_name(k).lower(): k for k in QUOTAS}
