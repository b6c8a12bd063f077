"""`python -m scaler shadow-report --record FILE`: what gpuburst would have done beside the cluster's autoscaler.

Reads the record `python -m scaler run --shadow FILE` appends to (scaler.shadow says how each figure is counted)
and prints, for the managed pools: node-hours and cost as the cluster ran them and as gpuburst would have, the
pods gpuburst would have started sooner, and the nodes it would have removed sooner. `--json` prints the same
as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from scaler.shadow import read


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", required=True, metavar="FILE", help="the file `run --shadow FILE` wrote")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _change(new: float, old: float) -> str:
    return f"{(new - old) / old:+.1%}" if old else "n/a"


def main(args: argparse.Namespace) -> int:
    try:
        s = read(args.record).summary()
    except (OSError, ValueError) as err:
        print(f"error: python -m scaler shadow-report: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    c, g = s["cluster"], s["gpuburst"]
    lines = [
        f"{args.record}: {s['passes']} passes over {s['hours']:.2f} h",
        f"node-hours: cluster {c['node_hours']:,.2f}, gpuburst {g['node_hours']:,.2f} "
        f"({_change(g['node_hours'], c['node_hours'])})",
        f"cost: cluster ${c['cost']:,.2f}, gpuburst ${g['cost']:,.2f} ({_change(g['cost'], c['cost'])})",
        f"pods gpuburst would have started sooner: {s['pods_started_sooner']}" + (
            f" (median {s['sooner_median_s']:g} s, max {s['sooner_max_s']:g} s sooner)"
            if s["pods_started_sooner"] else ""),
        f"nodes gpuburst would have removed sooner: {s['nodes_removed_sooner']} "
        f"({s['node_hours_saved_by_removals']:,.2f} node-hours)",
    ]
    print("\n".join(lines))
    return 0
