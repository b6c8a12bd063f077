"""docs/operations.md lists every metric the scaler exports, with the labels it has: the alerts and the dashboard
use them, and an operator reads that table to write their own."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from scaler.metrics import Metrics

OPERATIONS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def _exported() -> dict[str, set[str]]:
    """Name (as scraped: counters end in _total) -> label names, of every metric Metrics() registers."""
    out: dict[str, set[str]] = {}
    for attribute in vars(Metrics()).values():
        if isinstance(attribute, MetricWrapperBase):
            suffix = "_total" if attribute._type == "counter" else ""
            out[attribute._name + suffix] = set(attribute._labelnames)
    return out


def _documented() -> dict[str, set[str]]:
    text = OPERATIONS.read_text(encoding="utf-8")
    table = text.split("**Metrics** on `:8085/metrics`:", 1)[1].split("\n\n", 2)[1]
    out = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip("|").split("|")]
        match = re.fullmatch(r"`(gpuburst_\w+)`", cells[0])
        if match:
            out[match.group(1)] = set(re.findall(r"`(\w+)`", cells[1]))
    return out


def test_every_exported_metric_is_documented_with_its_labels() -> None:
    exported, documented = _exported(), _documented()
    assert len(exported) >= 27
    assert sorted(set(exported) - set(documented)) == [], "exported, not in docs/operations.md"
    assert sorted(set(documented) - set(exported)) == [], "in docs/operations.md, not exported"
    for name, labels in exported.items():
        assert documented[name] == labels, name


def test_each_metric_has_one_row() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    table = text.split("**Metrics** on `:8085/metrics`:", 1)[1].split("\n\n", 2)[1]
    names = re.findall(r"^\| `(gpuburst_\w+)` \|", table, re.M)
    assert sorted(n for n in set(names) if names.count(n) > 1) == []
