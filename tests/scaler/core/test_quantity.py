"""The core's quantity parser agrees with the official client's `kubernetes.utils.parse_quantity`."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as kube_parse_quantity

from scaler.core.model.quantity import QuantityError, format_units, parse_quantity, to_units

SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "E", "n", "u", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
TABLE = ["1", "0", "1.5", "500m", "250m", "1Ki", "1.5Gi", "16Gi", "1e3", "1E3", "1E", "2e-3", "1.0E+2", "100n",
         "100u", "0.1m", "-1", "+1", "1k", "1M", "1Mi", "128974848", "129e6", "129M", "123Mi", " 1", "1 ",
         "12345678901234567890", "7.5Ti", "0.000001", "3E"]


@pytest.mark.parametrize("text", TABLE)
def test_same_as_official_client_on_a_table(text: str) -> None:
    assert parse_quantity(text) == kube_parse_quantity(text)


@settings(max_examples=300, deadline=None)
@given(
    sign=st.sampled_from(["", "+", "-"]),
    whole=st.integers(min_value=0, max_value=10**12),
    frac=st.one_of(st.none(), st.integers(min_value=0, max_value=10**6)),
    suffix=st.one_of(st.sampled_from(SUFFIXES), st.builds(lambda e, s: f"{e}{s}", st.sampled_from(["e", "E"]),
                                                          st.integers(min_value=-9, max_value=18))),
)
def test_same_as_official_client_on_generated_quantities(sign: str, whole: int, frac: int | None,
                                                         suffix: str) -> None:
    text = f"{sign}{whole}" + (f".{frac}" if frac is not None else "") + suffix
    assert parse_quantity(text) == kube_parse_quantity(text)


@pytest.mark.parametrize("text", ["", "Ki", "1.2.3", "1x", "0x10", "abc", "1Kii"])
def test_both_reject_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        kube_parse_quantity(text)
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_stricter_than_the_client_on_infinity() -> None:
    assert kube_parse_quantity("inf") == Decimal("Infinity")
    with pytest.raises(QuantityError):
        parse_quantity("inf")  # a node with infinite memory is a bug, not a capacity


@pytest.mark.parametrize(("resource", "raw", "units", "printed"), [
    ("cpu", "500m", 500, "500m"), ("cpu", "2", 2000, "2"), ("cpu", "0.1m", 1, "1m"),  # rounded up
    ("memory", "16Gi", 16 * 2**30, "16Gi"), ("memory", "1e3", 1000, "1000"), ("nvidia.com/gpu", 8, 8, "8"),
])
def test_units_round_trip(resource: str, raw: str | int, units: int, printed: str) -> None:
    assert to_units(resource, raw) == units
    assert format_units(resource, units) == printed
