"""The PNG timeline: GPUs provisioned per pool (stacked, spot hatched apart from on-demand) against
GPU demand, and pending pods below. matplotlib with the Agg backend (no display needed)."""

from __future__ import annotations

import bisect
from pathlib import Path

from scaler.sim.records import SimResult

MAX_POINTS = 4000


def plot_timeline(result: SimResult, path: str | Path, title: str = "") -> None:
    import matplotlib  # noqa: PLC0415 - imported only when a plot is asked for

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    samples = result.samples
    if not samples:
        raise ValueError("nothing to plot: the simulation recorded no sample")
    end = max(result.end, samples[-1].t)
    times = [s.t for s in samples]
    n = min(MAX_POINTS, max(len(samples), 2))
    grid = [end * i / (n - 1) for i in range(n)]
    picked = [samples[max(bisect.bisect_right(times, t) - 1, 0)] for t in grid]
    hours = [t / 3600 for t in grid]
    spot = {p.name for p in result.config.pools if p.capacity_type == "spot"}
    pools = sorted({name for s in samples for name in s.gpus_by_pool}, key=lambda p: (p not in spot, p))

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(13, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    stacks = [[s.gpus_by_pool.get(p, 0) for s in picked] for p in pools]
    if pools:
        polys = top.stackplot(hours, *stacks, labels=[f"{p} ({'spot' if p in spot else 'on-demand'})"
                                                      for p in pools], step="post", alpha=0.8)
        for poly, pool in zip(polys, pools, strict=True):
            if pool not in spot:
                poly.set_hatch("//")
    top.step(hours, [s.demand_gpus for s in picked], where="post", color="black", linewidth=1.2,
             label="GPU demand (jobs submitted, not done)")
    top.set_ylabel("GPUs")
    top.legend(loc="upper right", fontsize=7, ncol=2)
    top.set_title(title or f"{result.profile.name} scheduler: GPUs provisioned vs demand")
    bottom.step(hours, [s.pending_pods for s in picked], where="post", color="tab:red")
    bottom.set_ylabel("pending pods")
    bottom.set_xlabel("hours")
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)
