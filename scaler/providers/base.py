"""The errors of the one interface every cloud sits behind (`scaler.ports.PoolProvider`, importable from here
too). The loop, the actuator and the simulator only ever call that interface.

Errors are typed: every failed call raises a ProviderError subclass whose `kind` feeds the cloud-errors
metric and whose `retryable` says whether asking again can succeed (a throttled or failed server call
can; expired credentials, a refused permission, a missing group or an invalid size cannot, and are
not retried on the ordinary backoff).
"""

from __future__ import annotations

from typing import Literal

from scaler.ports import PoolProvider as PoolProvider  # noqa: PLC0414 - re-exported: the providers and tests

ErrorKind = Literal["throttled", "capacity", "quota", "auth", "not-found", "invalid", "server", "network", "other"]


class ProviderError(Exception):
    """A cloud call that failed. A subclass names the kind: `class NotFound(ProviderError, kind="not-found",
    retryable=False)`; a plain ProviderError is "other" and retryable unless told."""

    kind: ErrorKind = "other"
    retryable: bool = True

    def __init_subclass__(cls, kind: ErrorKind = "other", retryable: bool = True) -> None:
        super().__init_subclass__()
        cls.kind, cls.retryable = kind, retryable

    def __init__(self, message: str, *, kind: ErrorKind | None = None, retryable: bool | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind
        if retryable is not None:
            self.retryable = retryable


class Throttled(ProviderError, kind="throttled"):
    """The API's rate limit: asking again later works."""


class ServerError(ProviderError, kind="server"):
    """The cloud failed (5xx)."""


class NetworkError(ProviderError, kind="network"):
    """The cloud could not be reached."""


class CapacityUnavailable(ProviderError, kind="capacity"):
    """No capacity for the request right now."""


class QuotaExceeded(ProviderError, kind="quota", retryable=False):
    """An account limit: someone must raise it."""


class NotAuthorized(ProviderError, kind="auth", retryable=False):
    """Credentials expired or a permission is missing: someone must fix them."""


class NotFound(ProviderError, kind="not-found", retryable=False):
    """No such group or instance."""


class InvalidRequest(ProviderError, kind="invalid", retryable=False):
    """The request cannot succeed as it is (a size beyond the max)."""


def check_size(provider: str, pool: str, desired: int, min_size: int, max_size: int) -> None:
    """The one guard every provider runs before it sets a size: never beyond max, never below min."""
    if desired > max_size:
        raise InvalidRequest(f"{provider}: pool {pool!r}: desired {desired} is beyond its max {max_size}")
    if desired < min_size:
        raise InvalidRequest(f"{provider}: pool {pool!r}: desired {desired} is below its min {min_size}")
