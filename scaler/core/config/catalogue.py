"""The bundled instance catalogue: what users pick for GPU and general pools.

Prices are Linux on-demand list prices per hour in one region per cloud, as stated in
`PRICE_SOURCE`; they drift, so every pool can override `price_per_hour` and a pools file can
override or add whole entries under `catalogue:`. Spot / low-priority prices are not listed (they
move hourly): a spot pool without an explicit price is charged `spot_price_factor` x on-demand by the planner.
`spot_advice` gives the EC2 Spot Instance Advisor's savings and interruption bucket of an AWS type per region
(scaler/core/config/spot_advisor.py, derived from the advisor's data): what the simulator prices and reclaims
Spot by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from scaler.core.config import spot_advisor

Cloud = Literal["aws", "azure"]

PRICE_SOURCE: Final = {
    "aws": "us-east-1 Linux on-demand list prices, 2025-07 (after the June 2025 P4/P5 price cut)",
    "azure": "eastus Linux pay-as-you-go list prices, 2025-07",
}


@dataclass(frozen=True, slots=True)
class InstanceType:
    name: str
    cloud: Cloud
    vcpu: int
    memory_gib: float
    gpus: int = 0
    gpu_model: str | None = None  # short product name: T4, A10G, L4, L40S, V100, A100, H100
    gpu_memory_gib: int = 0
    price_per_hour: float = 0.0
    arch: Literal["amd64", "arm64"] = "amd64"


def _aws(name: str, vcpu: int, mem: float, price: float, gpus: int = 0, model: str | None = None,
         gmem: int = 0) -> InstanceType:
    return InstanceType(name, "aws", vcpu, mem, gpus, model, gmem, price)


def _az(name: str, vcpu: int, mem: float, price: float, gpus: int = 0, model: str | None = None,
        gmem: int = 0) -> InstanceType:
    return InstanceType(name, "azure", vcpu, mem, gpus, model, gmem, price)


_TYPES: Final = [
    # AWS GPU
    _aws("g4dn.xlarge", 4, 16, 0.526, 1, "T4", 16),
    _aws("g4dn.2xlarge", 8, 32, 0.752, 1, "T4", 16),
    _aws("g4dn.4xlarge", 16, 64, 1.204, 1, "T4", 16),
    _aws("g4dn.8xlarge", 32, 128, 2.176, 1, "T4", 16),
    _aws("g4dn.12xlarge", 48, 192, 3.912, 4, "T4", 16),
    _aws("g4dn.metal", 96, 384, 7.824, 8, "T4", 16),
    _aws("g5.xlarge", 4, 16, 1.006, 1, "A10G", 24),
    _aws("g5.2xlarge", 8, 32, 1.212, 1, "A10G", 24),
    _aws("g5.4xlarge", 16, 64, 1.624, 1, "A10G", 24),
    _aws("g5.8xlarge", 32, 128, 2.448, 1, "A10G", 24),
    _aws("g5.12xlarge", 48, 192, 5.672, 4, "A10G", 24),
    _aws("g5.24xlarge", 96, 384, 8.144, 4, "A10G", 24),
    _aws("g5.48xlarge", 192, 768, 16.288, 8, "A10G", 24),
    _aws("g6.xlarge", 4, 16, 0.8048, 1, "L4", 24),
    _aws("g6.2xlarge", 8, 32, 0.9776, 1, "L4", 24),
    _aws("g6.4xlarge", 16, 64, 1.3232, 1, "L4", 24),
    _aws("g6.12xlarge", 48, 192, 4.6016, 4, "L4", 24),
    _aws("g6.24xlarge", 96, 384, 6.6752, 4, "L4", 24),
    _aws("g6.48xlarge", 192, 768, 13.3504, 8, "L4", 24),
    _aws("g6e.xlarge", 4, 32, 1.861, 1, "L40S", 48),
    _aws("g6e.2xlarge", 8, 64, 2.242, 1, "L40S", 48),
    _aws("g6e.12xlarge", 48, 384, 10.493, 4, "L40S", 48),
    _aws("g6e.24xlarge", 96, 768, 15.066, 4, "L40S", 48),
    _aws("g6e.48xlarge", 192, 1536, 30.131, 8, "L40S", 48),
    _aws("p3.2xlarge", 8, 61, 3.06, 1, "V100", 16),
    _aws("p3.8xlarge", 32, 244, 12.24, 4, "V100", 16),
    _aws("p3.16xlarge", 64, 488, 24.48, 8, "V100", 16),
    _aws("p4d.24xlarge", 96, 1152, 21.958, 8, "A100", 40),
    _aws("p5.48xlarge", 192, 2048, 55.04, 8, "H100", 80),
    # One H100, launched 2025-08, so not in the list above: its shape is EC2's DescribeInstanceTypes answer (moto's
    # copy, tests/scaler/core/test_catalogue.py), its us-east-1 price is from price listings of 2026: one eighth of
    # p5.48xlarge's, as AWS prices P5 per GPU.
    _aws("p5.4xlarge", 16, 256, 6.88, 1, "H100", 80),
    # AWS general purpose / compute
    _aws("m5.large", 2, 8, 0.096), _aws("m5.xlarge", 4, 16, 0.192),
    _aws("m5.2xlarge", 8, 32, 0.384), _aws("m5.4xlarge", 16, 64, 0.768),
    _aws("m6i.large", 2, 8, 0.096), _aws("m6i.xlarge", 4, 16, 0.192),
    _aws("m6i.2xlarge", 8, 32, 0.384), _aws("m6i.4xlarge", 16, 64, 0.768),
    _aws("m6i.8xlarge", 32, 128, 1.536), _aws("m6i.12xlarge", 48, 192, 2.304),
    _aws("c6i.large", 2, 4, 0.085), _aws("c6i.xlarge", 4, 8, 0.17),
    _aws("c6i.2xlarge", 8, 16, 0.34), _aws("c6i.4xlarge", 16, 32, 0.68),
    # Azure GPU
    _az("Standard_NC4as_T4_v3", 4, 28, 0.526, 1, "T4", 16),
    _az("Standard_NC8as_T4_v3", 8, 56, 0.752, 1, "T4", 16),
    _az("Standard_NC16as_T4_v3", 16, 110, 1.204, 1, "T4", 16),
    _az("Standard_NC64as_T4_v3", 64, 440, 4.352, 4, "T4", 16),
    _az("Standard_NC24ads_A100_v4", 24, 220, 3.673, 1, "A100", 80),
    _az("Standard_NC48ads_A100_v4", 48, 440, 7.346, 2, "A100", 80),
    _az("Standard_NC96ads_A100_v4", 96, 880, 14.692, 4, "A100", 80),
    _az("Standard_ND96asr_v4", 96, 900, 27.197, 8, "A100", 40),
    _az("Standard_ND96amsr_A100_v4", 96, 1900, 32.770, 8, "A100", 80),
    _az("Standard_ND96isr_H100_v5", 96, 1900, 98.32, 8, "H100", 80),
    # Azure general purpose / compute
    _az("Standard_D2s_v5", 2, 8, 0.096), _az("Standard_D4s_v5", 4, 16, 0.192),
    _az("Standard_D8s_v5", 8, 32, 0.384), _az("Standard_D16s_v5", 16, 64, 0.768),
    _az("Standard_D32s_v5", 32, 128, 1.536), _az("Standard_D48s_v5", 48, 192, 2.304),
    _az("Standard_F4s_v2", 4, 8, 0.169), _az("Standard_F8s_v2", 8, 16, 0.338),
    _az("Standard_F16s_v2", 16, 32, 0.677),
]

CATALOGUE: Final[dict[str, InstanceType]] = {t.name: t for t in _TYPES}

# The advisor's interruption frequency buckets: the share of a type's Spot instances in a region that EC2
# interrupted during the trailing month.
SPOT_ADVICE_SOURCE: Final = spot_advisor.SOURCE
INTERRUPTION_BUCKETS: Final = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")


@dataclass(frozen=True, slots=True)
class SpotAdvice:
    """The EC2 Spot Instance Advisor's figures of one type in one region (`SPOT_ADVICE_SOURCE`)."""

    savings_pct: int  # the Spot price's average saving over On-Demand in the trailing month
    bucket: int  # index into INTERRUPTION_BUCKETS

    @property
    def bucket_label(self) -> str:
        return INTERRUPTION_BUCKETS[self.bucket]


