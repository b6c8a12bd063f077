"""bench/repair_seeds.py: repair on against off over several seeds, as paired differences a reader can weigh."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _bench() -> ModuleType:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module("repair_seeds")
    finally:
        sys.path.remove(str(ROOT / "bench"))


def _report(cost: float, lost: float, own: float) -> dict[str, Any]:
    return {"cost_usd": cost, "failures": {"gpu_hours_lost": lost, "gpu_hours_lost_to_failures": own}}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "bench/repair_seeds.py", *args], capture_output=True, text=True, cwd=ROOT,
                          check=False, timeout=120, env={**os.environ, "COLUMNS": "200"})


def test_a_cell_is_the_mean_of_the_paired_differences_and_the_seeds_that_met_the_goal() -> None:
    # seed 0: on $10 cheaper and 1 GPU-h less lost; seed 1: on $10 dearer and 2 GPU-h less lost
    pairs = [(_report(100, 5, 4), _report(110, 6, 5)), (_report(200, 7, 6), _report(190, 9, 8))]
    line = _bench().cell_line("PHILLY-A 0.01/GPU-h", pairs)
    assert line == ("PHILLY-A 0.01/GPU-h: 2 seeds; on - off: cost +0 $ (SE 10; off 150 $), GPU-h lost -1.5 "
                    "(SE 0.5; off 7.5), of it by the failures' own jobs -1.5 (SE 0.5); on no dearer in 1/2, "
                    "loses less in 2/2")


def test_one_seed_has_no_spread_to_quote() -> None:
    assert _bench().mean_se([3.0]) == (3.0, 0.0)


def test_bad_arguments_are_one_line_and_run_nothing(tmp_path: Path) -> None:
    proc = _run("--seeds", "0")
    assert proc.returncode == 2 and proc.stderr == "--seeds 0: at least 1\n"
    proc = _run("--traces", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr == f"{tmp_path}: no PHILLY-A.csv, ALIBABA-OPENB2023-A.csv: pass --traces DIR\n"
