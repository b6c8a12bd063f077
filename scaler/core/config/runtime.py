"""How `scaler run` talks to the Kubernetes API and the clouds: the operational knobs of its adapters (the
Lease, the watches, API call timeouts, Events, quota reads, the interruption queue, the cloud clients'
timeouts). Typed like the rest of the config (`ScalerConfig.runtime`); the defaults are what the scaler always
used. The planners never read these: a plan does not depend on them, and neither does the simulator.

What is a fact of a cloud rather than a choice stays with the model: the two-minute warning of an AWS Spot
reclaim and the lead taken for a rebalance recommendation (`scaler.core.model.interruption`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scaler.core.model.errors import FieldError

DAY = 86400.0


class Runtime(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    # The leader Lease's duration in seconds; unset: three scan intervals, at least 15 s.
    lease_seconds: int | None = Field(default=None, ge=5, le=3600)
    # The watches (scaler.kube.informer): the server ends each watch after this many seconds and it is resumed;
    # a failed list or watch is retried after a wait doubling from backoff_initial to backoff_max; a list is read
    # page_size objects a page; an optional API the server does not serve is looked for again this often.
    watch_timeout: int = Field(default=300, ge=1, le=3600)
    watch_backoff_initial: float = Field(default=0.5, gt=0, le=3600)
    watch_backoff_max: float = Field(default=30.0, gt=0, le=3600)
    page_size: int = Field(default=500, ge=1, le=10_000)
    absent_recheck: float = Field(default=300.0, gt=0, le=DAY)
    # The same Event (object, reason, message) is not posted again within this many seconds.
    event_interval: float = Field(default=300.0, ge=0, le=DAY)
    # The clouds' quotas (EC2 Service Quotas, Azure compute usage) are read again after this many seconds.
    quota_refresh: float = Field(default=300.0, gt=0, le=DAY)
    # AWS: an interruption notice being handled stays invisible to other readers of the queue this long
    # (SQS VisibilityTimeout), until the pass that read it acknowledges (deletes) it.
    notice_visibility: int = Field(default=45, ge=0, le=43_200)
    # Every call to the Kubernetes API: connect and read timeouts, in seconds (a hung API server must not hold a
    # pass past the Lease).
    kube_connect_timeout: float = Field(default=5.0, gt=0, le=300)
    kube_read_timeout: float = Field(default=20.0, gt=0, le=300)
    # AWS: the boto3 clients' connect and read timeouts, in seconds.
    cloud_connect_timeout: float = Field(default=5.0, gt=0, le=300)
    cloud_read_timeout: float = Field(default=20.0, gt=0, le=300)

    @model_validator(mode="after")
    def _consistent(self) -> Runtime:
        if self.watch_backoff_initial > self.watch_backoff_max:
            raise FieldError("watch_backoff_initial", f"{self.watch_backoff_initial:g} s is above watch_backoff_max "
                             f"({self.watch_backoff_max:g} s): the wait could never grow")
        return self

    def lease_for(self, interval: float) -> int:
        """The Lease's duration for passes `interval` seconds apart."""
        return self.lease_seconds if self.lease_seconds is not None else max(15, int(3 * interval))

    def kube_timeout(self) -> tuple[float, float]:
        """The `_request_timeout` of every Kubernetes API call: (connect, read)."""
        return self.kube_connect_timeout, self.kube_read_timeout

    def informer_options(self) -> dict[str, float | int]:
        """The keyword options of every watch (`scaler.kube.informer.Informer`)."""
        return {"watch_timeout": self.watch_timeout, "backoff_initial": self.watch_backoff_initial,
                "backoff_max": self.watch_backoff_max, "page_size": self.page_size,
                "absent_recheck": self.absent_recheck}
