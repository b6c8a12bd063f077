"""Leader election on a coordination.k8s.io/v1 Lease (the client's LeaderElection, one try per pass), and
the guard every change to the cloud or the cluster passes first (`Leader.check`). Only the Lease calls the
RBAC rules in scaler.permissions allow.
"""

from __future__ import annotations

import logging
import time

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock
from urllib3.exceptions import HTTPError as TransportError

from scaler.kube.client import TIMEOUT
from scaler.permissions import LEASE_NAME
from scaler.ports import LostLease

log = logging.getLogger(__name__)


class Leader:
    """Leader election on a coordination.k8s.io/v1 Lease, one try per pass (the client's LeaderElection)."""

    def __init__(self, api: client.ApiClient, namespace: str, identity: str, lease_seconds: int = 30,
                 timeout: tuple[float, float] = TIMEOUT) -> None:
        self._timeout = timeout  # (connect, read) seconds of every call
        lock = LeaseLock(LEASE_NAME, namespace, identity)  # type: ignore[no-untyped-call]
        self._coordination = lock.api_instance = client.CoordinationV1Api(api)
        self._namespace = namespace
        renew = max(1, lease_seconds * 2 // 3)
        cfg = electionconfig.Config(  # type: ignore[no-untyped-call]
            lock, lease_seconds, renew, max(1, renew // 3), self._noop, self._noop)
        self._election = leaderelection.LeaderElection(cfg)  # type: ignore[no-untyped-call]
        self.identity = identity
        self.is_leader = False
        # A renewal is good for the renew deadline (2/3 of the lease): stop acting before another
        # replica may take the lease over, whatever the clocks of the two do.
        self._valid_for = float(renew)
        self._valid_until = 0.0

    @staticmethod
    def _noop() -> None:
        return None

    def try_lead(self) -> bool:
        asked = time.monotonic()
        try:
            self.is_leader = bool(self._election.try_acquire_or_renew())  # type: ignore[no-untyped-call]
        except Exception as err:
            log.warning("lease: %s", err)
            self.is_leader = False
        self._valid_until = asked + self._valid_for if self.is_leader else 0.0
        return self.is_leader

    def release(self) -> None:
        """Give the Lease up (on SIGTERM), so the other replica takes over at once instead of after a
        whole lease duration: holder cleared and a one-second duration, as client-go's ReleaseOnCancel."""
        if not self.is_leader:
            return
        self.is_leader = False
        self._valid_until = 0.0
        try:
            lease = self._coordination.read_namespaced_lease(LEASE_NAME, self._namespace,
                                                             _request_timeout=self._timeout)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.lease_duration_seconds = 1
            self._coordination.replace_namespaced_lease(LEASE_NAME, self._namespace, lease,
                                                        _request_timeout=self._timeout)
            log.info("lease %s released", LEASE_NAME)
        except (ApiException, TransportError) as err:
            log.warning("lease %s not released: %s", LEASE_NAME, err)

    def holds(self) -> bool:
        """Still safe to act: the last renewal is younger than the renew deadline."""
        return self.is_leader and time.monotonic() < self._valid_until

    def check(self) -> None:
        """Before every change to the cloud or the cluster: this replica still holds the lease."""
        if not self.holds():
            raise LostLease("the leader lease expired during the pass")
