"""The planner against the real kube-scheduler on one small random cluster (`make scheduler-diff` runs three
larger ones): every pending pod's verdict (fits-existing and its node, or no room on existing nodes) must be
what kube-scheduler does with the pod."""

from __future__ import annotations

from tests.controlplane.fixtures import Cluster
from tests.controlplane.scheduler_diff import Report, describe, run_seed


def test_the_planner_places_pods_where_kube_scheduler_binds_them(cluster: Cluster) -> None:
    report = Report()
    run_seed(cluster.plane, 7, 60, report, agent=cluster.agent)
    outcomes = report.outcomes
    assert len(outcomes) == 60 + 60 // 8  # (and a pod in eight claiming shares of GPU memory)
    # The cluster is tight enough that both answers occur, and DRA claims are a good part of it.
    assert any(o.scheduled for o in outcomes) and any(o.scheduled is None for o in outcomes)
    assert sum(o.dra for o in outcomes) >= 0.4 * len(outcomes)
    disagreements = [describe(o) for o in outcomes if not o.agree]
    assert not disagreements, "\n".join(disagreements)
