"""One planner pass on a snapshot List given as data, read the way `scaler plan --snapshot` reads its file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scaler.configfile import load_config
from scaler.core.planning.context import planning_context
from scaler.core.planning.decisions import Plan
from scaler.core.planning.planner import plan
from scaler.core.planning.state import State
from scaler.sim.plan_command import load_snapshot


def write_snapshot(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def plan_snapshot(tmp_path: Path, data: dict[str, Any], pools: Path) -> Plan:
    config = load_config(pools)
    snap, _ = load_snapshot(write_snapshot(tmp_path, data), config)
    return plan(snap, State(), planning_context(config))[0]
