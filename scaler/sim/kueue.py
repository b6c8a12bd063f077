"""Kueue's side of ProvisioningRequests in the simulator.

A gang job (more than one pod) is queued the way Kueue queues it behind a ProvisioningRequest admission
check: at submission the job is suspended (no pods yet) and a ProvisioningRequest of class
best-effort-atomic-scale-up.autoscaling.x-k8s.io asks for all its pods (Kueue's PodTemplate is the job's
pod). When the pass writes Provisioned, the job is admitted: its pods are created, each consuming the
request. A Failed request is retried as Kueue's ProvisioningRequestConfig retryStrategy does by default
(3 retries, backoff 60 s doubling); after the last one Kueue deactivates the workload. A finished job's
request is deleted. The pass serves the requests through `scaler.core.planning.decide.decide`, the call
`scaler run` makes.
"""

from __future__ import annotations

from collections.abc import Callable

from scaler.core.model import keys
from scaler.core.model.conditions import Condition
from scaler.core.model.provreq import (
    BOOKING_EXPIRED,
    CAPACITY_REVOKED,
    FAILED,
    PROVISIONED,
    PodSet,
    ProvisioningRequest,
)
from scaler.core.planning import provreq
from scaler.sim.records import JobRun
from scaler.sim.trace import SIM_NAMESPACE

KUEUE_RETRIES = 3  # ProvisioningRequestConfig retryStrategy.backoffLimitCount, Kueue's default
KUEUE_BACKOFF_S = 60.0  # its backoffBaseSeconds; each retry waits twice the one before


class Kueue:
    def __init__(self, admit: Callable[[JobRun, float], None], retry: Callable[[JobRun, float], None],
                 reject: Callable[[JobRun], None]) -> None:
        """`admit(run, now)`: create the job's pods; `retry(run, at)`: ask again then; `reject(run)`: the
        workload is deactivated (`run.rejected` says why)."""
        self._admit, self._retry, self._reject = admit, retry, reject
        self.requests: dict[str, tuple[ProvisioningRequest, JobRun]] = {}  # the live ones, by key
        self.counts: dict[str, int] = {}  # "created" and each condition that became True

    def request(self, run: JobRun, now: float) -> None:
        """The job waits for admission: one ProvisioningRequest for all its pods."""
        run.attempts += 1
        name = f"job-{run.job.job_id}" + (f"-{run.attempts}" if run.attempts > 1 else "")
        req = ProvisioningRequest(SIM_NAMESPACE, name, provreq.ATOMIC_SCALE_UP,
                                          [PodSet(run.pods[0], len(run.pods))], created_at=now)
        run.request = req
        self.requests[req.key] = (req, run)
        self._count("created")

    def live(self) -> list[ProvisioningRequest]:
        return [req for req, _ in self.requests.values()]

    def finished(self, run: JobRun) -> None:
        """Kueue deletes a finished workload's request."""
        if run.request is not None:
            self.requests.pop(run.request.key, None)

    def booking_ends(self, ttl: float) -> list[float]:
        """When the Provisioned requests' bookings expire (a timer of the planner's)."""
        return [req.conditions[PROVISIONED].at + ttl for req, _ in self.requests.values()
                if req.true(PROVISIONED)]

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def write(self, req: ProvisioningRequest, conditions: dict[str, Condition], now: float) -> None:
        """A request's new conditions (the API server's part), and what Kueue does on them."""
        entry = self.requests.get(req.key)
        if entry is None:
            return
        run = entry[1]
        before = req.conditions
        req.conditions = conditions
        for kind in (PROVISIONED, FAILED, CAPACITY_REVOKED, BOOKING_EXPIRED):
            if req.true(kind) and (kind not in before or before[kind].status != "True"):
                self._count(kind)
        if req.true(PROVISIONED) and run.admitted_at is None:
            run.admitted_at = now
            for pod in run.pods:
                pod.annotations[keys.ANNOTATION_CONSUME_PROVREQ] = req.name
            self._admit(run, now)
        elif req.true(FAILED) and run.admitted_at is None:
            if run.attempts <= KUEUE_RETRIES:
                self._retry(run, now + KUEUE_BACKOFF_S * 2 ** (run.attempts - 1))
            else:
                failed = req.conditions[FAILED]
                run.rejected = f"ProvisioningRequest {req.key} Failed ({failed.reason}): {failed.message}"
                self._reject(run)
        if req.done:
            del self.requests[req.key]
