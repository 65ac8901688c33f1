"""procflow.calendar: when a schedule's slots fall (docs/reference/flow.md, "Scheduled starts").

Instants are written as local times with their offset (what a reader of the zone sees) and
compared in microseconds since the epoch. The 2027 transitions: Europe/Berlin springs from 02:00
to 03:00 on 2027-03-28 and falls back from 03:00 to 02:00 on 2027-10-31; America/New_York
springs on 2027-03-14 (02:00 -> 03:00) and falls back on 2027-11-07 (02:00 -> 01:00).
"""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procflow.calendar import Calendar, calendar_of, zone_problem
from procflow.errors import CalendarError, ProcflowError

S = 1_000_000
MIN = 60 * S
H = 60 * MIN
D = 24 * H
BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"


def t(text: str) -> int:
    """An ISO-8601 instant with its offset, in microseconds since the epoch."""
    return int(datetime.fromisoformat(text).timestamp()) * S


def following(cal: Calendar, after: str, count: int) -> list[int]:
    return cal.slots_between(t(after), t(after) + 800 * D, count)


def gaps(slots: list[int]) -> set[int]:
    return {b - a for a, b in itertools.pairwise(slots)}


# --- daylight saving: wall-clock crons ------------------------------------------------------


def test_a_daily_time_in_the_spring_gap_fires_once_at_the_first_instant_after_it() -> None:
    berlin = calendar_of(cron="30 2 * * *", timezone=BERLIN)
    assert following(berlin, "2027-03-27T12:00+01:00", 3) == [
        t("2027-03-28T03:00+02:00"),
        t("2027-03-29T02:30+02:00"),
        t("2027-03-30T02:30+02:00"),
    ]
    new_york = calendar_of(cron="30 2 * * *", timezone=NEW_YORK)
    assert following(new_york, "2027-03-13T12:00-05:00", 2) == [
        t("2027-03-14T03:00-04:00"),
        t("2027-03-15T02:30-04:00"),
    ]


def test_a_daily_time_at_the_start_of_the_gap_fires_when_the_gap_ends() -> None:
    cal = calendar_of(cron="0 2 * * *", timezone=BERLIN)
    assert cal.next_after(t("2027-03-27T12:00+01:00")) == t("2027-03-28T03:00+02:00")


def test_a_repeated_local_time_fires_once_at_its_first_occurrence() -> None:
    berlin = calendar_of(cron="30 2 * * *", timezone=BERLIN)
    assert following(berlin, "2027-10-30T12:00+02:00", 2) == [
        t("2027-10-31T02:30+02:00"),
        t("2027-11-01T02:30+01:00"),
    ]
    new_york = calendar_of(cron="30 1 * * *", timezone=NEW_YORK)
    assert following(new_york, "2027-11-06T12:00-04:00", 2) == [
        t("2027-11-07T01:30-04:00"),
        t("2027-11-08T01:30-05:00"),
    ]


def test_asked_during_the_second_pass_the_repeated_time_is_not_fired_again() -> None:
    cal = calendar_of(cron="30 2 * * *", timezone=BERLIN)
    assert cal.next_after(t("2027-10-31T02:10+01:00")) == t("2027-11-01T02:30+01:00")
    assert cal.next_after(t("2027-10-31T02:30+02:00")) == t("2027-11-01T02:30+01:00")


def test_every_gap_time_of_a_cron_naming_hours_lands_on_one_slot() -> None:
    each_minute_at_2 = calendar_of(cron="* 2 * * *", timezone=BERLIN)
    assert following(each_minute_at_2, "2027-03-28T00:00+01:00", 2) == [
        t("2027-03-28T03:00+02:00"),
        t("2027-03-29T02:00+02:00"),
    ]
    several = calendar_of(cron="30 1-3 * * *", timezone=BERLIN)
    assert following(several, "2027-03-28T00:00+01:00", 3) == [
        t("2027-03-28T01:30+01:00"),
        t("2027-03-28T03:00+02:00"),
        t("2027-03-28T03:30+02:00"),
    ]


