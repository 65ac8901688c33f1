"""The store's clock as text: ``iso`` (the fast path lists take) writes every instant exactly as
the expression language's ``format_timestamp`` does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from procflow.expr import format_timestamp
from procflow.runtime.clock import LATEST, from_iso, iso, to_datetime

EARLIEST = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z


@given(st.integers(min_value=EARLIEST, max_value=LATEST))
def test_iso_is_format_timestamp(value: int) -> None:
    assert iso(value) == format_timestamp(to_datetime(value))


@given(st.integers(min_value=0, max_value=LATEST // 1_000_000).map(lambda s: s * 1_000_000))
def test_whole_seconds_have_no_fraction(value: int) -> None:
    assert iso(value) == format_timestamp(to_datetime(value))


def test_fractions_are_milliseconds_or_microseconds_only_when_not_zero() -> None:
    start = from_iso("2027-01-01T00:00:00Z")
    assert iso(start) == "2027-01-01T00:00:00Z"
    assert iso(start + 120_000) == "2027-01-01T00:00:00.120Z"
    assert iso(start + 120_500) == "2027-01-01T00:00:00.120500Z"
    assert iso(start + 1) == "2027-01-01T00:00:00.000001Z"
    assert iso(None) is None
    assert iso(LATEST) == "9999-12-31T23:59:59.999999Z"
