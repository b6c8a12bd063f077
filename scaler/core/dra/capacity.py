"""Consumable capacity (DRAConsumableCapacity, beta and on since Kubernetes 1.36): what a request consumes of
a device's capacities, and whether it fits beside what others consume. Pure.

As kubernetes/kubernetes staging/src/k8s.io/dynamic-resource-allocation/structured/internal/incubating/
consumable_capacity.go (the allocator kube-scheduler 1.37 runs: the incubating variant, because this gate
is on): a request that names a capacity the device lacks does not fit it; for every capacity of the device
the request consumes its amount rounded up by the capacity's requestPolicy (a valid range: at least `min`,
then to the next `min + k * step`; valid values: the first one not below it), or, when it names no amount,
the policy's `default`, else the whole capacity. What is consumed must be one the policy allows (within
`max`, on a step, among the valid values; the default always is) and, added to what the device's other
shares consume, within the capacity. Values are exact decimals (DRAFractionalCapacityRange, on in 1.37:
milli-units); a request a range's arithmetic cannot represent (beyond int64 milli-units), or a negative
amount, is an error of the objects, not a device that does not fit (upstream aborts the allocation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import ROUND_CEILING, Decimal

from scaler.core.model.dra import CapacityPolicy, Device

_MAX_INT64 = Decimal(2**63 - 1)
_MILLI = Decimal("0.001")


class CapacityError(ValueError):
    """A request the policy's arithmetic cannot represent, or a negative amount (upstream aborts)."""


def consumption(requested: Iterable[tuple[str, Decimal]], device: Device,
                shares: Iterable[Mapping[str, Decimal]] = ()) -> dict[str, Decimal] | None:
    """What the request consumes of each of the device's capacities, or None when it does not fit (a
    capacity it names the device lacks, an amount the policy refuses, or more than is left beside
    `shares`: what the device's other shares consume). Raises CapacityError (upstream's fatal errors)."""
    asked = dict(requested)
    if any(name not in device.capacity for name in asked):
        return None
    out: dict[str, Decimal] = {}
    for name, value in device.capacity.items():  # every amount first: an error does not depend on order
        amount = _consumed(asked.get(name), value, device.policies.get(name), name)
        if amount < 0:
            raise CapacityError(f"capacity {name!r}: capacity value is negative")
        out[name] = amount
    used = list(shares)
    for name, amount in out.items():
        if _violates(amount, device.policies.get(name)):
            return None
        if amount + sum((s.get(name, Decimal(0)) for s in used), Decimal(0)) > device.capacity[name]:
            return None
    return out


def _consumed(requested: Decimal | None, value: Decimal, policy: CapacityPolicy | None, name: str) -> Decimal:
    """upstream calculateConsumedCapacity."""
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else value
    if policy is None:
        return requested
    if policy.min is not None:
        return _round_up_range(requested, policy, name)
    if policy.valid_values:
        return next((v for v in policy.valid_values if requested <= v), requested)
    return requested


def _milli(policy: CapacityPolicy) -> bool:
    """upstream useMilli: every bound of the range is a whole number of milli-units within int64."""
    return all(_representable(q) for q in (policy.min, policy.max, policy.step) if q is not None) and (
        policy.step is None or policy.step >= _MILLI)


def _representable(q: Decimal) -> bool:
    return q == q.quantize(_MILLI) and abs(q / _MILLI) <= _MAX_INT64


def _round_up_range(requested: Decimal, policy: CapacityPolicy, name: str) -> Decimal:
    """upstream roundUpRange: below min -> min; else up to the next min + k * step."""
    lowest = policy.min
    assert lowest is not None
    if requested < lowest:
        return lowest
    step = policy.step
    if step is None:
        return requested
    milli = _milli(policy)
    if milli and not _representable(requested):
        raise CapacityError(f"capacity {name!r}: capacity request cannot be represented in the device's range "
                            f"arithmetic: request {requested} is not a representable milli value")
    if not milli:
        if requested > _MAX_INT64:
            raise CapacityError(f"capacity {name!r}: capacity request cannot be represented in the device's range "
                                f"arithmetic: request {requested} exceeds MaxInt64")
        requested, step, lowest = (x.to_integral_value(ROUND_CEILING) for x in (requested, step, lowest))
    steps = ((requested - lowest) / step).to_integral_value(ROUND_CEILING)
    rounded = lowest + step * steps
    if rounded / (_MILLI if milli else 1) > _MAX_INT64:
        raise CapacityError(f"capacity {name!r}: capacity request cannot be represented in the device's range "
                            f"arithmetic: rounding request {requested} up to the next step passes the range")
    return rounded


def _violates(amount: Decimal, policy: CapacityPolicy | None) -> bool:
    """upstream violatesPolicy."""
    if policy is None or (policy.default is not None and amount == policy.default):
        return False
    if policy.min is not None:
        if policy.max is not None and amount > policy.max:
            return True
        if policy.step is not None:
            if _milli(policy):
                return ((amount - policy.min) / _MILLI) % (policy.step / _MILLI) != 0
            ceil = [x.to_integral_value(ROUND_CEILING) for x in (amount, policy.min, policy.step)]
            return (ceil[0] - ceil[1]) % ceil[2] != 0
        return False
    if policy.valid_values:
        return amount not in policy.valid_values
    return False