def test_a_stepped_hour_field_names_hours_so_it_follows_the_wall_clock() -> None:
    cal = calendar_of(cron="0 */2 * * *", timezone=BERLIN)
    assert following(cal, "2027-03-27T23:30+01:00", 3) == [
        t("2027-03-28T00:00+01:00"),
        t("2027-03-28T03:00+02:00"),
        t("2027-03-28T04:00+02:00"),
    ]
    assert following(cal, "2027-10-30T23:30+02:00", 3) == [
        t("2027-10-31T00:00+02:00"),
        t("2027-10-31T02:00+02:00"),
        t("2027-10-31T04:00+01:00"),
    ]


# --- daylight saving: crons that fire in every hour run on real time ------------------------


@pytest.mark.parametrize(
    ("zone", "start"),
    [
        pytest.param(BERLIN, "2027-03-28T00:00+01:00", id="berlin-spring"),
        pytest.param(BERLIN, "2027-10-31T00:00+02:00", id="berlin-autumn"),
        pytest.param(NEW_YORK, "2027-03-14T00:00-05:00", id="new-york-spring"),
        pytest.param(NEW_YORK, "2027-11-07T00:00-04:00", id="new-york-autumn"),
    ],
)
@pytest.mark.parametrize("step", [5, 30])
def test_a_minute_level_cron_keeps_real_time_spacing_through_the_transition(
    zone: str, start: str, step: int
) -> None:
    cal = calendar_of(cron=f"*/{step} * * * *", timezone=zone)
    slots = cal.slots_between(t(start), t(start) + 4 * H, 1000)
    assert slots[0] == t(start) + step * MIN
    assert gaps(slots) == {step * MIN}
    assert len(slots) == 4 * 60 // step  # the whole four real hours, gap or repeat in them


def test_an_hourly_cron_fires_in_both_passes_of_the_repeated_hour_and_skips_the_gap() -> None:
    cal = calendar_of(cron="0 * * * *", timezone=BERLIN)
    assert following(cal, "2027-10-31T01:30+02:00", 3) == [
        t("2027-10-31T02:00+02:00"),
        t("2027-10-31T02:00+01:00"),
        t("2027-10-31T03:00+01:00"),
    ]
    at_half = calendar_of(cron="30 * * * *", timezone=BERLIN)
    assert following(at_half, "2027-03-28T01:00+01:00", 2) == [
        t("2027-03-28T01:30+01:00"),
        t("2027-03-28T03:30+02:00"),  # one real hour later
    ]


def test_all_hours_written_as_a_range_is_every_hour() -> None:
    cal = calendar_of(cron="0 0-23 * * *", timezone=BERLIN)
    slots = following(cal, "2027-10-31T01:30+02:00", 3)
    assert gaps(slots) == {H}


# --- cron syntax ----------------------------------------------------------------------------


