"""Replay the shared GPU traces through the scaler: both traces x {default, binpack} placement, plus a
two-hour spot outage of one zone, random spot reclaims (0.05 per spot instance-hour, each with the
cloud's two-minute notice: drains through the Eviction API that gang jobs' PodDisruptionBudgets can
block, replacements planned by the core), PHILLY-A's gang jobs queued behind ProvisioningRequests as
Kueue queues them (`--provisioning-requests`) and the Alibaba trace's GPU-sharing pods on time-sliced pools
(examples/pools-aws-shared.yaml, `--gpu-sharing`), and PHILLY-A with a 32-GPU Capacity Block for its first
5 days in front of the spot/on-demand ladder (examples/pools-aws-reserved.yaml), both traces on the same
pools as DRA pools with each job's GPUs as a ResourceClaim (`--dra`), both traces with random GPU
failures (0.001 and 0.01 per GPU-hour) with and without the scaler's repair (the struck pods made again by their
Jobs; then restarting in place on the dead GPU, `--restart-policy OnFailure`), PHILLY-A with a CapacityBuffer of 8 1-GPU
pods (`--buffer 8`), PHILLY-A with warm pools on the cheapest on-demand 1-GPU pools (`--warm`), and both
traces on the shared two-shapes
pools (../shared/pools/two-shapes.yaml: one 1-GPU and one 8-GPU shape, the adaptive unneeded time's
acceptance), and PHILLY-A on the pools `scaler tune` wrote from those two shapes' candidates
(examples/pools-aws-tuned.yaml). Every stopped job loses the work since its last checkpoint (every
1800 s). Spot is priced and reclaimed as the EC2 Spot Advisor's data says (scaler/sim/spot.py) unless a row
overrides it. Every run is compared with cluster-autoscaler's defaults on the same pools (scaler/sim/ca_baseline.py):
the same trace, pools, placement and cloud events replayed once more under its policy (one replay per distinct
environment: gpuburst's own features, a buffer, warm pools, ProvisioningRequests, repair, are not CA's). Prints the
command line of each run and one line of figures; these are the figures docs/simulator.md and the README quote.

    .venv/bin/python bench/simulate_traces.py [--traces DIR] [--pools FILE] [--out DIR] [--jobs N] [--readme FILE]
                                              [--plots DIR]
                                              [--unneeded-time S]

With --unneeded-time, every run's pools file gets `timings: {unneeded_time: S}`: the fixed timer the adaptive
unneeded time is measured against (600: cluster-autoscaler's 10 minutes).

With --readme, the table between the markers `<!-- bench/simulate_traces.py: begin -->` and its end marker in
that file is replaced by the figures of this run (bench/doc_blocks.py), so the README never quotes a figure
typed by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from doc_blocks import check_block, write_block

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scaler.sim.repair_plot import plot_repair, repair_pairs  # noqa: E402
from scaler.sim.report import ca_section, one_line  # noqa: E402
from scaler.sim.simulate_command import simulate  # noqa: E402

OUTAGE = "us-east-1a:36000:43200"  # hours 10 to 12 of PHILLY-A: the first busy morning
INTERRUPTION_RATE = 0.05  # spot reclaims per spot instance-hour
GPU_FAILURE_RATES = (0.001, 0.01)  # GPU failures per GPU-hour (issue 40: repair must pay at both)
CHECKPOINT = 1800.0  # seconds of run between a job's checkpoints (the simulator's default)
SHARED_POOLS = "examples/pools-aws-shared.yaml"
MIG_POOLS = "examples/pools-aws-mig.yaml"  # pools-aws.yaml plus MIG mixed p4d pools (A100s)
# pools-aws.yaml plus dynamic MIG pools of single-H100 p5.4xlarge nodes (each GPU whole or cut per claim by the DRA
# driver; issue 40)
MIG_DYNAMIC_POOLS = "examples/pools-aws-mig-dynamic.yaml"
# AKS: MIG as one profile per agent pool (single strategy), here on the 1-GPU A100 VM, beside the whole-GPU pools
AZURE_POOLS = "examples/pools-azure.yaml"
AZURE_MIG_POOLS = "examples/pools-azure-mig.yaml"
RESERVED_POOLS = "examples/pools-aws-reserved.yaml"  # the usual pools plus a Capacity Block (issue 25)
BUFFER_GPUS = 8  # a CapacityBuffer of 8 1-GPU placeholder pods (issue 27)
# `python -m scaler tune --trace ../shared/traces/PHILLY-A.csv --pools ../shared/pools/two-shapes.yaml --p95-max 260`
# wrote it (issue 30)
TUNED_POOLS = "examples/pools-aws-tuned.yaml"
TWO_SHAPES = "two-shapes.yaml"  # beside the traces' folder: ../shared/pools (issue 27)
WEEK_2 = 168.0  # hours: the Alibaba trace's second week, a held-out slice (`--start-hour`)
WARM = 16  # stopped instances in each warm pool of `--warm` (the cheapest on-demand 1-GPU pools; issue 27)


def without_min_gpus(pools: str, directory: Path) -> str:
    """The same pools without their min-gpus taints: what placement costs when nodes are not kept whole."""
    data = yaml.safe_load(Path(pools).read_text(encoding="utf-8"))
    for pool in data["pools"]:
        pool.pop("min_pod_gpus", None)
    path = directory / f"untainted-{Path(pools).name}"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def with_fixed_timer(pools: str, seconds: float, directory: Path) -> str:
    """The same pools with every unneeded node removed after `seconds` (timings.unneeded_time)."""
    data = yaml.safe_load(Path(pools).read_text(encoding="utf-8"))
    data.setdefault("timings", {})["unneeded_time"] = seconds
    path = directory / f"fixed{seconds:g}-{len(list(directory.iterdir()))}-{Path(pools).name}"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def runs(traces: Path, pools: str, untainted: str | None) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for trace in ("PHILLY-A.csv", "ALIBABA-OPENB2023-A.csv"):
        for scheduler in ("default", "binpack"):
            out.append((f"{trace} {scheduler}", {"trace": str(traces / trace), "pools": pools,
                                                 "scheduler": scheduler, "outages": []}))
    out.append((f"PHILLY-A.csv default, spot outage {OUTAGE}",
                {"trace": str(traces / "PHILLY-A.csv"), "pools": pools, "scheduler": "default", "outages": [OUTAGE]}))
    out.append((f"PHILLY-A.csv default, spot reclaims {INTERRUPTION_RATE}/instance-h, checkpoints {CHECKPOINT:g} s",
                {"trace": str(traces / "PHILLY-A.csv"), "pools": pools, "scheduler": "default", "outages": [],
                 "interruption_rate": INTERRUPTION_RATE, "checkpoint_interval": CHECKPOINT}))
    for in_place in (False, True):  # a struck pod made again by its Job; or restarting in place on the dead GPU
        for trace in ("PHILLY-A.csv", "ALIBABA-OPENB2023-A.csv"):
            for rate in GPU_FAILURE_RATES:
                for repair in (True, False):
                    restart = ", pods restart in place (--restart-policy OnFailure)" if in_place else ""
                    out.append((f"{trace} default, GPU failures {rate}/GPU-h{restart}, "
                                f"repair {'on' if repair else 'off'}",
                                {"trace": str(traces / trace), "pools": pools, "scheduler": "default", "outages": [],
                                 "gpu_failure_rate": rate, "repair": repair,
                                 **({"restart_in_place": True} if in_place else {})}))
    out.append(("PHILLY-A.csv default, gangs queued as ProvisioningRequests (--provisioning-requests)",
                {"trace": str(traces / "PHILLY-A.csv"), "pools": pools, "scheduler": "default", "outages": [],
                 "provisioning_requests": True}))
    out.append(("ALIBABA-OPENB2023-A.csv default, time-sliced pools (--gpu-sharing)",
                {"trace": str(traces / "ALIBABA-OPENB2023-A.csv"), "pools": SHARED_POOLS, "scheduler": "default",
                 "outages": [], "gpu_sharing": True}))
    # issue 40: the same on a held-out slice, the trace's second week replayed on its own
    out.append((f"ALIBABA-OPENB2023-A.csv second week (--start-hour {WEEK_2:g}), time-sliced pools (--gpu-sharing)",
                {"trace": str(traces / "ALIBABA-OPENB2023-A.csv"), "pools": SHARED_POOLS, "scheduler": "default",
                 "outages": [], "gpu_sharing": True, "start_hour": WEEK_2}))
    for trace in ("PHILLY-A.csv", "ALIBABA-OPENB2023-A.csv"):  # issue 24: the same pools as DRA pools
        out.append((f"{trace} default, DRA pools, GPUs as ResourceClaims (--dra)",
                    {"trace": str(traces / trace), "pools": pools, "scheduler": "default", "outages": [],
                     "dra": True}))
    out.append((f"PHILLY-A.csv default, CapacityBuffer of {BUFFER_GPUS} 1-GPU pods (--buffer {BUFFER_GPUS})",
                {"trace": str(traces / "PHILLY-A.csv"), "pools": pools, "scheduler": "default", "outages": [],
                 "buffer_gpus": BUFFER_GPUS}))
    # issue 24: jobs of a GPU share on MIG slices, as nvidia.com/mig-* on a fixed layout, or (issue 40) as claims
    # on dynamic MIG pools, where the DRA driver cuts each GPU for the claims allocated
    for label, mig_pools, dra in (("MIG pools (--gpu-sharing)", MIG_POOLS, False),
                                  ("dynamic MIG pools (--gpu-sharing --dra)", MIG_DYNAMIC_POOLS, True)):
        out.append((f"ALIBABA-OPENB2023-A.csv default, {label}",
                    {"trace": str(traces / "ALIBABA-OPENB2023-A.csv"), "pools": mig_pools, "scheduler": "default",
                     "outages": [], "gpu_sharing": True, "dra": dra}))
    # issue 40: MIG where a node is one GPU (Azure), against the same cloud's whole-GPU pools
    out.append(("ALIBABA-OPENB2023-A.csv default, Azure pools (pools-azure.yaml)",
                {"trace": str(traces / "ALIBABA-OPENB2023-A.csv"), "pools": AZURE_POOLS, "scheduler": "default",
                 "outages": []}))
    out.append(("ALIBABA-OPENB2023-A.csv default, Azure MIG single pools on 1-GPU A100s (--gpu-sharing, "
                "pools-azure-mig.yaml)",
                {"trace": str(traces / "ALIBABA-OPENB2023-A.csv"), "pools": AZURE_MIG_POOLS, "scheduler": "default",
                 "outages": [], "gpu_sharing": True}))
    out.append(("PHILLY-A.csv default, 32-GPU Capacity Block for the first 5 days (pools-aws-reserved.yaml)",
                {"trace": str(traces / "PHILLY-A.csv"), "pools": RESERVED_POOLS, "scheduler": "default",
                 "outages": []}))
    out.append((f"PHILLY-A.csv default, warm pools of {WARM} stopped instances (--warm {WARM})",
                {"trace": str(traces / "PHILLY-A.csv"), "pools": pools, "scheduler": "default", "outages": [],
                 "warm_size": WARM}))
    two_shapes = traces.parent / "pools" / TWO_SHAPES
    if two_shapes.exists():
        for trace in ("ALIBABA-OPENB2023-A.csv", "PHILLY-A.csv"):
            out.append((f"{trace} binpack, two-shapes pools",
                        {"trace": str(traces / trace), "pools": str(two_shapes), "scheduler": "binpack",
                         "outages": []}))
    out.append(("PHILLY-A.csv default, the pools scaler tune wrote from the two-shapes candidates "
                "(pools-aws-tuned.yaml)",
                {"trace": str(traces / "PHILLY-A.csv"), "pools": TUNED_POOLS, "scheduler": "default", "outages": []}))
    if untainted:
        for trace in ("PHILLY-A.csv", "ALIBABA-OPENB2023-A.csv"):
            for scheduler in ("default", "binpack"):
                out.append((f"{trace} {scheduler}, pools without min-gpus taints",
                            {"trace": str(traces / trace), "pools": untainted, "scheduler": scheduler, "outages": []}))
    return out


# What a cluster-autoscaler replay keeps of a run: the trace, pools, placement and cloud events (not gpuburst's
# own features).
CA_KEYS = ("trace", "start_hour", "pools", "scheduler", "outages", "interruption_rate", "checkpoint_interval",
           "gpu_failure_rate", "restart_in_place", "gpu_sharing", "dra")


def ca_run(kw: dict[str, Any]) -> dict[str, Any]:
    """The cluster-autoscaler replay of a run (CA_KEYS of it, its policy)."""
    return {**{k: kw[k] for k in CA_KEYS if k in kw}, "policy": "cluster-autoscaler"}


def command_line(kw: dict[str, Any]) -> str:
    outages = "".join(f" --spot-outage {o}" for o in kw["outages"])
    if kw.get("start_hour"):
        outages += f" --start-hour {kw['start_hour']:g}"
    if kw.get("interruption_rate") is not None:
        outages += f" --interruption-rate {kw['interruption_rate']}"
    if kw.get("gpu_sharing"):
        outages += " --gpu-sharing"
    if kw.get("dra"):
        outages += " --dra"
    if kw.get("provisioning_requests"):
        outages += " --provisioning-requests"
    if kw.get("buffer_gpus"):
        outages += f" --buffer {kw['buffer_gpus']}"
    if kw.get("warm_size"):
        outages += f" --warm {kw['warm_size']}"
    if "checkpoint_interval" in kw:
        outages += f" --checkpoint-interval {kw['checkpoint_interval']:g}"
    if kw.get("gpu_failure_rate"):
        outages += f" --gpu-failure-rate {kw['gpu_failure_rate']}" + ("" if kw.get("repair", True) else " --no-repair")
    if kw.get("restart_in_place"):
        outages += " --restart-policy OnFailure"
    if "fixed" in Path(kw["pools"]).name:
        outages += " (pools file with timings.unneeded_time set)"
    if "untainted-" in kw["pools"]:
        return f"(pools: {Path(kw['pools']).name[len('untainted-'):]} with every min_pod_gpus removed)"
    if kw.get("policy"):
        outages += f" --policy {kw['policy']}"
    return (f"python -m scaler simulate --trace {kw['trace']} --pools {kw['pools']} "
            f"--scheduler {kw['scheduler']}{outages}")


def markdown(rows: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> str:
    """The README table. A run with jobs that never started says how many, and its paid / demand also shows the
    ratio on the work actually done (demand counts jobs that never ran)."""
    lines = [
        "| run | jobs done | never started | demand GPU-h | fractional demand GPU-h | paid GPU-h | paid / demand "
        "| cost $ | cluster-autoscaler defaults $ (gpuburst saves) | on-demand only $ | lower bound $ | spot share "
        "| pending p50 / p95 / max s | fallbacks (max delay s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name_of_run, kw, r in rows:
        label = name_of_run
        fallback = f"{r['fallback_events']} ({r['fallback_delay_max_s']})" if r["fallback_events"] else "-"
        ratio = f"**{r['paid_over_demand']:.4f}**"
        if r["jobs_never_started"] and r["paid_over_demand_done"] is not None:
            ratio += f" ({r['paid_over_demand_done']:.4f} on work done)"
        for name, block in (r.get("prepaid") or {}).items():
            label += (f" ({name}: utilisation {block['utilisation']}, {block['utilisation_while_pending']} while pods "
                      f"it fits waited; {block['jobs_moved_off']} jobs moved off, "
                      f"{len(block['jobs_lost_at_end'])} lost at its end)")
        if r.get("warm_pools"):
            label += (f" (1-GPU jobs' pending p95 {r['pending_1gpu_p95_s']:.0f} s; the warm pools cost "
                      f"${r['warm_pools']['cost_usd']:,.0f}, {r['warm_pools']['started']} instances started)")
        failures = r.get("failures") or {}
        if failures.get("gpu_failures") or kw.get("interruption_rate"):
            label += f" (GPU-h lost since the last checkpoint: {failures['gpu_hours_lost']}"
            if failures.get("gpu_failures"):
                f = failures
                label += (f", {f['gpu_hours_lost_to_failures']} of it by the jobs on the GPUs that failed; "
                          f"{f['gpu_failures']} GPU failures on {f['failed_nodes']} nodes, "
                          f"{f['repaired_nodes']} repaired")
                if f["repair_delay_mean_s"] is not None:
                    label += f", mean repair delay {f['repair_delay_mean_s']} s"
                if r["jobs_completed"] < r["jobs_total"]:
                    label += (f"; {r['jobs_total'] - r['jobs_completed']} jobs never finished, "
                              f"{r['demand_gpu_hours'] - r['demand_done_gpu_hours']:,.1f} GPU-h of their work undone")
            label += ")"
        buffer = r.get("buffer")
        if buffer:
            b = buffer
            label += (f" ({b['jobs_that_fit']} jobs fit a placeholder: pending p50 {b['pending_p50_s']:.0f} / "
                      f"p95 {b['pending_p95_s']:.0f} / max {b['pending_max_s']:.0f} s)")
        lines.append(
            f"| {label} | {r['jobs_completed']}/{r['jobs_total']} | {r['jobs_never_started']} "
            f"| {r['demand_gpu_hours']:,.1f} | {r['demand_fractional_gpu_hours']:,.1f} | {r['paid_gpu_hours']:,.1f} "
            f"| {ratio} | {r['cost_usd']:,.0f} | {versus(r['cost_usd'], r.get('cluster_autoscaler'))} "
            f"| {r['on_demand_only_cost_usd']:,.0f} | {r['lower_bound_cost_usd']:,.0f} | {r['spot_share']} "
            f"| {r['pending_p50_s']:.0f} / **{r['pending_p95_s']:.0f}** / {r['pending_max_s']:.0f} | {fallback} |"
        )
    return "\n".join(lines)


def versus(cost: float, ca: dict[str, Any] | None) -> str:
    """The cluster-autoscaler replay's cost, with what gpuburst saves against it."""
    if not ca or not ca["cost_usd"]:
        return "-"
    return f"{ca['cost_usd']:,.0f} ({1 - cost / ca['cost_usd']:.0%})"


