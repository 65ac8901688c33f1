from __future__ import annotations

from datetime import timedelta

import pytest

from procflow.errors import DurationError
from procflow.expr import format_duration, parse_duration

S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500ms", timedelta(milliseconds=500)),
        ("30s", 30 * S),
        ("5m", 5 * 60 * S),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1w", timedelta(weeks=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2d12h", timedelta(days=2, hours=12)),
        (
            "1w2d3h4m5s6ms",
            timedelta(weeks=1, days=2, hours=3, minutes=4, seconds=5, milliseconds=6),
        ),
        ("0s", timedelta(0)),
        ("-5m", -5 * 60 * S),
        (" 30s ", 30 * S),
        ("PT30S", 30 * S),
        ("P1D", timedelta(days=1)),
        ("PT1M", 60 * S),
        ("P1W", timedelta(weeks=1)),
        ("P2DT3H", timedelta(days=2, hours=3)),
        ("PT1H30M", timedelta(hours=1, minutes=30)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("PT0,25S", timedelta(milliseconds=250)),
        ("PT1.5H", timedelta(minutes=90)),
        ("PT0S", timedelta(0)),
        ("-PT30S", -30 * S),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("PT30S", 30 * S), ("P1D", timedelta(days=1)), ("PT1M", 60 * S), ("P1W", timedelta(weeks=1))],
)
def test_iso_only_accepts_iso(text: str, expected: timedelta) -> None:
    assert parse_duration(text, iso_only=True) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("30s", "[30s] is not an ISO-8601 duration; write PT30S"),
        ("1h30m", "write PT1H30M"),
        ("1d", "write P1D"),
        ("banana", "is not an ISO-8601 duration"),
    ],
)
def test_iso_only_refuses_short_form(text: str, message: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text, iso_only=True)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("P1M", "months and years have no fixed length; use days, e.g. P30D"),
        ("P1Y", "months and years have no fixed length"),
        ("P1Y2DT3H", "months and years"),
        ("", "empty duration"),
        ("P", "not a valid duration"),
        ("PT", "not a valid duration"),
        ("P1DT", "not a valid duration"),
        ("30", "not a valid duration"),
        ("30x", "not a valid duration"),
        ("1.5h", "not a valid duration"),
        ("30m1h", "largest to smallest"),
        ("1h1h", "largest to smallest"),
        ("PT1.5H30M", "only the smallest unit may have a fraction"),
        ("pt30s", "not a valid duration"),
        ("99999999999999999999d", "too large"),
        ("999999999999w", "too large"),
        ("P999999999999D", "too large"),
        ("P" + "9" * 40 + "D", "too large"),
        ("PT" + "9" * 30 + "S", "too large"),
    ],
)
def test_parse_duration_refusals(text: str, message: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert message in str(info.value)


@pytest.mark.parametrize("value", [30, 1.5, None, True, ["30s"]])
def test_parse_duration_refuses_non_text(value: object) -> None:
    with pytest.raises(DurationError, match="is not a duration"):
        parse_duration(value)


@pytest.mark.parametrize(
    ("td", "text"),
    [
        (30 * S, "PT30S"),
        (timedelta(days=1), "P1D"),
        (timedelta(hours=1, minutes=30), "PT1H30M"),
        (timedelta(milliseconds=500), "PT0.5S"),
        (timedelta(microseconds=1), "PT0.000001S"),
        (timedelta(0), "PT0S"),
        (timedelta(weeks=1), "P7D"),
        (timedelta(days=2, hours=3, seconds=4), "P2DT3H4S"),
        (-30 * S, "-PT30S"),
    ],
)
def test_format_duration(td: timedelta, text: str) -> None:
    assert format_duration(td) == text
    assert parse_duration(text) == td