def utc_slots(cron: str, after: str, count: int) -> list[str]:
    cal = calendar_of(cron=cron)
    return [
        datetime.fromtimestamp(s // S, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        for s in following(cal, after, count)
    ]


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        ("@hourly", ["2027-01-01T01:00:00", "2027-01-01T02:00:00"]),
        ("@daily", ["2027-01-02T00:00:00", "2027-01-03T00:00:00"]),
        ("@midnight", ["2027-01-02T00:00:00", "2027-01-03T00:00:00"]),
        ("@weekly", ["2027-01-03T00:00:00", "2027-01-10T00:00:00"]),  # Sundays
        ("@monthly", ["2027-02-01T00:00:00", "2027-03-01T00:00:00"]),
        ("@yearly", ["2028-01-01T00:00:00", "2029-01-01T00:00:00"]),
        ("@annually", ["2028-01-01T00:00:00", "2029-01-01T00:00:00"]),
        ("@DAILY", ["2027-01-02T00:00:00", "2027-01-03T00:00:00"]),
        ("0 9,17 * * *", ["2027-01-01T09:00:00", "2027-01-01T17:00:00"]),
        ("0 9-11 * * *", ["2027-01-01T09:00:00", "2027-01-01T10:00:00"]),
        ("*/20 9 * * *", ["2027-01-01T09:00:00", "2027-01-01T09:20:00"]),
        ("0 0-12/6 * * *", ["2027-01-01T06:00:00", "2027-01-01T12:00:00"]),
        ("0 0 1 JAN,JUL *", ["2027-07-01T00:00:00", "2028-01-01T00:00:00"]),
        ("0 0 1 jan-feb *", ["2027-02-01T00:00:00", "2028-01-01T00:00:00"]),
        ("0 6 * * MON-FRI", ["2027-01-01T06:00:00", "2027-01-04T06:00:00"]),  # Fri, then Mon
        ("0 6 * * sat,7", ["2027-01-02T06:00:00", "2027-01-03T06:00:00"]),  # 7 is Sunday
        ("0 0 13 * FRI", ["2027-01-08T00:00:00", "2027-01-13T00:00:00"]),  # 13th OR Friday
        ("0 0 L * *", ["2027-01-31T00:00:00", "2027-02-28T00:00:00"]),
        ("0 0 LW * *", ["2027-01-29T00:00:00", "2027-02-26T00:00:00"]),
        ("0 0 * * 5L", ["2027-01-29T00:00:00", "2027-02-26T00:00:00"]),
        ("0 0 * * MON#2", ["2027-01-11T00:00:00", "2027-02-08T00:00:00"]),
    ],
)
def test_cron_syntax(cron: str, expected: list[str]) -> None:
    assert utc_slots(cron, "2027-01-01T00:00:00Z", 2) == expected


def test_a_cron_is_read_in_its_zone() -> None:
    cal = calendar_of(cron="0 6 * * MON-FRI", timezone=BERLIN)
    assert cal.next_after(t("2027-01-01T00:00Z")) == t("2027-01-01T06:00+01:00")
    assert cal.next_after(t("2027-07-01T00:00Z")) == t("2027-07-01T06:00+02:00")


# --- Spring's six-field cron ----------------------------------------------------------------


def test_a_spring_cron_has_seconds_first_and_question_marks_in_a_day_field() -> None:
    every_5m = calendar_of(cron="0 */5 * * * ?", spring=True)
    assert following(every_5m, "2027-01-01T00:00Z", 2) == [
        t("2027-01-01T00:05Z"),
        t("2027-01-01T00:10Z"),
    ]
    every_10s = calendar_of(cron="*/10 * * * * *", spring=True)
    assert gaps(following(every_10s, "2027-01-01T00:00Z", 5)) == {10 * S}
    mondays = calendar_of(cron="0 0 12 ? * MON", spring=True)
    assert following(mondays, "2027-01-01T00:00Z", 1) == [t("2027-01-04T12:00Z")]
    fifteenths = calendar_of(cron="0 0 12 15 * ?", spring=True)
    assert following(fifteenths, "2027-01-01T00:00Z", 1) == [t("2027-01-15T12:00Z")]


def test_a_spring_cron_may_have_five_fields_and_names() -> None:
    assert calendar_of(cron="0 6 * * *", spring=True).next_after(t("2027-01-01T00:00Z")) == t(
        "2027-01-01T06:00Z"
    )
    assert calendar_of(cron="@hourly", spring=True).next_after(0) == H


def test_a_spring_cron_follows_the_same_daylight_saving_rules() -> None:
    cal = calendar_of(cron="0 30 2 * * ?", timezone=BERLIN, spring=True)
    assert following(cal, "2027-03-27T12:00+01:00", 1) == [t("2027-03-28T03:00+02:00")]
    assert following(cal, "2027-10-30T12:00+02:00", 2) == [
        t("2027-10-31T02:30+02:00"),
        t("2027-11-01T02:30+01:00"),
    ]


