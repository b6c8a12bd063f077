"""Shared helpers for the simulator tests: small pools files and traces written to tmp_path.

Fixtures are re-exported by conftest.py; helpers are imported as `from sim_helpers import ...`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.core.config.settings import ScalerConfig, parse_config

ROOT = Path(__file__).resolve().parents[3]

# Two zones of 1-GPU and 8-GPU spot pools with on-demand fallbacks: the shape of examples/, smaller.
SMALL_POOLS: dict[str, Any] = {
    "cluster": "sim-test",
    "cloud": "aws",
    "region": "us-east-1",
    "pools": [
        {"name": "gpu1-spot-a", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"],
         "max": 20, "fallback": "gpu1-od"},
        {"name": "gpu1-spot-b", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1b"],
         "max": 20, "fallback": "gpu1-od"},
        {"name": "gpu1-od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a", "us-east-1b"], "max": 20},
        {"name": "gpu8-spot-a", "capacity_type": "spot", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"],
         "min_pod_gpus": 8, "max": 10, "fallback": "gpu8-od"},
        {"name": "gpu8-od", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a", "us-east-1b"],
         "min_pod_gpus": 8, "max": 10},
    ],
}


@pytest.fixture
def small_config() -> ScalerConfig:
    return parse_config(SMALL_POOLS, "small-pools.yaml")


@pytest.fixture
def pools_file(tmp_path: Path) -> Path:
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(SMALL_POOLS), encoding="utf-8")
    return path


def write_trace(path: Path, rows: list[str], header: str = "job_id,submit_s,gpus,duration_s,num_workers") -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path
