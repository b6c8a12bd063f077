"""A cloud's notice that an instance will go, as the providers read it (AWS EventBridge messages, Azure's
scheduled events): the same type for every cloud. Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

NoticeKind = Literal["spot-interruption", "rebalance", "terminating"]


@dataclass(frozen=True, slots=True)
class Interruption:
    """A cloud's notice that an instance will go, the same type for every cloud.

    spot-interruption: reclaimed at `deadline` (AWS: the two-minute warning; Azure: an evicted Spot VM);
    rebalance: at elevated risk of a reclaim (a recommendation); terminating: already stopping."""

    kind: NoticeKind
    instance: str  # the instance's providerID, or the id that ends it (an AWS instance id)
    at: float
    deadline: float
    handle: str = field(default="", compare=False)  # the provider's own reference, for acknowledge()
