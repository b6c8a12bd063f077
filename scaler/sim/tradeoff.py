"""What latency costs: the table (stdout, CSV) and the PNG of cost against p95 pending that `simulate --sweep` and
`scaler tune` write, one point per setting. The PNG's cost is the bill in dollars, not paid / demand GPU-hours: a
warm pool's on-demand instances pay the same GPU-hours as spot ones at a higher price, and only the bill shows it.
Beside the p95 of every job it plots the p95 of the 1-GPU jobs, the ones a buffer or a warm pool serves."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MIN_SPAN_S = 60.0  # the p95 axes span at least this: 3 s of difference never looks like a trade-off
COLUMNS = ("jobs_completed", "jobs_total", "paid_over_demand", "cost_usd", "pending_p50_s", "pending_p95_s",
           "pending_1gpu_p95_s")


def pareto(rows: Sequence[dict[str, Any]]) -> list[int]:
    """Indexes of the rows no other row beats on both the bill and p95 pending (ties kept), by p95.
    Rows that did not complete every job are never on the front."""
    whole = [i for i, r in enumerate(rows) if r.get("jobs_completed") == r.get("jobs_total")]

    def beaten(i: int) -> bool:
        a = rows[i]
        return any(rows[j]["cost_usd"] <= a["cost_usd"] and rows[j]["pending_p95_s"] <= a["pending_p95_s"]
                   and (rows[j]["cost_usd"], rows[j]["pending_p95_s"]) != (a["cost_usd"], a["pending_p95_s"])
                   for j in whole)
    return sorted((i for i in whole if not beaten(i)), key=lambda i: (rows[i]["pending_p95_s"], i))


def said(f: dict[str, Any]) -> str:
    """A run's figures in the order they are weighed by: the bill first, then the p95 wait, then paid / demand."""
    return f"cost ${f['cost_usd']:,.0f}, p95 {f['pending_p95_s']} s, paid/demand {f['paid_over_demand']}"


def table(rows: Sequence[dict[str, Any]], keys: Sequence[str], marks: dict[int, str] | None = None) -> str:
    """Aligned text: the setting's `keys`, then the figures; `marks` (row index -> word) in a last column."""
    head = [*keys, *COLUMNS, "note"]
    body = [[_cell(r.get(k)) for k in (*keys, *COLUMNS)] + [(marks or {}).get(i, "")] for i, r in enumerate(rows)]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
                     for line in (head, *body))


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def write_csv(path: Path, rows: Sequence[dict[str, Any]], keys: Sequence[str],
              marks: dict[int, str] | None = None) -> None:
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow([*keys, *COLUMNS, "note"])
        for i, r in enumerate(rows):
            writer.writerow([r.get(k, "") for k in (*keys, *COLUMNS)] + [(marks or {}).get(i, "")])


def axis_limits(values: Sequence[float]) -> tuple[float, float]:
    """An x range around `values` at least MIN_SPAN_S wide (from 0 at the lowest)."""
    lo, hi = min(values, default=0.0), max(values, default=0.0)
    pad = max((hi - lo) * 0.1, (MIN_SPAN_S - (hi - lo)) / 2, 0.0)
    low = max(lo - pad, 0.0)
    return low, max(hi + pad, low + MIN_SPAN_S)


def plot(path: Path, rows: Sequence[dict[str, Any]], labels: Sequence[str], title: str,
         marks: dict[int, str] | None = None) -> dict[str, Any]:
    """Two panels, the bill against the p95 pending of every job and of the 1-GPU jobs: one point per row; the
    Pareto front (bill, p95 of every job) joined and labelled on the first (the table names every row); marked
    rows (today's default, the chosen one) drawn as a star and named in the legend. Returns what it drew: each
    panel's x range and labels."""
    import matplotlib  # noqa: PLC0415 - only when a PNG is asked for

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, 2, figsize=(14, 6), sharey=True)
    drawn: dict[str, Any] = {"x_limits": [], "labels": []}
    done = [i for i, r in enumerate(rows) if r.get("cost_usd") is not None]
    front = pareto(rows)
    colours = ("#d62728", "#ff7f0e", "#9467bd")
    for ax, key, what in ((axes[0], "pending_p95_s", "every job"), (axes[1], "pending_1gpu_p95_s", "1-GPU jobs")):
        shown = [i for i in done if rows[i].get(key) is not None]
        ax.scatter([rows[i][key] for i in shown], [rows[i]["cost_usd"] for i in shown], color="#1f77b4",
                   label="a setting")
        named = [i for i in front if i in shown] if key == "pending_p95_s" else []
        for n, i in enumerate(named):  # staggered, so neighbours on the front do not print over each other
            ax.annotate(labels[i], (rows[i][key], rows[i]["cost_usd"]), fontsize=7, xytext=(5, 4 + 10 * (n % 3)),
                        textcoords="offset points")
        ax.set_xlim(*axis_limits([rows[i][key] for i in shown]))
        drawn["x_limits"].append(ax.get_xlim())
        drawn["labels"].append([labels[i] for i in named])
        if key == "pending_p95_s":
            ax.plot([rows[i][key] for i in front], [rows[i]["cost_usd"] for i in front], color="#2ca02c",
                    linestyle="--", label="Pareto front")
        for n, (i, word) in enumerate(sorted((marks or {}).items())):
            if i in shown:
                ax.scatter([rows[i][key]], [rows[i]["cost_usd"]], marker="*", s=260,
                           color=colours[n % len(colours)], label=word, zorder=3)
        ax.set_xlabel(f"p95 pending of {what} (s)")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("cost")
    axes[0].yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"${v:,.0f}"))
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn
