"""The one place failed cloud calls are counted: a `PoolProvider` that hands every call to the provider it
wraps and counts each ProviderError by its kind (`gpuburst_cloud_errors_total`) before raising it on.
Whoever acts or observes through it (the actuator, the pass, the loop's retries) only decides what the
error means for it. `scaler.loop.Runtime` wraps the provider it is given once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from scaler.core.model.interruption import Interruption
from scaler.core.planning.snapshot import PoolObservation
from scaler.metrics import Metrics
from scaler.ports import PoolProvider
from scaler.providers.base import ProviderError

T = TypeVar("T")


class CountedProvider:
    def __init__(self, provider: PoolProvider, metrics: Metrics) -> None:
        self.provider = provider
        self.metrics = metrics
        self.name = provider.name

    def _counted(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except ProviderError as err:
            self.metrics.cloud_errors.labels(err.kind).inc()
            raise

    def observe(self, now: float) -> dict[str, PoolObservation]:
        return self._counted(lambda: self.provider.observe(now))

    def set_desired(self, pool: str, desired: int) -> None:
        self._counted(lambda: self.provider.set_desired(pool, desired))

    def delete_node(self, pool: str, provider_id: str) -> None:
        self._counted(lambda: self.provider.delete_node(pool, provider_id))

    def pool_of(self, provider_id: str) -> str | None:
        return self._counted(lambda: self.provider.pool_of(provider_id))

    def interruptions(self) -> list[Interruption]:
        return self._counted(self.provider.interruptions)

    def acknowledge(self, notices: Iterable[Interruption]) -> None:
        self._counted(lambda: self.provider.acknowledge(notices))
