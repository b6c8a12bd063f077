"""The bundled AWS catalogue against EC2's own description of its instance types.

What a pool's template node is built from (vCPUs, memory, GPUs and their model) and which types may be a Capacity
Block must be what EC2 launches: a wrong figure plans pods onto nodes that cannot hold them. moto ships a copy of
EC2's DescribeInstanceTypes answer; it is the reference here (it omits retired types, such as p3).
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import moto
import pytest

from scaler.core.config.catalogue import CAPACITY_BLOCK_TYPES, CATALOGUE

AWS = sorted(n for n, t in CATALOGUE.items() if t.cloud == "aws")


@cache
def described() -> dict[str, Any]:
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


@pytest.mark.parametrize("name", [n for n in AWS if n in described()])
def test_an_aws_type_has_the_shape_ec2_describes(name: str) -> None:
    itype, ec2 = CATALOGUE[name], described()[name]
    gpus = ec2.get("GpuInfo", {}).get("Gpus", [])
    assert (itype.vcpu, itype.memory_gib) == (ec2["VCpuInfo"]["DefaultVCpus"], ec2["MemoryInfo"]["SizeInMiB"] / 1024)
    assert itype.gpus == sum(g["Count"] for g in gpus)
    if gpus:
        assert itype.gpu_model == gpus[0]["Name"]


def test_the_single_h100_type_is_listed_and_priced_per_gpu_as_the_8_gpu_one() -> None:
    one, eight = CATALOGUE["p5.4xlarge"], CATALOGUE["p5.48xlarge"]
    assert (one.gpus, one.gpu_model, one.gpu_memory_gib) == (1, "H100", 80)
    assert one.price_per_hour == pytest.approx(eight.price_per_hour / 8)


def test_the_capacity_block_types_are_those_ec2_sells_as_capacity_blocks() -> None:
    sold = {n for n in AWS if "capacity-block" in described().get(n, {}).get("SupportedUsageClasses", [])}
    assert sold == CAPACITY_BLOCK_TYPES & set(AWS)
    assert {"p5.4xlarge", "p5.48xlarge", "p4d.24xlarge"} <= sold
