"""Pods-to-be: what `decide`'s two injectors added to a pass, for their answers to read back. Pure.

Room for pods that do not exist yet is asked two ways, as cluster-autoscaler's pod list processors add
them: ProvisioningRequests (`provreq.inject`: stand-ins for an atomic request's pod sets, pending; a
booking's stand-ins placed on the nodes it holds; `provreq.book_checks`: the room a check-capacity request
books) and CapacityBuffers (`buffers.inject`: placeholders planned after every real pending and displaced
pod, at the lowest priority). Both fill one `Injected`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.core.model.objects import Pod


@dataclass(slots=True)
class Injected:
    # ProvisioningRequests, by request key
    asking: dict[str, list[str]] = field(default_factory=dict)  # request -> its stand-in pods' keys (pending)
    booked: dict[str, frozenset[str]] = field(default_factory=dict)  # booked request -> the nodes it holds
    lost: dict[str, list[str]] = field(default_factory=dict)  # booked request -> its nodes that are gone
    # CapacityBuffers, by buffer key
    placeholders: list[Pod] = field(default_factory=list)  # every served buffer's, planned last
    held: dict[str, list[str]] = field(default_factory=dict)  # buffer -> its placeholders' keys
    counts: dict[str, int] = field(default_factory=dict)  # buffer -> how many placeholders it asks for
    errors: dict[str, str] = field(default_factory=dict)  # buffer -> the error that stopped it
