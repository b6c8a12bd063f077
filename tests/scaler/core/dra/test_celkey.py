"""A selector's result is shared between devices only when the selector cannot tell them apart
(`scaler.core.dra.celkey`): evaluated through one Allocator over many devices that differ in an
attribute some selectors read and others do not, every answer (or error) is the one a fresh Allocator
gives that device alone."""

from __future__ import annotations

from dra_builders import DRIVER_A, device
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.core.dra.allocator import Allocator
from scaler.core.dra.celkey import reads
from scaler.core.dra.nvidia import DEVICE_CLASSES
from scaler.core.dra.search import AllocationError
from scaler.core.model.dra import Device

A = f'device.attributes["{DRIVER_A}"]'
EXPRESSIONS = (
    f'{A}.type == "gpu"',
    f'{A}.uuid == "u1"',
    f'{A}["uuid"] == "u1"',
    f"has({A}.uuid)",
    f'"uuid" in {A}',
    f'{A} == {{"type": "gpu", "uuid": "u1"}}',
    f'{A}.exists(k, k == "uuid" && {A}[k] == "u1")',
    f'cel.bind(a, {A}, a.uuid == "u1")',
    f'{A}.type.startsWith("g") && device.driver == "{DRIVER_A}"',
    f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("40Gi")) >= 0',
)


def _answer(alloc: Allocator, expression: str, dev: Device) -> bool | str:
    try:
        return alloc.selector_matches(expression, DRIVER_A, dev, "test", 0)
    except AllocationError as err:
        return str(err)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("gpu", "mig", None)), st.sampled_from(("u1", "u2", None)),
                          st.sampled_from(("uuid", f"{DRIVER_A}/uuid")), st.sampled_from(("16Gi", "80Gi"))),
                min_size=2, max_size=8))
def test_shared_answers_equal_each_devices_own(specs: list[tuple[str | None, str | None, str, str]]) -> None:
    """(a device's uuid is published unqualified or under the driver's domain: the same attribute)"""
    devices = [device(f"d{i}", {"memory": mem}, {k: v for k, v in (("type", t), (uuid, u)) if v is not None})
               for i, (t, u, uuid, mem) in enumerate(specs)]
    shared = Allocator([], [])
    for expression in EXPRESSIONS:
        for dev in devices:
            assert _answer(shared, expression, dev) == _answer(Allocator([], []), expression, dev), (expression, dev)


def test_the_nvidia_classes_are_shared_and_whole_maps_are_not() -> None:
    assert all(reads(s) is not None for c in DEVICE_CLASSES for s in c.selectors)
    assert reads(f'{A} == {{"uuid": "u1"}}') is None
    assert reads(f"cel.bind(a, {A}, a.uuid)") is None
    assert reads(f'{A}["u" + "uid"] == "u1"') is None