def run_one(kw: dict[str, Any]) -> dict[str, Any]:
    """One run's report, from its arguments as `runs` gives them (a `seed` among them, 0 without)."""
    _, report = simulate(kw["trace"], kw["pools"], start_hour=kw.get("start_hour", 0.0), scheduler=kw["scheduler"],
                         outages=kw["outages"], seed=kw.get("seed", 0),
                         interruption_rate=kw.get("interruption_rate"), gpu_sharing=kw.get("gpu_sharing", False),
                         provisioning_requests=kw.get("provisioning_requests", False), dra=kw.get("dra", False),
                         gpu_failure_rate=kw.get("gpu_failure_rate", 0.0), repair=kw.get("repair", True),
                         restart_in_place=kw.get("restart_in_place", False),
                         checkpoint_interval=kw.get("checkpoint_interval", CHECKPOINT),
                         buffer_gpus=kw.get("buffer_gpus", 0), warm_size=kw.get("warm_size", 0),
                         policy=kw.get("policy", "gpuburst"))
    return report


def main() -> int:
    # The whole docstring: its first line alone stops mid-sentence.
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", default=str(ROOT.parent / "shared" / "traces"), metavar="DIR",
                        help="folder with PHILLY-A.csv and ALIBABA-OPENB2023-A.csv (default: %(default)s)")
    parser.add_argument("--pools", default="examples/pools-aws.yaml", metavar="FILE",
                        help="pools file of every run but the time-sliced one (default: %(default)s)")
    parser.add_argument("--out", help="also write each run's JSON report into this directory")
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (default 2)")
    parser.add_argument("--readme", help="rewrite the results table between the markers in this file")
    parser.add_argument("--plots", metavar="DIR", help="write DIR/repair.png: the GPU failure runs, repair on beside "
                        "off (needs matplotlib)")
    parser.add_argument("--unneeded-time", type=float, metavar="S",
                        help="every pools file with timings.unneeded_time: S (the fixed timer, as a baseline)")
    parser.add_argument("--no-untainted", action="store_true",
                        help="skip the runs without the pools' min-gpus taints (what whole nodes save)")
    args = parser.parse_args()
    traces = Path(args.traces)
    if not (traces / "PHILLY-A.csv").exists():
        print(f"no traces in {traces}: pass --traces DIR", file=sys.stderr)
        return 2
    if args.readme:
        check_block(Path(args.readme), "bench/simulate_traces.py")
    with tempfile.TemporaryDirectory() as tmp:
        untainted = None if args.no_untainted else without_min_gpus(args.pools, Path(tmp))
        todo = runs(traces, args.pools, untainted)
        if args.unneeded_time is not None:
            todo = [(label, {**kw, "pools": with_fixed_timer(kw["pools"], args.unneeded_time, Path(tmp))})
                    for label, kw in todo]
        baselines = list({json.dumps(ca_run(kw), sort_keys=True): ca_run(kw) for _, kw in todo}.values())
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            done = list(pool.map(run_one, [kw for _, kw in todo] + baselines))
        reports, ca_reports = done[:len(todo)], done[len(todo):]
        by_env = {json.dumps(kw, sort_keys=True): ca_section(r) for kw, r in zip(baselines, ca_reports, strict=True)}
        for (_, kw), report in zip(todo, reports, strict=True):
            report["cluster_autoscaler"] = by_env[json.dumps(ca_run(kw), sort_keys=True)]
    for (label, kw), report in zip(todo, reports, strict=True):
        print(f"# {label}: {command_line(kw)} (against: {command_line(ca_run(kw))})")
        print(one_line(report))
        if args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            name = label.replace(" ", "_").replace(",", "").replace(":", "-").replace("/", "-").replace(".csv", "")
            (out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.plots:
        Path(args.plots).mkdir(parents=True, exist_ok=True)
        plot_repair(repair_pairs([(kw, r) for (_, kw), r in zip(todo, reports, strict=True)]),
                    Path(args.plots) / "repair.png")
        print(f"plot: {Path(args.plots) / 'repair.png'}")
    if args.readme:
        rows = [(label, kw, r) for (label, kw), r in zip(todo, reports, strict=True)]
        write_block(Path(args.readme), "bench/simulate_traces.py", markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