# --- every and at ---------------------------------------------------------------------------


@pytest.mark.parametrize("step", [S, 15 * MIN, D])
def test_every_counts_from_the_epoch(step: int) -> None:
    cal = calendar_of(every_micros=step)
    assert cal.next_after(0) == step
    assert cal.next_after(step - 1) == step
    assert cal.next_after(10 * step + 1) == 11 * step
    assert gaps(cal.slots_between(123, 123 + 20 * step, 100)) == {step}


def test_every_counts_from_its_start_and_ignores_the_zone() -> None:
    start = t("2027-03-27T06:00+01:00")
    cal = calendar_of(every_micros=D, start=start, timezone=BERLIN)
    assert cal.next_after(0) == start  # a slot at start itself
    assert cal.next_after(start) == start + D  # exactly 24 hours, the DST day too
    assert cal.next_after(start + D + 1) == start + 2 * D


def test_at_is_one_slot() -> None:
    at = t("2027-01-01T00:00Z")
    cal = calendar_of(at=at)
    assert cal.next_after(at - 1) == at
    assert cal.next_after(at) is None
    assert cal.slots_between(0, at * 2, 10) == [at]


# --- start, end, ended calendars, slots_between ---------------------------------------------


def test_start_and_end_bound_a_cron() -> None:
    start, end = t("2027-01-01T06:00Z"), t("2027-01-03T06:00Z")
    cal = calendar_of(cron="0 6 * * *", start=start, end=end)
    assert cal.next_after(0) == start  # a slot at start counts
    assert cal.slots_between(0, 2 * end, 10) == [start, start + D, end]  # and one at end
    assert cal.next_after(end) is None  # ended


def test_end_bounds_every_and_a_calendar_past_it_has_ended() -> None:
    cal = calendar_of(every_micros=H, end=3 * H + 1)
    assert cal.slots_between(0, 10 * H, 10) == [H, 2 * H, 3 * H]
    assert cal.next_after(3 * H) is None


def test_slots_between_is_after_exclusive_until_inclusive_and_limited() -> None:
    cal = calendar_of(every_micros=H)
    assert cal.slots_between(H, 3 * H, 10) == [2 * H, 3 * H]
    assert cal.slots_between(0, 10 * H, 3) == [H, 2 * H, 3 * H]
    assert cal.slots_between(0, 10 * H, 0) == []
    assert cal.slots_between(3 * H, H, 10) == []


# --- describe -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ({"cron": "0 6 * * MON-FRI", "timezone": BERLIN}, "0 6 * * MON-FRI Europe/Berlin"),
        ({"cron": " 0  6 * * * "}, "0 6 * * * UTC"),
        ({"cron": "@daily"}, "@daily UTC"),
        ({"every_micros": 15 * MIN}, "every 15m"),
        ({"every_micros": 90 * MIN + 30 * S}, "every 1h30m30s"),
        ({"every_micros": D, "timezone": BERLIN}, "every 1d"),
        ({"every_micros": S + 500_000}, "every 1s500ms"),
        ({"at": t("2027-01-01T00:00Z")}, "at 2027-01-01T00:00:00Z"),
        ({"at": t("2027-01-01T01:00+01:00") + 5}, "at 2027-01-01T00:00:00.000005Z"),
    ],
)
def test_describe(spec: dict[str, object], text: str) -> None:
    assert calendar_of(**spec).describe() == text  # type: ignore[arg-type]


