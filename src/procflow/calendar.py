"""When a schedule's slots fall: the calendar of a ``cron``, an ``every`` or an ``at`` schedule.

A :class:`Calendar` answers one question cheaply, "the first slot strictly after this instant",
in microseconds since the Unix epoch (UTC) like every instant in procflow; a worker asks it once
per fired slot. :func:`calendar_of` builds one and refuses a bad spec with a one-line
:class:`~procflow.errors.CalendarError`.

Cron expressions are matched by ``cronsim`` (Debian cron's semantics, with ``L``, ``LW``,
``5L`` and ``MON#2``). Measured against the spec's daylight-saving rules it got every
five-field case right where croniter fired the autumn's repeated local time twice; what it
lacks is done here on top of it, each with its reason below: the ``@daily`` names, Spring's
``?``, and one DST rule for every cron (cronsim keeps Debian's, which treats ``0 */2 * * *``
like a minute-level cron and leaves six-field crons without any DST handling). The rule
(docs/reference/flow.md, "Daylight saving"):

- a cron that fires in every hour of the day (its hour field is ``*``: ``*/5 * * * *``,
  ``0 * * * *``) runs on **real time**: cronsim walks the instants, so the spring gap has no
  slot of its own and the autumn's repeated hour fires in both of its passes;
- any other cron names wall-clock times: a local time in the spring gap fires once, at the
  first instant after the gap; a local time that occurs twice fires at its first occurrence.

Only the standard library, cronsim and :mod:`procflow.errors` are imported: this module sits in
the base layer, below the model that compiles schedules and the runtime that fires them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from typing import Protocol
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError

from procflow.errors import CalendarError

__all__ = ["Calendar", "calendar_of", "zone_problem"]

SECOND = 1_000_000  # microseconds
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)

# cronsim reads five or six fields only; these are the names cron and Spring both know.
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
SPRING_FIELDS = ("second", *FIELDS)
_RANGES = {
    "second": "0-59",
    "minute": "0-59",
    "hour": "0-23",
    "day-of-month": "1-31, L or LW",
    "month": "1-12 or JAN-DEC",
    "day-of-week": "0-7 or SUN-SAT, 5L, MON#2",
}
# A cron is searched from this instant once when it is built: one that never fires is refused.
_PROBE = datetime(2000, 1, 1)


class _Rule(Protocol):
    """One kind of calendar, unbounded: ``start`` and ``end`` are the Calendar's."""

    def first_after(self, instant: int) -> int | None: ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Calendar:
    """The slots of one schedule: its rule, no slot before ``start`` nor after ``end``."""

    rule: _Rule
    start: int | None = None
    end: int | None = None

    def next_after(self, instant: int) -> int | None:
        """The first slot strictly after ``instant``; None when the calendar has ended."""
        if self.start is not None and instant < self.start:
            instant = self.start - 1  # a slot at `start` itself counts
        slot = self.rule.first_after(instant)
        if slot is None or (self.end is not None and slot > self.end):
            return None
        return slot

    def slots_between(self, after: int, until: int, limit: int) -> list[int]:
        """The slots in (``after``, ``until``], oldest first, at most ``limit`` of them."""
        slots: list[int] = []
        slot = self.next_after(after)
        while slot is not None and slot <= until and len(slots) < limit:
            slots.append(slot)
            slot = self.next_after(slot)
        return slots

    def describe(self) -> str:
        """The spec in words: ``0 6 * * MON-FRI Europe/Berlin``, ``every 15m``, ``at …Z``."""
        return self.rule.describe()


def calendar_of(
    *,
    cron: str | None = None,
    every_micros: int | None = None,
    at: int | None = None,
    timezone: str = "UTC",
    start: int | None = None,
    end: int | None = None,
    spring: bool = False,
) -> Calendar:
    """The calendar of a schedule spec; :class:`CalendarError` names the first problem.

    ``spring``: ``cron`` is the Intent File Specification's six-field Spring cron (seconds
    first, ``?`` for "any" in a day field); a five-field one is accepted then too.
    """
    given = [k for k, v in (("cron", cron), ("every", every_micros), ("at", at)) if v is not None]
    if len(given) != 1:
        found = f"; this one has {' and '.join(given)}" if given else ""
        raise CalendarError(f"a schedule has exactly one of cron, every or at{found}")
    problem = zone_problem(timezone)
    if problem is not None:
        raise CalendarError(problem, key="timezone")
    if start is not None and end is not None and end < start:
        raise CalendarError(
            f"end {_iso(end)} is before start {_iso(start)}; no slot could fall", key="end"
        )
    rule: _Rule
    if cron is not None:
        rule = _Cron(_cron_form(cron, spring), ZoneInfo(timezone), timezone)
    elif every_micros is not None:
        rule = _every(every_micros, start)
    else:
        assert at is not None
        _check_at(at, start, end)
        rule = _At(at)
    return Calendar(rule, start, end)


