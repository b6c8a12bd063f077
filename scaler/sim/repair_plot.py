"""The repair chart: for each trace and GPU failure rate, repair on beside repair off, what the run cost and the
work it lost (bench/simulate_traces.py --plots DIR writes DIR/repair.png). matplotlib with the Agg backend.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaler.sim.plot import money

ON, OFF = "#1f77b4", "#aec7e8"  # the same family: repair on dark, off light


def repair_pairs(runs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, dict[bool, dict[str, Any]]]:
    """(run's arguments, its report) of the GPU failure runs -> "TRACE, R/GPU-h" -> {repair: report}."""
    out: dict[str, dict[bool, dict[str, Any]]] = {}
    for kw, report in runs:
        if kw.get("gpu_failure_rate") and kw.get("policy", "gpuburst") == "gpuburst":
            group = f"{Path(kw['trace']).stem}, {kw['gpu_failure_rate']:g}/GPU-h" + \
                (", in place" if kw.get("restart_in_place") else "")
            out.setdefault(group, {})[bool(kw.get("repair", True))] = report
    return {k: v for k, v in out.items() if len(v) == 2}


def _cost(report: dict[str, Any]) -> float:
    return float(report["cost_usd"])


def _lost(report: dict[str, Any]) -> float:
    """Lost since the last checkpoint, and left undone by jobs that never finished (stuck on a dead GPU)."""
    return float(report["failures"]["gpu_hours_lost"] + report["demand_gpu_hours"] - report["demand_done_gpu_hours"])


def _hours(value: float) -> str:
    return f"{value:,.0f}"


def plot_repair(pairs: dict[str, dict[bool, dict[str, Any]]], path: str | Path) -> None:
    """Two panels, cost and GPU-hours lost since the last checkpoint (or left undone), each group repair on beside
    off, on log scales: the groups' figures span three orders of magnitude."""
    import matplotlib  # noqa: PLC0415 - imported only when a plot is asked for

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    groups = sorted(pairs)
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 2.4 * len(groups)), 5.5))
    panels: list[tuple[str, Callable[[dict[str, Any]], float], Callable[[float], str]]] = [
        ("cost", _cost, money), ("GPU-hours lost since the last checkpoint or left undone", _lost, _hours)]
    for ax, (title, value, fmt) in zip(axes, panels, strict=True):
        for offset, repair, colour in ((-0.2, True, ON), (0.2, False, OFF)):
            heights = [value(pairs[g][repair]) for g in groups]
            bars = ax.bar([i + offset for i in range(len(groups))], heights, width=0.4, color=colour,
                          label=f"repair {'on' if repair else 'off'}")
            ax.bar_label(bars, labels=[fmt(h) for h in heights], fontsize=7)
        ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.suptitle("GPU failures: the scaler's repair on and off, same trace, pools and failures")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
