"""The PNG timeline: GPUs provisioned per pool (stacked, on-demand hatched) against GPU demand, a zoom on each
spot outage with the fallback it caused, pending pods, and the cost against the fleets without gpuburst.
matplotlib with the Agg backend (no display needed).

Colours follow the pools file, not the run: GPU pools take a colour family in the order they are declared, and a
pool declared as another's fallback takes the lighter shade of that pool's family, so a pool has the same colour
in every run with the same pools file, and a spot pool and its fallback look alike. No family is red: red is the
pending pods' line. Pools without GPUs are left out (they are in the cost, not in the GPUs).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaler.core.config.settings import ScalerConfig
from scaler.sim.prepaid import window as prepaid_window
from scaler.sim.records import SimResult
from scaler.sim.report import baselines, on_demand_price

MAX_POINTS = 4000
PENDING_COLOUR = "#d62728"  # matplotlib's tab:red
# (dark, light) pairs: tab20's families but red, then tab20b's but red.
FAMILIES: tuple[tuple[str, str], ...] = (
    ("#1f77b4", "#aec7e8"), ("#ff7f0e", "#ffbb78"), ("#2ca02c", "#98df8a"), ("#9467bd", "#c5b0d5"),
    ("#8c564b", "#c49c94"), ("#e377c2", "#f7b6d2"), ("#7f7f7f", "#c7c7c7"), ("#bcbd22", "#dbdb8d"),
    ("#17becf", "#9edae5"), ("#393b79", "#9c9ede"), ("#637939", "#b5cf6b"), ("#8c6d31", "#e7ba52"),
    ("#7b4173", "#ce6dbd"),
)
TAIL_MARGIN = 0.05  # the x axis goes this share of the submission span past the last submission


def pool_colours(config: ScalerConfig) -> dict[str, str]:
    """Pool name -> colour, from the pools file alone (see the module's docstring)."""
    colours: dict[str, str] = {}
    family_of: dict[str, int] = {}
    families = 0
    gpu_pools = [p for p in config.pools if p.gpus_per_node]
    on_demand = {p.name for p in gpu_pools if p.capacity_type != "spot"}
    for pool in gpu_pools:  # a pool's non-spot fallback joins its family, whichever is declared first
        if pool.fallback in on_demand and pool.fallback not in family_of and pool.name not in family_of:
            family_of[pool.name] = family_of[pool.fallback] = families
            families += 1
    for pool in gpu_pools:
        if pool.name not in family_of:
            family_of[pool.name] = families
            families += 1
    fallbacks = {p.fallback for p in gpu_pools if p.fallback}
    for pool in gpu_pools:
        dark, light = FAMILIES[family_of[pool.name] % len(FAMILIES)]
        colours[pool.name] = light if pool.name in fallbacks and pool.name in on_demand else dark
    return colours


def x_limit(result: SimResult) -> float:
    """Where the x axis ends: just past the last submission (the scaling happens while jobs arrive; after it, the
    last long jobs run out), or the whole run when it is not much longer."""
    last = max((r.job.submit_s for r in result.jobs), default=0.0)
    cut = last * (1 + TAIL_MARGIN) + 3600
    return result.end if cut >= result.end * 0.8 else cut


def cumulative_cost(result: SimResult, grid: Sequence[float], price: dict[str, float] | None = None) -> list[float]:
    """The dollars paid by each grid time: every instance's price over its life (`price`: per pool, instead), and
    without `price` each prepaid pool's window charge spread over its window (scaler/sim/prepaid.py)."""
    changes: list[tuple[float, float]] = []
    for inst in result.provider.history:
        rate = (price[inst.pool] if price is not None else inst.price_per_hour) / 3600
        changes.append((inst.requested_at, rate))
        changes.append((inst.ended_at if inst.ended_at is not None else result.end, -rate))
    for pool in result.config.pools if price is None else ():
        if pool.prepaid:
            start, stop = prepaid_window(pool, result.end)
            rate = pool.max_size * pool.list_price(result.config.spot_price_factor) / 3600
            changes += [(start, rate), (stop, -rate)]
    changes.sort()
    out, paid, rate, at, i = [], 0.0, 0.0, 0.0, 0
    for t in grid:
        while i < len(changes) and changes[i][0] <= t:
            paid += rate * (changes[i][0] - at)
            at, rate = changes[i][0], rate + changes[i][1]
            i += 1
        out.append(paid + rate * (t - at))
    return out


@dataclass
class Drawn:
    """What the figure shows, as a reader of it would list it (the tests read this)."""

    title: str = ""
    legend: list[str] = field(default_factory=list)  # the GPU panel's legend
    colours: dict[str, str] = field(default_factory=dict)  # pool -> colour, pools drawn
    x_hours: tuple[float, float] = (0.0, 0.0)
    outages_hours: list[tuple[float, float]] = field(default_factory=list)  # shaded
    fallbacks: list[str] = field(default_factory=list)  # the zoom's legend
    cost: list[str] = field(default_factory=list)  # the cost panel's legend
    whole_hours: tuple[float, float] | None = None  # the whole-run panel's x axis, drawn when the others are cut
    end_gpus: int | None = None  # GPUs provisioned at the end of the run, as that panel's title says


def money(dollars: float) -> str:
    """Dollars for a matplotlib label (a bare $ starts mathtext)."""
    return f"\\${dollars:,.0f}"


def plot_timeline(result: SimResult, path: str | Path, title: str = "", report: dict[str, Any] | None = None) -> Drawn:
    """Write the PNG; `report` (build_report's) gives the costs, else they are computed from the result."""
    import matplotlib  # noqa: PLC0415 - imported only when a plot is asked for

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    samples = result.samples
    if not samples:
        raise ValueError("nothing to plot: the simulation recorded no sample")
    figures = report if report is not None else {"cost_usd": sum(i.price_per_hour * i.life(result.end)
                                                                 for i in result.provider.history) / 3600,
                                                 **baselines(result)}
    end = max(result.end, samples[-1].t)
    xmax = min(x_limit(result), end)
    times = [s.t for s in samples]
    n = min(MAX_POINTS, max(len(samples), 2))
    grid = [xmax * i / (n - 1) for i in range(n)]

    def pick(at: Sequence[float]) -> list[Any]:
        return [samples[max(bisect.bisect_right(times, t) - 1, 0)] for t in at]

    picked = pick(grid)
    hours = [t / 3600 for t in grid]
    config = result.config
    declared = {p.name: p for p in config.pools}
    colours = pool_colours(config)
    spot = {p.name for p in config.pools if p.capacity_type == "spot"}
    used = {name for s in samples for name, gpus in s.gpus_by_pool.items() if gpus > 0}
    order = {p.name: i for i, p in enumerate(config.pools)}
    pools = sorted((p for p in used if p in colours), key=lambda p: (p not in spot, order[p]))
    outages = list(getattr(result.provider, "outages", []))

    rows = [("gpus", 3.0)] + [("zoom", 2.0)] * bool(outages) + [("pending", 1.0), ("cost", 1.6)] + \
        [("whole", 1.4)] * (xmax < end)
    fig, axes = plt.subplots(len(rows), 1, figsize=(13, 3 + 1.8 * sum(h for _, h in rows)),
                             gridspec_kw={"height_ratios": [h for _, h in rows]})
    ax = dict(zip([r for r, _ in rows], axes, strict=True))

    def stack(axis: Any, at: list[float], chosen: list[Any], legend: bool) -> None:
        if not pools:
            return
        polys = axis.stackplot([t / 3600 for t in at], *[[s.gpus_by_pool.get(p, 0) for s in chosen] for p in pools],
                               labels=[f"{p} ({'spot' if p in spot else 'on-demand'})" if legend else "_nolegend_"
                                       for p in pools], colors=[colours[p] for p in pools], step="post", alpha=0.9)
        for poly, pool in zip(polys, pools, strict=True):
            if pool not in spot:
                poly.set_hatch("//")
                poly.set_edgecolor("#555555")
        axis.step([t / 3600 for t in at], [s.demand_gpus for s in chosen], where="post", color="black",
                  linewidth=1.2, label="GPU demand (jobs submitted, not done)" if legend else None)

    def shade(axis: Any, label: bool) -> None:
        for k, o in enumerate(outages):
            axis.axvspan(o.start / 3600, o.end / 3600, color="#fde0dd", alpha=0.6, zorder=0,
                         label=f"no spot capacity in {o.zone}" if label and k == 0 else None)

    top = ax["gpus"]
    stack(top, grid, picked, legend=True)
    shade(top, label=True)
    top.set_ylabel("GPUs")
    top.set_xlim(0, xmax / 3600)
    heading = title or f"{result.profile.name} scheduler: GPUs provisioned vs demand"
    top.legend(loc="upper right", fontsize=7, ncol=2)
    if xmax < end:
        tail = figures["cost_usd"] - cumulative_cost(result, [xmax])[0]
        heading += (f"\nx axis cut at {xmax / 3600:.0f} h, just past the last submission; the run goes on to "
                    f"{end / 3600:.0f} h as the last jobs finish (\\${tail:,.0f} of its cost is after the cut)")
    top.set_title(heading, fontsize=10)

    if outages:
        zoom = ax["zoom"]
        first, last = min(o.start for o in outages), max(o.end for o in outages)
        lo, hi = max(first - 3600, 0.0), min(last + 3 * 3600, end)
        zgrid = [lo + (hi - lo) * i / (MAX_POINTS // 4 - 1) for i in range(MAX_POINTS // 4)]
        stack(zoom, zgrid, pick(zgrid), legend=False)
        shade(zoom, label=False)
        zoom.set_xlim(lo / 3600, hi / 3600)
        zoom.set_ylabel("GPUs")
        moved: dict[tuple[str, str], list[float]] = {}
        for e in result.episodes:
            if e.fallback_at is not None and e.fallback_pool is not None and lo <= e.fallback_at <= hi:
                moved.setdefault((e.pool, e.fallback_pool), []).append(e.fallback_at)
        delays = [e.fallback_at - e.failed_at for e in result.episodes if e.fallback_at is not None]
        for (src, dst), ats in sorted(moved.items()):
            zoom.vlines([t / 3600 for t in ats], 0, 1, transform=zoom.get_xaxis_transform(), colors=colours.get(
                src, "black"), linestyles="--", linewidth=1.2,
                label=f"fallback {src} -> {dst} (x{len(ats)})")
        where = ", ".join(f"{o.zone} {o.start / 3600:g}-{o.end / 3600:g} h" for o in outages)
        zoom.set_title(f"zoom on the spot outage ({where}): {len(delays)} fallback(s), each within "
                       f"{max(delays, default=0):.0f} s of the failed launch; on-demand pools hatched", fontsize=9)
        if moved:
            zoom.legend(loc="upper right", fontsize=7)

    bottom = ax["pending"]
    bottom.step(hours, [s.pending_pods for s in picked], where="post", color=PENDING_COLOUR)
    shade(bottom, label=False)
    bottom.set_ylabel("pending pods")
    bottom.set_xlim(0, xmax / 3600)

    cost_ax = ax["cost"]
    on_demand = {name: on_demand_price(result, pool) for name, pool in declared.items()}
    static = figures["static_fleet"]
    static_rate = static["cost_per_hour_usd"]
    span_h = static["hours"]
    cost_ax.plot(hours, cumulative_cost(result, grid), color="#2ca02c", linewidth=1.6,
                 label=f"gpuburst: {money(figures['cost_usd'])}" + (
                     f" (lower bound {money(figures['lower_bound_cost_usd'])})" if "lower_bound_cost_usd" in figures
                     else ""))
    cost_ax.plot(hours, cumulative_cost(result, grid, on_demand), color="#1f77b4", linewidth=1.2, linestyle="--",
                 label=f"the same nodes, on-demand only: {money(figures['on_demand_only_cost_usd'])}")
    cost_ax.plot(hours, [static_rate * min(h, span_h) for h in hours], color="#7f7f7f", linewidth=1.2,
                 linestyle=":", label=f"static on-demand fleet for the peak ({static['gpus']} GPUs): "
                 f"{money(figures['static_fleet_cost_usd'])}")
    cost_ax.set_ylabel("cost paid")
    cost_ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: money(v)))
    cost_ax.set_xlabel("hours")
    cost_ax.set_xlim(0, xmax / 3600)
    cost_ax.legend(loc="upper left", fontsize=7, title=f"whole run ({end / 3600:.0f} h)", title_fontsize=7)
    end_gpus = sum(samples[-1].gpus_by_pool.get(p, 0) for p in pools)
    if "whole" in ax:  # the panels above stop near the last submission: this one shows the run to its end
        whole = ax["whole"]
        wgrid = [end * i / (n - 1) for i in range(n)]
        stack(whole, wgrid, pick(wgrid), legend=False)
        shade(whole, label=False)
        whole.set_xlim(0, end / 3600)
        whole.set_ylabel("GPUs")
        whole.set_xlabel("hours")
        whole.set_title(f"the whole run ({end / 3600:.0f} h): GPUs provisioned vs demand as the last jobs finish; "
                        f"{end_gpus} GPU(s) left at the end", fontsize=9)
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    drawn = Drawn(title=top.get_title(), legend=[t.get_text() for t in top.get_legend().get_texts()],
                  colours={p: colours[p] for p in pools}, x_hours=top.get_xlim(),
                  outages_hours=[(o.start / 3600, o.end / 3600) for o in outages],
                  fallbacks=[t.get_text() for t in ax["zoom"].get_legend().get_texts()]
                  if "zoom" in ax and ax["zoom"].get_legend() else [],
                  cost=[t.get_text() for t in cost_ax.get_legend().get_texts()],
                  whole_hours=ax["whole"].get_xlim() if "whole" in ax else None, end_gpus=end_gpus)
    plt.close(fig)
    return drawn
