"""What latency costs: the table (stdout, CSV) and the PNG of cost (paid / demand GPU-hours) against p95 pending
that `simulate --sweep` and `scaler tune` write, one point per setting."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLUMNS = ("jobs_completed", "jobs_total", "paid_over_demand", "cost_usd", "pending_p50_s", "pending_p95_s")


def pareto(rows: Sequence[dict[str, Any]]) -> list[int]:
    """Indexes of the rows no other row beats on both paid/demand and p95 pending (ties kept), by p95.
    Rows that did not complete every job are never on the front."""
    whole = [i for i, r in enumerate(rows) if r.get("jobs_completed") == r.get("jobs_total")]

    def beaten(i: int) -> bool:
        a = rows[i]
        return any(rows[j]["paid_over_demand"] <= a["paid_over_demand"] and rows[j]["pending_p95_s"] <=
                   a["pending_p95_s"] and (rows[j]["paid_over_demand"], rows[j]["pending_p95_s"]) !=
                   (a["paid_over_demand"], a["pending_p95_s"]) for j in whole)
    return sorted((i for i in whole if not beaten(i)), key=lambda i: (rows[i]["pending_p95_s"], i))


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


def plot(path: Path, rows: Sequence[dict[str, Any]], labels: Sequence[str], title: str,
         marks: dict[int, str] | None = None) -> None:
    """One point per row (cost against p95 pending), each labelled; the Pareto front joined; marked rows
    (today's default, the chosen one) drawn as a star and named in the legend."""
    import matplotlib  # noqa: PLC0415 - only when a PNG is asked for

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(9, 6))
    done = [i for i, r in enumerate(rows) if r.get("paid_over_demand") is not None]
    ax.scatter([rows[i]["pending_p95_s"] for i in done], [rows[i]["paid_over_demand"] for i in done],
               color="#1f77b4", label="a setting")
    for i in done:
        ax.annotate(labels[i], (rows[i]["pending_p95_s"], rows[i]["paid_over_demand"]), fontsize=7,
                    xytext=(4, 3), textcoords="offset points")
    front = pareto(rows)
    ax.plot([rows[i]["pending_p95_s"] for i in front], [rows[i]["paid_over_demand"] for i in front],
            color="#2ca02c", linestyle="--", label="Pareto front")
    colours = ("#d62728", "#ff7f0e", "#9467bd")
    for n, (i, word) in enumerate(sorted((marks or {}).items())):
        if i in done:
            ax.scatter([rows[i]["pending_p95_s"]], [rows[i]["paid_over_demand"]], marker="*", s=260,
                       color=colours[n % len(colours)], label=word, zorder=3)
    ax.set_xlabel("p95 pending (s)")
    ax.set_ylabel("paid / demand GPU-hours")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
