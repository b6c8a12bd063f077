"""The one interface every cloud sits behind. The loop and the simulator only ever call this."""

from __future__ import annotations

from typing import Literal, Protocol

from scaler.core.pool import Pool
from scaler.core.snapshot import PoolObservation

ErrorKind = Literal["throttled", "server", "auth", "not-found", "invalid", "network", "other"]


class ProviderError(Exception):
    """A cloud call that failed; `kind` feeds the cloud-errors metric, `retryable` the loop's backoff."""

    def __init__(self, message: str, *, kind: ErrorKind = "other", retryable: bool = True) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.retryable = retryable


def check_size(provider: str, pool: str, desired: int, min_size: int, max_size: int) -> None:
    """The one guard every provider runs before it sets a size: never beyond max, never below min."""
    if desired > max_size:
        raise ProviderError(f"{provider}: pool {pool!r}: desired {desired} is beyond its max {max_size}",
                            kind="invalid", retryable=False)
    if desired < min_size:
        raise ProviderError(f"{provider}: pool {pool!r}: desired {desired} is below its min {min_size}",
                            kind="invalid", retryable=False)


class PoolProvider(Protocol):
    """A cloud's node groups. Implementations: `aws`, `azure`, `sim`."""

    name: str

    def pools(self) -> list[Pool]:
        """The pools this provider manages: the configured ones plus, if enabled, discovered ones."""
        ...

    def observe(self, now: float) -> dict[str, PoolObservation]:
        """Desired size, instance count and launch failures since the last call, per pool."""
        ...

    def set_desired(self, pool: str, desired: int) -> None:
        """Set the target size. Raises ProviderError(kind="invalid") beyond the pool's max."""
        ...

    def delete_node(self, pool: str, provider_id: str) -> None:
        """Terminate exactly this instance and decrement the target size by one."""
        ...

    def pool_of(self, provider_id: str) -> str | None:
        """Which managed pool an instance (Kubernetes providerID) belongs to, if any."""
        ...
