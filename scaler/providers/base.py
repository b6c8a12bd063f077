"""The one interface every cloud sits behind. The loop, the actuator and the simulator only ever call this.

Errors are typed: every failed call raises a ProviderError subclass whose `kind` feeds the cloud-errors
metric and whose `retryable` says whether asking again can succeed (a throttled or failed server call
can; expired credentials, a refused permission, a missing group or an invalid size cannot, and are
not retried on the ordinary backoff).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Literal, Protocol

from scaler.core.pool import Pool
from scaler.core.snapshot import Interruption, PoolObservation

ErrorKind = Literal["throttled", "capacity", "quota", "auth", "not-found", "invalid", "server", "network", "other"]


class ProviderError(Exception):
    """A cloud call that failed. Subclasses fix `kind` and the default `retryable`."""

    default_kind: ClassVar[ErrorKind] = "other"
    default_retryable: ClassVar[bool] = True

    def __init__(self, message: str, *, kind: ErrorKind | None = None, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind or self.default_kind
        self.retryable = self.default_retryable if retryable is None else retryable


class Throttled(ProviderError):
    default_kind = "throttled"


class ServerError(ProviderError):
    default_kind = "server"


class NetworkError(ProviderError):
    default_kind = "network"


class CapacityUnavailable(ProviderError):
    default_kind = "capacity"


class QuotaExceeded(ProviderError):
    default_kind = "quota"
    default_retryable = False


class NotAuthorized(ProviderError):
    default_kind = "auth"
    default_retryable = False


class NotFound(ProviderError):
    default_kind = "not-found"
    default_retryable = False


class InvalidRequest(ProviderError):
    default_kind = "invalid"
    default_retryable = False


def check_size(provider: str, pool: str, desired: int, min_size: int, max_size: int) -> None:
    """The one guard every provider runs before it sets a size: never beyond max, never below min."""
    if desired > max_size:
        raise InvalidRequest(f"{provider}: pool {pool!r}: desired {desired} is beyond its max {max_size}")
    if desired < min_size:
        raise InvalidRequest(f"{provider}: pool {pool!r}: desired {desired} is below its min {min_size}")


class PoolProvider(Protocol):
    """A cloud's node groups. Implementations: `aws`, `azure`, `sim`; `tests/integration/
    test_provider_conformance.py` runs the same cases against all three."""

    name: str

    def pools(self) -> list[Pool]:
        """The pools this provider manages: the configured ones plus, if enabled, discovered ones."""
        ...

    def observe(self, now: float) -> dict[str, PoolObservation]:
        """Desired size, instances (with zone and launch time) and launch failures since the last call."""
        ...

    def set_desired(self, pool: str, desired: int) -> None:
        """Set the target size. Raises InvalidRequest beyond the pool's max or below its min."""
        ...

    def delete_node(self, pool: str, provider_id: str) -> None:
        """Terminate exactly this instance and decrement the target size by one; NotFound if it is not
        an instance of the pool."""
        ...

    def pool_of(self, provider_id: str) -> str | None:
        """Which managed pool an instance (Kubernetes providerID) belongs to, if any."""
        ...

    def interruptions(self) -> list[Interruption]:
        """Notices that instances will go, not acknowledged yet (possibly seen before)."""
        ...

    def acknowledge(self, notices: Iterable[Interruption]) -> None:
        """The notices were handled: do not hand them out again."""
        ...