def test_a_calendar_is_immutable() -> None:
    cal = calendar_of(every_micros=S)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cal.end = 0  # type: ignore[misc]


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message", "key"),
    [
        ({}, "a schedule has exactly one of cron, every or at", None),
        (
            {"cron": "* * * * *", "every_micros": S},
            "a schedule has exactly one of cron, every or at; this one has cron and every",
            None,
        ),
        (
            {"cron": "* * * * *", "every_micros": S, "at": 0},
            "a schedule has exactly one of cron, every or at; this one has cron and every and at",
            None,
        ),
        (
            {"every_micros": S, "timezone": "Europe/Berlim"},
            "[Europe/Berlim] is not an IANA time zone; did you mean [Europe/Berlin]?",
            "timezone",
        ),
        ({"every_micros": 500_000}, "every must be at least 1s, got 500ms", "every"),
        ({"every_micros": 0}, "every must be at least 1s, got 0s", "every"),
        ({"every_micros": -S}, "every must be at least 1s, got -1s", "every"),
        (
            {"every_micros": S, "start": 10 * S, "end": S},
            "end 1970-01-01T00:00:01Z is before start 1970-01-01T00:00:10Z; no slot could fall",
            "end",
        ),
        (
            {"at": S, "start": 10 * S},
            "at 1970-01-01T00:00:01Z is before start 1970-01-01T00:00:10Z; its one slot could "
            "never fall",
            "at",
        ),
        (
            {"at": 10 * S, "end": S},
            "at 1970-01-01T00:00:10Z is after end 1970-01-01T00:00:01Z; its one slot could never "
            "fall",
            "at",
        ),
        (
            {"cron": "0 6 * *"},
            "cron [0 6 * *] has 4 fields; it needs 5 (minute hour day-of-month month day-of-week)",
            "cron",
        ),
        (
            {"cron": "0 0 6 * * *"},
            "cron [0 0 6 * * *] has 6 fields; it needs 5 (minute hour day-of-month month "
            "day-of-week); for seconds use every",
            "cron",
        ),
        ({"cron": ""}, "cron [] has 0 fields; it needs 5", "cron"),
        (
            {"cron": "0 0 6 * * ? 2027", "spring": True},
            "cron [0 0 6 * * ? 2027] has 7 fields; a Spring cron has 6 (second minute hour "
            "day-of-month month day-of-week) or 5 (without the second)",
            "cron",
        ),
        ({"cron": "61 * * * *"}, "cron [61 * * * *]: bad minute field [61] (minute: 0-59)", "cron"),
        ({"cron": "0 24 * * *"}, "cron [0 24 * * *]: bad hour field [24] (hour: 0-23)", "cron"),
        (
            {"cron": "0 0 0 * *"},
            "cron [0 0 0 * *]: bad day-of-month field [0] (day-of-month: 1-31, L or LW)",
            "cron",
        ),
        (
            {"cron": "0 0 30 FEB *"},
            "cron [0 0 30 FEB *]: bad day-of-month field [30] (day-of-month: 1-31, L or LW)",
            "cron",
        ),
        (
            {"cron": "0 0 * JANUARY *"},
            "cron [0 0 * JANUARY *]: bad month field [JANUARY] (month: 1-12 or JAN-DEC)",
            "cron",
        ),
        (
            {"cron": "0 6 * * FUNDAY"},
            "cron [0 6 * * FUNDAY]: bad day-of-week field [FUNDAY] (day-of-week: 0-7 or SUN-SAT, "
            "5L, MON#2)",
            "cron",
        ),
        (
            {"cron": "0 6 * * 5-1"},
            "cron [0 6 * * 5-1]: bad day-of-week field [5-1]",
            "cron",
        ),
        (
            {"cron": "60 0 12 * * ?", "spring": True},
            "cron [60 0 12 * * ?]: bad second field [60] (second: 0-59)",
            "cron",
        ),
        (
            {"cron": "0 0 12 ? * ?"},
            "cron [0 0 12 ? * ?] has 6 fields",
            "cron",
        ),
        (
            {"cron": "0 12 ? * MON"},
            "cron [0 12 ? * MON]: bad day-of-month field [?]; [?] is a Spring cron's, write [*]",
            "cron",
        ),
        (
            {"cron": "0 0 ? * * *", "spring": True},
            "cron [0 0 ? * * *]: [?] is allowed alone in day-of-month or day-of-week only, not "
            "in the hour field [?]",
            "cron",
        ),
        (
            {"cron": "@reboot"},
            "cron [@reboot]: unknown name [@reboot] (one of @yearly, @annually, @monthly, "
            "@weekly, @daily, @midnight, @hourly)",
            "cron",
        ),
        (
            {"cron": "@dialy"},
            "cron [@dialy]: unknown name [@dialy]; did you mean [@daily]?",
            "cron",
        ),
        (
            {"cron": "0 0 */30 2 MON#5"},
            "cron [0 0 */30 2 MON#5] never fires (no match in 50 years)",
            "cron",
        ),
    ],
)
def test_each_problem_is_a_one_line_calendar_error_naming_its_key(
    spec: dict[str, object], message: str, key: str | None
) -> None:
    with pytest.raises(CalendarError) as raised:
        calendar_of(**spec)  # type: ignore[arg-type]
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert raised.value.key == key
    assert isinstance(raised.value, ProcflowError)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("UTC", None),
        ("Europe/Berlin", None),
        ("America/Argentina/Buenos_Aires", None),
        (
            "europe/berlin",
            "[europe/berlin] is not an IANA time zone; did you mean [Europe/Berlin]?",
        ),
        ("Berlin", "[Berlin] is not an IANA time zone; did you mean [Europe/Berlin]?"),
        ("new york", "[new york] is not an IANA time zone; did you mean [America/New_York]?"),
        ("America/New_Yrok", "did you mean [America/New_York]?"),
        (
            "Mars/Olympus_Mons",
            "[Mars/Olympus_Mons] is not an IANA time zone (e.g. Europe/Berlin, America/New_York, "
            "UTC)",
        ),
        ("", "[] is not an IANA time zone"),
        ("localtime", "[localtime] is not an IANA time zone"),  # the machine's own zone
        ("../../etc/passwd", "[../../etc/passwd] is not an IANA time zone"),
    ],
)
def test_zone_problem(name: str, problem: str | None) -> None:
    found = zone_problem(name)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


