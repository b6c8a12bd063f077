"""A cloud's notice that an instance will go, as the providers read it (AWS EventBridge messages, Azure's
scheduled events): the same type for every cloud. Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

# Seconds from a cloud's spot reclaim notice to the reclaim: AWS's two-minute warning, Azure's Preempt
# scheduled event (at least 30 s ahead). An AWS rebalance recommendation sets no deadline; it is taken as
# REBALANCE_LEAD ahead of the risk it warns of.
NOTICE_LEAD: Final = {"aws": 120.0, "azure": 30.0}
REBALANCE_LEAD: Final = 600.0

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
