"""Shadow mode: gpuburst beside the cluster's own autoscaler, deciding every pass and acting on nothing.

`ShadowRecorder` is `scaler run --shadow FILE`'s actuator: a `Recorder` (it changes nothing) that appends
each pass to FILE as one JSON line: the time, the nodes of the managed pools as the cluster has them (from
the Node objects) and the pending pods (each left out when it is what the line before said, so a quiet week
stays small), and what gpuburst would have done (its scale-ups with the pods they are for, its removals). The
first line holds each pool's price and boot time.

`Ledger` reads those lines in order and keeps both accounts; `python -m scaler shadow-report` prints them
and `run --shadow` exports them as metrics while it runs:
- the cluster's node-hours and cost: each managed node from one pass to the next, at its pool's price;
- gpuburst's: the same, less each node from the first of the consecutive passes in which gpuburst would
  have removed it until the cluster removed it, plus, for each pod gpuburst would have bought capacity
  for, its share of those nodes from that decision until the cluster started the pod;
- the pods gpuburst would have started sooner: those the cluster started later than gpuburst's decision
  plus its pool's boot time, and by how much;
- the nodes it would have removed sooner, and the node-hours that saves.
It is an estimate at the passes' resolution (10 s by default): what gpuburst's nodes would have done after
the cluster placed the pods is not modelled, nor interruptions of nodes it would have bought.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, TextIO

from scaler.actuator import Recorder
from scaler.core.config.settings import ScalerConfig
from scaler.core.planning.decisions import Plan
from scaler.core.planning.snapshot import Snapshot
from scaler.metrics import Metrics

JSON = dict[str, Any]
HOUR = 3600.0


def header(config: ScalerConfig) -> JSON:
    t = config.timings
    return {"kind": "start", "cluster": config.cluster, "pools": {
        p.name: {"usd_per_hour": round(config.price(p), 6), "boot_s": t.gpu_boot if p.gpus else t.cpu_boot}
        for p in config.pools}}


def record(plan: Plan, snapshot: Snapshot, pools: set[str]) -> JSON:
    return {
        "kind": "pass", "t": snapshot.now,
        "nodes": {n.name: n.pool for n in snapshot.nodes if n.pool in pools},
        "pending": sorted(p.key for p in snapshot.pending),
        "scale_ups": [{"pool": u.pool, "count": u.count, "pods": list(u.pods)} for u in plan.scale_ups],
        "scale_downs": [{"pool": d.pool, "node": d.node} for d in plan.scale_downs],
    }


@dataclass
class Side:
    node_hours: float = 0.0
    cost: float = 0.0


@dataclass
class Ledger:
    """Both accounts, from the record's lines in order (`add`)."""

    pools: dict[str, JSON] = field(default_factory=dict)
    cluster: Side = field(default_factory=Side)
    gpuburst: Side = field(default_factory=Side)
    sooner: dict[str, float] = field(default_factory=dict)  # pod -> seconds gpuburst would have started it sooner
    removed: dict[str, float] = field(default_factory=dict)  # node -> node-hours gpuburst would have saved
    passes: int = 0
    first: float | None = None
    last: JSON | None = None
    _removing: dict[str, str] = field(default_factory=dict)  # node -> pool, while gpuburst keeps removing it
    _bought: dict[str, tuple[float, str, float]] = field(default_factory=dict)  # pod -> (decided at, pool, share)

    def add(self, line: JSON) -> None:
        if line.get("kind") == "start":
            self.pools.update(line["pools"])
            return
        before = self.last or {"nodes": {}, "pending": []}
        line = {"nodes": before["nodes"], "pending": before["pending"], **line}  # left out: unchanged
        t = float(line["t"])
        if self.last is not None:
            self._interval(self.last, t - float(self.last["t"]))
        self._decisions(line, t)
        self.passes += 1
        self.first = t if self.first is None else self.first
        self.last = line

    def _price(self, pool: str) -> float:
        return float(self.pools.get(pool, {}).get("usd_per_hour", 0.0))

    def _interval(self, prev: JSON, dt: float) -> None:
        """What ran between two passes: the earlier pass's nodes, and gpuburst's differences from them."""
        hours = max(dt, 0.0) / HOUR
        for node, pool in prev["nodes"].items():
            self.cluster.node_hours += hours
            self.cluster.cost += hours * self._price(pool)
            if node in self._removing:
                self.removed[node] = self.removed.get(node, 0.0) + hours
            else:
                self.gpuburst.node_hours += hours
                self.gpuburst.cost += hours * self._price(pool)
        for _pod, (_, pool, share) in self._bought.items():
            self.gpuburst.node_hours += share * hours
            self.gpuburst.cost += share * hours * self._price(pool)

    def _decisions(self, line: JSON, t: float) -> None:
        pending = set(line["pending"])
        for pod in [p for p in self._bought if p not in pending]:  # the cluster started it (or it went)
            decided, pool, _ = self._bought.pop(pod)
            ready = decided + float(self.pools.get(pool, {}).get("boot_s", 0.0))
            if t > ready:
                self.sooner[pod] = t - ready
        for up in line["scale_ups"]:
            pods = [p for p in up["pods"] if p in pending and p not in self._bought]
            for pod in pods:
                self._bought[pod] = (t, up["pool"], up["count"] / max(len(up["pods"]), 1))
        # A removal holds while gpuburst keeps planning it (its dry run never drains, so it replans each pass).
        self._removing = {d["node"]: d["pool"] for d in line["scale_downs"] if d["node"] in line["nodes"]}

    def summary(self) -> JSON:
        span = (float(self.last["t"]) - self.first) / HOUR if self.last is not None and self.first is not None else 0
        waits = sorted(self.sooner.values())
        return {
            "passes": self.passes, "hours": round(span, 3),
            "cluster": {"node_hours": round(self.cluster.node_hours, 3), "cost": round(self.cluster.cost, 2)},
            "gpuburst": {"node_hours": round(self.gpuburst.node_hours, 3), "cost": round(self.gpuburst.cost, 2)},
            "pods_started_sooner": len(waits),
            "sooner_median_s": round(median(waits), 1) if waits else None,
            "sooner_max_s": round(waits[-1], 1) if waits else None,
            "nodes_removed_sooner": len(self.removed),
            "node_hours_saved_by_removals": round(sum(self.removed.values()), 3),
        }