# --- properties -----------------------------------------------------------------------------

CRONS = [
    "*/5 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "* 2 * * *",
    "0 */2 * * *",
    "0 0 * * MON",
    "15 1-3 * * *",
    "0 0 L * *",
]
ZONES = [
    "UTC",
    BERLIN,
    NEW_YORK,
    "Australia/Lord_Howe",  # a 30-minute shift
    "America/Santiago",  # changes at midnight
    "Pacific/Apia",  # skipped a whole day in 2011
]
YEARS_1970_2100 = st.integers(0, 4_102_444_800 * S)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CRONS), st.sampled_from(ZONES), YEARS_1970_2100, st.integers(0, 10**13))
def test_cron_slots_increase_and_each_is_found_from_just_before_it_and_from_within_the_gap(
    cron: str, zone: str, instant: int, into: int
) -> None:
    cal = calendar_of(cron=cron, timezone=zone)
    slots = cal.slots_between(instant, instant + 70 * D, 5)
    assert slots and all(a < b for a, b in itertools.pairwise(slots))
    assert slots[0] > instant
    for before, slot in itertools.pairwise(slots):
        assert cal.next_after(slot - 1) == slot
        inside = before + into % (slot - before)  # any instant in [before, slot)
        assert cal.next_after(inside) == slot


@settings(max_examples=200, deadline=None)
@given(
    st.integers(S, 10 * D),
    st.one_of(st.none(), YEARS_1970_2100),
    YEARS_1970_2100,
)
def test_every_slots_are_whole_steps_from_the_start(
    step: int, start: int | None, instant: int
) -> None:
    cal = calendar_of(every_micros=step, start=start)
    slot = cal.next_after(instant)
    assert slot is not None and slot > instant
    assert (slot - (start or 0)) % step == 0
    assert slot - step <= max(instant, (start or 0) - step)
    assert cal.next_after(slot - 1) == slot
