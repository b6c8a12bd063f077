"""The repair chart: for each trace and GPU failure rate, repair on beside repair off, what the run cost and the
work it lost (bench/simulate_traces.py --plots DIR writes DIR/repair.png). matplotlib with the Agg backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaler.sim.plot import money

ON, OFF = "#1f77b4", "#aec7e8"  # the same family: repair on dark, off light


def repair_pairs(runs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, dict[bool, dict[str, Any]]]:
    """(run's arguments, its report) of the GPU failure runs -> "TRACE, R/GPU-h" -> {repair: report}."""
    out: dict[str, dict[bool, dict[str, Any]]] = {}
    for kw, report in runs:
        if kw.get("gpu_failure_rate") and kw.get("policy", "gpuburst") == "gpuburst":
            group = f"{Path(kw['trace']).stem}, {kw['gpu_failure_rate']:g}/GPU-h"
            out.setdefault(group, {})[bool(kw.get("repair", True))] = report
    return {k: v for k, v in out.items() if len(v) == 2}


def plot_repair(pairs: dict[str, dict[bool, dict[str, Any]]], path: str | Path) -> None:
    """Two panels, cost and GPU-hours lost since the last checkpoint, each group repair on beside off."""
    import matplotlib  # noqa: PLC0415 - imported only when a plot is asked for

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    groups = sorted(pairs)
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 2.4 * len(groups)), 4.5))
    for ax, (title, value, fmt) in zip(axes, (
            ("cost", lambda r: r["cost_usd"], money),
            ("GPU-hours lost since the last checkpoint", lambda r: r["failures"]["gpu_hours_lost"],
             lambda v: f"{v:,.0f}")), strict=True):
        for offset, repair, colour in ((-0.2, True, ON), (0.2, False, OFF)):
            heights = [value(pairs[g][repair]) for g in groups]
            bars = ax.bar([i + offset for i in range(len(groups))], heights, width=0.4, color=colour,
                          label=f"repair {'on' if repair else 'off'}")
            ax.bar_label(bars, labels=[fmt(h) for h in heights], fontsize=7)
        ax.set_xticks(range(len(groups)), groups, rotation=15, fontsize=8)
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.suptitle("GPU failures: the scaler's repair on and off, same trace, pools and failures")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