def read(path: str | Path) -> Ledger:
    """The ledger of a record file; a line that is not a record raises ValueError naming the file and line."""
    ledger = Ledger()
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
                ledger.add(line)
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{path}:{number}: not a shadow record line ({err})") from None
    return ledger


class ShadowRecorder(Recorder):
    """The dry run's actuator, appending each pass to the record and keeping the ledger's metrics current."""

    def __init__(self, path: str | Path, config: ScalerConfig, metrics: Metrics) -> None:
        super().__init__()
        self.path = Path(path)
        self.pools = {p.name for p in config.pools}
        self.metrics = metrics
        self.ledger = read(self.path) if self.path.exists() else Ledger()  # a restart goes on with the record
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 -- open for the whole run
        self._write(header(config))
        self._export()

    def _write(self, line: JSON) -> None:
        self.ledger.add(line)
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
        self._file.flush()

    def act(self, plan: Plan, snapshot: Snapshot) -> None:
        super().act(plan, snapshot)
        line = record(plan, snapshot, self.pools)
        last = self.ledger.last
        for key in ("nodes", "pending"):
            if last is not None and line[key] == last[key]:
                del line[key]
        self._write(line)
        self._export()

    def _export(self) -> None:
        s = self.ledger.summary()
        for side in ("cluster", "gpuburst"):
            self.metrics.shadow_node_hours.labels(side).set(s[side]["node_hours"])
            self.metrics.shadow_cost.labels(side).set(s[side]["cost"])
        self.metrics.shadow_sooner.set(s["pods_started_sooner"])
        self.metrics.shadow_removed.set(s["nodes_removed_sooner"])

    def close(self) -> None:
        self._file.close()
