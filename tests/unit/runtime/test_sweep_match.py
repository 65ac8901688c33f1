"""An intent schedule's ``where`` at a slot (runtime/schedules/sweep_match.py): moments resolved
at the slot's instant (calendar months clamped, dates in the schedule's zone, the years' ends),
values compared in their field's terms, SQL's null and ``like``."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from procflow.model.schedule import Compare, Condition, Moment, WhereOp
from procflow.model.source import UNKNOWN_POS
from procflow.runtime.clock import from_iso
from procflow.runtime.schedules.sweep_match import Matcher, moment_value
from procflow.store.rows import RecordRow

JAN_31 = from_iso("2027-01-31T23:30:00Z")


@pytest.mark.parametrize(
    ("moment", "zone", "expected"),
    [
        (Moment("CURRENT_DATE", True), "UTC", date(2027, 1, 31)),
        (Moment("CURRENT_DATE", True), "Europe/Berlin", date(2027, 2, 1)),  # 00:30 there
        (Moment("CURRENT_DATE+P1M", True, 1, months=1), "UTC", date(2027, 2, 28)),
        (Moment("CURRENT_DATE+P1Y1M", True, 1, months=13), "UTC", date(2028, 2, 29)),
        (Moment("CURRENT_DATE-P2M", True, -1, months=2), "UTC", date(2026, 11, 30)),
        (Moment("CURRENT_DATE-P1W", True, -1, days=7), "UTC", date(2027, 1, 24)),
        (Moment("CURRENT_DATE+P100Y", True, 1, months=1200), "UTC", date(2127, 1, 31)),
        (Moment("NOW", False), "Europe/Berlin", "2027-01-31T23:30:00.000000Z"),
        (
            Moment("NOW-PT30M", False, -1, micros=1_800_000_000),
            "UTC",
            "2027-01-31T23:00:00.000000Z",
        ),
        (Moment("NOW+P1M", False, 1, months=1), "UTC", "2027-02-28T23:30:00.000000Z"),
        (Moment("NOW+P1D", False, 1, days=1), "UTC", "2027-02-01T23:30:00.000000Z"),
    ],
)
def test_moments_resolve_at_the_slot(moment: Moment, zone: str, expected: Any) -> None:
    assert moment_value(moment, JAN_31, zone) == expected


def test_a_moment_past_the_last_year_stops_at_its_end() -> None:
    late = from_iso("9990-06-01T00:00:00Z")
    assert moment_value(Moment("CURRENT_DATE+P20Y", True, 1, months=240), late, "UTC") == date.max
    past = moment_value(Moment("NOW+P20Y", False, 1, months=240), late, "UTC")
    assert past == "9999-12-31T23:59:59.999999Z"
    early = moment_value(Moment("CURRENT_DATE-P100Y", True, -1, months=1200), 0, "UTC")
    assert early == date(1870, 1, 1)


def record(**data: Any) -> RecordRow:
    return RecordRow("E", 1, data, None, from_iso("2027-01-01T00:00:00Z"), JAN_31)


def holds(compare: Compare, op: str, value: Any, stored: Any, column: str | None = None) -> bool:
    condition = Condition("f", WhereOp(op), value, compare, UNKNOWN_POS, column)
    return Matcher([condition], JAN_31, "UTC").matches(record(f=stored))


@pytest.mark.parametrize(
    ("compare", "op", "value", "stored", "expected"),
    [
        # timestamps compare as instants, whatever their text
        ("timestamp", "lt", "2027-01-01T10:00:00.000001Z", "2027-01-01T10:00:00Z", True),
        ("timestamp", "eq", "2027-01-01T11:00:00+01:00", "2027-01-01T10:00:00Z", True),
        ("timestamp", "ge", Moment("NOW-P1D", False, -1, days=1), "2027-01-30T23:30:00Z", True),
        ("timestamp", "ge", Moment("NOW-P1D", False, -1, days=1), "2027-01-30T23:29:59Z", False),
        ("date", "le", Moment("CURRENT_DATE", True), "2027-01-31", True),
        ("date", "gt", "2027-01-09", "2027-01-10", True),
        ("number", "gt", 10, 10.5, True),
        ("number", "eq", 10, 10.0, True),
        (
            "uuid",
            "eq",
            "6F9619FF-8B86-D011-B42D-00C04FC964FF",
            "6f9619ff-8b86-d011-b42d-00c04fc964ff",
            True,
        ),
        ("relation", "ne", 2, 1, True),
        ("boolean", "eq", False, False, True),
        ("text", "gt", "b", "a", False),
        # null: as in SQL
        ("text", "eq", None, None, True),
        ("text", "ne", None, None, False),
        ("text", "ne", None, "x", True),
        ("text", "ne", "x", None, False),
        ("number", "lt", 5, None, False),
        # like: % any run, _ one character, \\ escapes, case-sensitive
        ("text", "like", "a%", "abc", True),
        ("text", "like", "a_c", "abc", True),
        ("text", "like", "a_c", "abbc", False),
        ("text", "like", "A%", "abc", False),
        ("text", "like", "100\\%", "100%", True),
        ("text", "like", "100\\%", "1000", False),
        ("text", "like", "a.c", "abc", False),  # a regular expression's dot is a dot
        ("text", "like", "%", "line\nbreak", True),
    ],
)
def test_values_compare_in_their_fields_terms(
    compare: Compare, op: str, value: Any, stored: Any, expected: bool
) -> None:
    assert holds(compare, op, value, stored) is expected


def test_created_at_and_changed_at_are_the_records_stored_instants() -> None:
    changed = Condition(
        "changedAt", WhereOp.LT, Moment("NOW-PT30M", False, -1, micros=1_800_000_000),
        "timestamp", UNKNOWN_POS, "updated_at",
    )  # fmt: skip
    created = Condition(
        "createdAt", WhereOp.LT, Moment("NOW-PT30M", False, -1, micros=1_800_000_000),
        "timestamp", UNKNOWN_POS, "created_at",
    )  # fmt: skip
    assert Matcher([created], JAN_31, "UTC").matches(record())
    assert not Matcher([changed], JAN_31, "UTC").matches(record())  # written at the slot


def test_conditions_are_anded() -> None:
    a = Condition("a", WhereOp.EQ, 1, "number", UNKNOWN_POS)
    b = Condition("b", WhereOp.EQ, 2, "number", UNKNOWN_POS)
    matcher = Matcher([a, b], JAN_31, "UTC")
    assert matcher.matches(record(a=1, b=2))
    assert not matcher.matches(record(a=1, b=3))
    assert Matcher([], JAN_31, "UTC").matches(record())
