"""The actuator's failed cloud calls are the last pass's, not every pass's since `scaler run` started
(issue 38: the list grew for ever in a long-running scaler; the simulator adds each pass's to its report)."""

from __future__ import annotations

from scaler.actuator import Actuator, RecordingKube
from scaler.core.planning.decisions import Plan, ScaleUp
from scaler.core.planning.snapshot import Snapshot
from scaler.providers.base import ProviderError


class RefusingCloud:
    """A cloud that refuses every size change (a throttled API)."""

    def set_desired(self, pool: str, desired: int) -> None:
        raise ProviderError(f"throttled: {pool} -> {desired}")


def test_a_long_running_actuator_keeps_only_the_last_passs_cloud_errors() -> None:
    actuator = Actuator(RefusingCloud(), RecordingKube(), drain_timeout=600.0)  # type: ignore[arg-type]
    for i in range(50):
        now = 10.0 * i
        plan = Plan(now=now, scale_ups=[ScaleUp("gpu", "us-east-1a", 1, i + 1, ())])
        actuator.act(plan, Snapshot(now=now, pending=[], nodes=[], pools={}))
    assert actuator.errors == ["scale-up gpu: throttled: gpu -> 50"]
