"""Prepaid capacity: the reservation behind a `reserved` or `capacity-block` pool.

`reserved`: an EC2 On-Demand Capacity Reservation (its id, or a capacity reservation resource group)
launched into `capacity-reservations-only` or `-first`; on Azure a capacity reservation group.
`capacity-block`: an EC2 Capacity Block for ML, bought for fixed dates (its reservation id, start and
end). Both are paid whether used or not, so their marginal price is zero and the expander fills them
before spot and on-demand. A block is capacity only between its start and `end - min_remaining`;
its nodes are drained `drain_lead` before its end (EC2 starts terminating them 30 minutes before).
Times are epoch seconds (the simulator's: seconds from the trace's start) or ISO 8601 date-times.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import Field, field_validator, model_validator

from scaler.core.config.catalogue import CAPACITY_BLOCK_TYPES, Cloud
from scaler.core.config.specs import StrictModel
from scaler.core.model import keys
from scaler.core.model.errors import FieldError

PREPAID: Final = frozenset({"reserved", "capacity-block"})
WEEK = 7 * 86400.0
# EC2 begins terminating a block's instances this long before its end.
EC2_BLOCK_TERMINATION = 1800.0


class Reservation(StrictModel):
    id: str | None = Field(default=None, description="AWS cr-...; Azure: the capacity reservation group's id")
    resource_group: str | None = Field(default=None, description="AWS: a capacity reservation resource group ARN")
    preference: Literal["capacity-reservations-only", "capacity-reservations-first"] = "capacity-reservations-only"
    start: float | None = Field(default=None, description="a Capacity Block's start")
    end: float | None = Field(default=None, description="a Capacity Block's end")
    min_remaining: float = Field(default=3600, ge=0, le=WEEK,
                                 description="no node is placed on a block that ends sooner than this")
    drain_lead: float = Field(default=2400, ge=EC2_BLOCK_TERMINATION, le=WEEK,
                              description="the block's nodes are drained this long before its end")

    @field_validator("start", "end", mode="before")
    @classmethod
    def _time(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                pass
            try:
                v = datetime.fromisoformat(v)
            except ValueError:
                raise ValueError(f"{v!r} is neither epoch seconds nor an ISO 8601 date-time") from None
        if isinstance(v, datetime):
            return (v if v.tzinfo else v.replace(tzinfo=UTC)).timestamp()
        return v

    @model_validator(mode="after")
    def _window(self) -> Reservation:
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise FieldError("end", f"{show_time(self.end)} is not after start ({show_time(self.start)})")
        return self

    def window_closes(self) -> float:
        """When the block stops taking new nodes: min_remaining (or the drain, if earlier) before its end."""
        assert self.end is not None
        return self.end - max(self.min_remaining, self.drain_lead)


def check(capacity_type: str, reservation: Reservation | None, cloud: Cloud, instance_types: list[str]) -> None:
    """A pool's reservation against its capacity type, cloud and instance types (FieldError names the field)."""
    if capacity_type not in PREPAID:
        if reservation is not None:
            raise FieldError("reservation", f"only a reserved or capacity-block pool has one (this one is "
                             f"{capacity_type})")
        return
    if reservation is None:
        raise FieldError("reservation", f"is required for capacity_type {capacity_type}")
    r = reservation
    if capacity_type == "capacity-block":
        if cloud != "aws":
            raise FieldError("capacity_type", "Capacity Blocks are an EC2 offering: use reserved on Azure")
        for field in ("start", "end", "id"):
            if getattr(r, field) is None:
                raise FieldError(("reservation", field), "is required for a Capacity Block")
        bad = [t for t in instance_types if t not in CAPACITY_BLOCK_TYPES]
        if bad:
            raise FieldError("instance_types", f"{', '.join(bad)} cannot be bought as a Capacity Block "
                             f"(they hold {', '.join(sorted(CAPACITY_BLOCK_TYPES))})")
    elif r.start is not None or r.end is not None:
        raise FieldError(("reservation", "start" if r.start is not None else "end"),
                         "only a capacity-block pool has dates")
    if cloud == "azure":
        if r.id is None or "/capacityreservationgroups/" not in r.id.lower():
            raise FieldError(("reservation", "id"), "must be the capacity reservation group's resource id "
                             "(/subscriptions/.../capacityReservationGroups/<name>)")
        if r.resource_group is not None:
            raise FieldError(("reservation", "resource_group"), "is an AWS field: Azure takes the group's id")
        return
    if (r.id is None) == (r.resource_group is None):
        raise FieldError(("reservation", "id"), "give either id (cr-...) or resource_group, exactly one")
    if r.id is not None and not r.id.startswith("cr-"):
        raise FieldError(("reservation", "id"), f"{r.id!r} is not an EC2 capacity reservation id (cr-...)")
    if r.id is not None and len(instance_types) > 1:
        raise FieldError("instance_types", "a capacity reservation holds one instance type: give exactly one")


def to_tags(r: Reservation) -> dict[str, str]:
    """The reservation as tags: one per field set (defaults left out)."""
    defaults = Reservation()
    out = {}
    for name, value in r.model_dump().items():
        if value is not None and value != getattr(defaults, name):
            text = show_time(value) if name in ("start", "end") else str(value)
            out[keys.TAG_RESERVATION_PREFIX + name.replace("_", "-")] = text
    return out


def from_tags(tags: Mapping[str, str]) -> dict[str, str] | None:
    """The reservation fields read back from tags (validated by the pool), or None when there are none."""
    fields = {k[len(keys.TAG_RESERVATION_PREFIX):].replace("-", "_"): v for k, v in tags.items()
              if k.startswith(keys.TAG_RESERVATION_PREFIX)}
    return fields or None


def show_time(t: float) -> str:
    """An ISO date-time for a real time, seconds for the simulator's."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t >= 1e9 else f"{t:g}"
