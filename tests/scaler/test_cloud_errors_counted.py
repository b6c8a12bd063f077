"""Failed cloud calls are counted once, by kind, wherever they fail (scaler.providers.counted): a scale-up the
cloud throttles and an interruption read it refuses both land in gpuburst_cloud_errors_total (issue 38: the
count used to be kept by hand in three places)."""

from __future__ import annotations

import pytest

from scaler.actuator import Actuator, RecordingKube
from scaler.core.planning.decisions import Plan, ScaleUp
from scaler.core.planning.snapshot import Snapshot
from scaler.metrics import Metrics
from scaler.providers.base import NotAuthorized, Throttled
from scaler.providers.counted import CountedProvider


class RefusingCloud:
    name = "refusing"

    def set_desired(self, pool: str, desired: int) -> None:
        raise Throttled(f"{pool}: slow down")

    def interruptions(self) -> list[object]:
        raise NotAuthorized("no sqs:ReceiveMessage")


def test_each_failed_call_is_counted_once_by_its_kind() -> None:
    metrics = Metrics()
    cloud = CountedProvider(RefusingCloud(), metrics)  # type: ignore[arg-type]
    actuator = Actuator(cloud, RecordingKube(), drain_timeout=600.0, metrics=metrics)
    actuator.act(Plan(now=0.0, scale_ups=[ScaleUp("gpu", "us-east-1a", 1, 1, ())]), Snapshot(0.0, [], [], {}))
    with pytest.raises(NotAuthorized):
        cloud.interruptions()
    assert metrics.cloud_errors.labels("throttled")._value.get() == 1
    assert metrics.cloud_errors.labels("auth")._value.get() == 1