def zone_problem(name: str) -> str | None:
    """Why ``name`` is not an IANA time zone name (with the nearest known one); None if it is."""
    zones = _zones()
    if name in zones:
        return None
    near = _nearest_zone(name, zones)
    hint = f"; did you mean [{near}]?" if near else " (e.g. Europe/Berlin, America/New_York, UTC)"
    return f"[{name}] is not an IANA time zone{hint}"


# --- every and at --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Every:
    """Slots at ``origin + k * step``: exact elapsed time, no zone."""

    step: int
    origin: int

    def first_after(self, instant: int) -> int:
        if instant < self.origin:
            return self.origin
        return self.origin + ((instant - self.origin) // self.step + 1) * self.step

    def describe(self) -> str:
        return f"every {_short_duration(self.step)}"


def _every(step: int, start: int | None) -> _Every:
    if step < SECOND:
        raise CalendarError(f"every must be at least 1s, got {_short_duration(step)}", key="every")
    return _Every(step, 0 if start is None else start)


@dataclass(frozen=True, slots=True)
class _At:
    at: int

    def first_after(self, instant: int) -> int | None:
        return self.at if instant < self.at else None

    def describe(self) -> str:
        return f"at {_iso(self.at)}"


def _check_at(at: int, start: int | None, end: int | None) -> None:
    if start is not None and at < start:
        raise CalendarError(
            f"at {_iso(at)} is before start {_iso(start)}; its one slot could never fall",
            key="at",
        )
    if end is not None and at > end:
        raise CalendarError(
            f"at {_iso(at)} is after end {_iso(end)}; its one slot could never fall", key="at"
        )


# --- cron ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _CronForm:
    """A cron as cronsim reads it, and which DST rule applies to it."""

    text: str  # as written (whitespace collapsed), for describe()
    expr: str  # five or six fields for cronsim
    real_time: bool  # fires in every hour: walk instants, not wall-clock times


@dataclass(frozen=True, slots=True)
class _Cron:
    form: _CronForm
    zone: ZoneInfo
    zone_name: str

    def first_after(self, instant: int) -> int | None:
        moments = self._real_time(instant) if self.form.real_time else self._wall_clock(instant)
        try:
            for slot in moments:
                if slot > instant:
                    return slot
        except OverflowError:  # the search ran past year 9999
            return None
        return None  # cronsim found no match in 50 years

    def describe(self) -> str:
        return f"{self.form.text} {self.zone_name}"

    def _real_time(self, instant: int) -> Iterator[int]:
        # cronsim steps through UTC instants for a cron whose hour field starts with `*`
        # (and for every six-field one), reading each in the zone: both passes of a repeated
        # hour match, the local times of a gap never occur.
        begin = _datetime(instant).astimezone(self.zone)
        for moment in CronSim(self.form.expr, begin):
            yield _micros(moment)

    def _wall_clock(self, instant: int) -> Iterator[int]:
        # cronsim walks naive local times (no zone: plain calendar arithmetic); each is then
        # placed on the timeline by the spec's rule. Placing is monotonic, so the first local
        # time placed after `instant` is the slot; the walk starts at `instant`'s own local
        # time, which is placed at or before it (earlier in a repeated hour's second pass).
        local = _datetime(instant).astimezone(self.zone).replace(tzinfo=None)
        for moment in CronSim(self.form.expr, local):
            yield _place(moment, self.zone)


@lru_cache(maxsize=4096)
def _cron_form(text: str, spring: bool) -> _CronForm:
    """A cron checked and made ready for cronsim, cached by its text: every schedule of a flow
    deployed many times, and every calendar rebuilt by a worker, shares one."""
    fields = text.split()
    names = SPRING_FIELDS if spring else FIELDS
    if len(fields) == 1 and fields[0].startswith("@"):
        fields = _macro(text, fields[0]).split()
    elif len(fields) not in ((5, 6) if spring else (5,)):
        raise CalendarError(_field_count(text, len(fields), spring), key="cron")
    if len(fields) == 5:
        names = FIELDS
    fields = _spring_any(text, fields, names) if spring else _no_any(text, fields, names)
    expr = " ".join(fields)
    try:
        probe = CronSim(expr, _PROBE)
    except CronSimError as exc:
        raise CalendarError(_bad_field(text, fields, names, str(exc)), key="cron") from None
    if next(probe, None) is None:
        raise CalendarError(f"cron [{text}] never fires (no match in 50 years)", key="cron")
    real_time = len(probe.hours) == 24
    if real_time:  # "0-23" is "*" to cronsim only when written so (it checks the text)
        fields[names.index("hour")] = "*"
    return _CronForm(" ".join(text.split()), " ".join(fields), real_time)


def _macro(text: str, name: str) -> str:
    found = MACROS.get(name.lower())
    if found is None:
        near = difflib.get_close_matches(name.lower(), MACROS, n=1)
        hint = f"; did you mean [{near[0]}]?" if near else ""
        raise CalendarError(
            f"cron [{text}]: unknown name [{name}]{hint} (one of {', '.join(MACROS)})",
            key="cron",
        )
    return found


def _field_count(text: str, count: int, spring: bool) -> str:
    if spring:
        return (
            f"cron [{text}] has {count} fields; a Spring cron has 6 "
            f"({' '.join(SPRING_FIELDS)}) or 5 (without the second)"
        )
    hint = "; for seconds use every" if count == 6 else ""
    return f"cron [{text}] has {count} fields; it needs 5 ({' '.join(FIELDS)}){hint}"


def _spring_any(text: str, fields: list[str], names: tuple[str, ...]) -> list[str]:
    # Spring's `?` ("no specific value") is allowed in a day field only; it means what `*`
    # means to cron there (the other day field alone decides).
    out = []
    for value, name in zip(fields, names, strict=True):
        if value == "?" and name in ("day-of-month", "day-of-week"):
            value = "*"
        elif "?" in value:
            raise CalendarError(
                f"cron [{text}]: [?] is allowed alone in day-of-month or day-of-week only, "
                f"not in the {name} field [{value}]",
                key="cron",
            )
        out.append(value)
    return out


def _no_any(text: str, fields: list[str], names: tuple[str, ...]) -> list[str]:
    for value, name in zip(fields, names, strict=True):
        if "?" in value:
            raise CalendarError(
                f"cron [{text}]: bad {name} field [{value}]; [?] is a Spring cron's, write [*]",
                key="cron",
            )
    return fields


def _bad_field(text: str, fields: list[str], names: tuple[str, ...], problem: str) -> str:
    """cronsim says ``Bad minute``; the message names the field as written and its range."""
    name = problem.removeprefix("Bad ").strip()
    if name not in names:
        return f"cron [{text}]: {problem}"
    value = fields[names.index(name)]
    return f"cron [{text}]: bad {name} field [{value}] ({name}: {_RANGES[name]})"


def _place(local: datetime, zone: ZoneInfo) -> int:
    """The instant a wall-clock time fires at: its first occurrence when it occurs twice
    (``fold=0``), the first instant after the gap when it does not occur at all."""
    aware = local.replace(tzinfo=zone)  # fold=0: the earlier of two readings
    if aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == local:
        return _micros(aware)
    return _gap_end(local, zone)


def _gap_end(local: datetime, zone: ZoneInfo) -> int:
    """The instant a clock jump that skipped ``local`` happened, to the second.

    Read with the offset after the jump (``fold=1``), ``local`` is an instant before the jump;
    read with the offset before it (``fold=0``), one at or after it. Between them the offset
    changes once, at the jump: a binary search finds it (gaps of hours, even Samoa's whole
    skipped day, take a handful of steps).
    """
    before = _micros(local.replace(tzinfo=zone, fold=1)) // SECOND
    after = _micros(local.replace(tzinfo=zone, fold=0)) // SECOND
    offset_after = _datetime(after * SECOND).astimezone(zone).utcoffset()
    while after - before > 1:
        middle = (before + after) // 2
        if _datetime(middle * SECOND).astimezone(zone).utcoffset() == offset_after:
            after = middle
        else:
            before = middle
    return after * SECOND


# --- zones ---------------------------------------------------------------------------------


@cache
def _zones() -> frozenset[str]:
    # The names zoneinfo can load from the system's database or the tzdata package (the
    # directory walk takes tens of milliseconds: once per process). Some systems list their own
    # `localtime` there: it is no IANA name, and it would read differently on each machine.
    return frozenset(available_timezones()) - {"localtime", "posixrules"}


def _nearest_zone(name: str, zones: frozenset[str]) -> str | None:
    folded = name.casefold().replace(" ", "_")
    by_case = [z for z in zones if z.casefold() == folded]
    if by_case:
        return by_case[0]
    # "Berlin" for Europe/Berlin; the canonical area first (America/ before US/ and Etc/)
    by_city = sorted(z for z in zones if z.rsplit("/", 1)[-1].casefold() == folded)
    if by_city:
        return by_city[0]
    near = difflib.get_close_matches(name, sorted(zones), n=1, cutoff=0.8)
    return near[0] if near else None


# --- instants ------------------------------------------------------------------------------


def _datetime(instant: int) -> datetime:
    return _EPOCH + timedelta(microseconds=instant)


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICRO


def _iso(instant: int) -> str:
    moment = _datetime(instant)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{moment.microsecond:06d}" if moment.microsecond else "") + "Z"


def _short_duration(micros: int) -> str:
    """``15m``, ``1h30m``, ``1d``: the flow dialect's short form, largest units first."""
    if micros < 0:
        return "-" + _short_duration(-micros)
    parts = []
    rest = micros
    for unit, size in (("d", 86_400 * SECOND), ("h", 3600 * SECOND), ("m", 60 * SECOND)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    seconds, micro = divmod(rest, SECOND)
    if seconds:
        parts.append(f"{seconds}s")
    if micro:
        parts.append(f"{micro // 1000}ms" if micro % 1000 == 0 else f"{micro}us")
    return "".join(parts) or "0s"
