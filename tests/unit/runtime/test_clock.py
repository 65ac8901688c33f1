"""The store's clock: read one way by every reader (:func:`store_now`), and as text ``iso`` (the
fast path lists take) writes every instant exactly as the expression language's
``format_timestamp`` does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from procflow.expr import format_timestamp
from procflow.runtime.clock import (
    LATEST,
    VIRTUAL_EPOCH,
    from_iso,
    iso,
    store_now,
    system_now,
    to_datetime,
)
from procflow.runtime.engine import Engine
from procflow.runtime.operations.retention import purge
from procflow.runtime.work.observe import read_gauges

SRC = Path(__file__).resolve().parents[3] / "src" / "procflow"
HOUR = 3_600_000_000

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


def test_only_the_clock_module_reads_the_stores_clock() -> None:
    """One way to read it: a second reader drifted once (one asked the clock's kind first, the
    other did not)."""
    reads = re.compile(r"""meta_get\(\s*["']clock(_now)?["']""")
    readers = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if reads.search(path.read_text(encoding="utf-8"))
    )
    # engine.py reads only the clock's kind (once); clock.py reads its time
    assert readers == ["runtime/clock.py", "runtime/engine.py"]
    engine_reads = reads.findall((SRC / "runtime" / "engine.py").read_text(encoding="utf-8"))
    assert engine_reads == [""]


class _Meta:
    def __init__(self, **values: str) -> None:
        self.values = values

    def meta_get(self, key: str) -> str | None:
        return self.values.get(key)


def test_store_now_is_the_virtual_time_else_the_systems() -> None:
    assert store_now(_Meta(clock="virtual", clock_now="123")) == 123
    before = system_now()
    assert before <= store_now(_Meta(clock="system")) <= system_now()
    assert before <= store_now(None) <= system_now()


@pytest.mark.empty_store
def test_every_reader_of_a_virtual_clock_sees_the_same_time(db_url: str) -> None:
    engine = Engine.virtual(db_url)
    other = Engine(db_url)  # another process on the same store
    try:
        engine.advance("1h")
        expected = from_iso(VIRTUAL_EPOCH) + HOUR
        assert engine.now() == other.now() == store_now(engine.store.read()) == expected
        report = purge(engine.store, "30m", dry_run=True)
        assert report.ended_before == expected - HOUR // 2
        assert read_gauges(engine.store.read()).oldest_due_seconds == 0.0
    finally:
        other.close()
        engine.close()


def test_a_system_clock_store_reads_the_systems_time(db_url: str) -> None:
    engine = Engine(db_url)
    try:
        before = system_now()
        assert before <= engine.now() <= system_now()
        assert before <= purge(engine.store, "0s", dry_run=True).ended_before <= system_now()
    finally:
        engine.close()