def spot_advice(name: str, region: str) -> SpotAdvice | None:
    """The advisor's savings and interruption bucket of an instance type in a region; None when it has no entry
    (an Azure size, a type outside the catalogue, or a type EC2 does not sell as Spot in that region)."""
    entry = spot_advisor.ADVICE.get(name, {}).get(region)
    return None if entry is None else SpotAdvice(*entry)

# The types EC2 sells as Capacity Blocks for ML (of this catalogue's: p4d and p5; the others as AWS lists them).
CAPACITY_BLOCK_TYPES: Final = frozenset({
    "p4d.24xlarge", "p4de.24xlarge", "p5.4xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
    "trn1.32xlarge", "trn2.48xlarge",
})


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """What NVML says of one GPU (and so what the NVIDIA DRA driver publishes for it)."""

    product_name: str  # NVML's name: "NVIDIA H100 80GB HBM3"
    architecture: str  # "Hopper"
    memory_mib: int  # total memory as NVML reports it (a little under the marketing figure)
    compute_capability: str  # CUDA compute capability: "9.0"


# (GPU model, memory GiB) as the catalogue states them -> NVML's facts (NVIDIA data sheets, nvidia-smi).
GPU_FACTS: Final[dict[tuple[str, int], GpuFacts]] = {
    ("T4", 16): GpuFacts("Tesla T4", "Turing", 15360, "7.5"),
    ("A10G", 24): GpuFacts("NVIDIA A10G", "Ampere", 23028, "8.6"),
    ("L4", 24): GpuFacts("NVIDIA L4", "Ada Lovelace", 23034, "8.9"),
    ("L40S", 48): GpuFacts("NVIDIA L40S", "Ada Lovelace", 46068, "8.9"),
    ("V100", 16): GpuFacts("Tesla V100-SXM2-16GB", "Volta", 16384, "7.0"),
    ("A100", 40): GpuFacts("NVIDIA A100-SXM4-40GB", "Ampere", 40960, "8.0"),
    ("A100", 80): GpuFacts("NVIDIA A100-SXM4-80GB", "Ampere", 81920, "8.0"),
    ("H100", 80): GpuFacts("NVIDIA H100 80GB HBM3", "Hopper", 81559, "9.0"),
}
_A100_PCIE: Final = GpuFacts("NVIDIA A100 80GB PCIe", "Ampere", 81920, "8.0")  # Azure's NC A100 v4


def gpu_facts(itype: InstanceType) -> GpuFacts | None:
    """The GPU of an instance type as NVML describes it; None when the catalogue does not know it."""
    if itype.gpu_model == "A100" and itype.name.startswith("Standard_NC") and "ads_A100" in itype.name:
        return _A100_PCIE
    return GPU_FACTS.get((itype.gpu_model or "", itype.gpu_memory_gib))


# The value of the cloud's accelerator label per GPU model (cluster-autoscaler's GPU label).
AWS_ACCELERATOR: Final = {
    "T4": "nvidia-tesla-t4", "A10G": "nvidia-a10g", "L4": "nvidia-l4", "L40S": "nvidia-l40s",
    "V100": "nvidia-tesla-v100", "A100": "nvidia-tesla-a100", "H100": "nvidia-h100",
}
