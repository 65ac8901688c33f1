"""Durations in the two syntaxes procflow accepts: short (``1h30m``) and ISO-8601 (``PT1H30M``).

Months and years are refused: they have no fixed length, and a durable timer must know exactly
when it is due. So is any duration written longer than :data:`MAX_DURATION` (100 years, either
sign): a timer that far ahead would fall past the last representable moment (the end of year
9999), and no process waits a century.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction
from typing import Any

from procflow.errors import DurationError

__all__ = [
    "MAX_DURATION",
    "format_duration",
    "format_short_duration",
    "parse_duration",
    "parse_short_duration",
]

MAX_DURATION = timedelta(days=36_525)  # 100 years of 365.25 days

_US_PER = {
    "w": 7 * 86_400 * 10**6,
    "d": 86_400 * 10**6,
    "h": 3_600 * 10**6,
    "m": 60 * 10**6,
    "s": 10**6,
    "ms": 10**3,
}
_UNIT_ORDER = ("w", "d", "h", "m", "s", "ms")
# "ms" must be tried before "m", or "500ms" would read as 500 minutes followed by garbage.
_SHORT_PART = re.compile(r"([0-9]+)(ms|w|d|h|m|s)")
_ISO = re.compile(
    r"P(?:(?P<Y>[0-9]+(?:[.,][0-9]+)?)Y)?(?:(?P<MO>[0-9]+(?:[.,][0-9]+)?)M)?"
    r"(?:(?P<W>[0-9]+(?:[.,][0-9]+)?)W)?(?:(?P<D>[0-9]+(?:[.,][0-9]+)?)D)?"
    r"(?:T(?:(?P<H>[0-9]+(?:[.,][0-9]+)?)H)?(?:(?P<MI>[0-9]+(?:[.,][0-9]+)?)M)?"
    r"(?:(?P<S>[0-9]+(?:[.,][0-9]+)?)S)?)?"
)
_ISO_US = {"W": _US_PER["w"], "D": _US_PER["d"], "H": _US_PER["h"], "MI": _US_PER["m"], "S": 10**6}
# Longer digit runs cannot fit a timedelta anyway; refusing early keeps int() cheap.
_MAX_DIGITS = 18
_EXAMPLES = "e.g. 30s, 5m, 1h30m, 2d, or ISO-8601 PT30S, P1D"


def _to_timedelta(micros: int, text: str) -> timedelta:
    if micros > MAX_DURATION // timedelta(microseconds=1):
        raise DurationError(
            f"duration [{text}] is too large: procflow accepts at most 100 years (36525d)"
        )
    return timedelta(microseconds=micros)


def parse_short_duration(text: str) -> timedelta:
    """Parse the short form only (``500ms 30s 5m 2h 1d 1w``, combined largest unit first)."""
    pos = 0
    last_rank = -1
    total = 0
    if not text:
        raise DurationError(f"empty duration; write {_EXAMPLES}")
    while pos < len(text):
        m = _SHORT_PART.match(text, pos)
        if m is None:
            raise DurationError(f"[{text}] is not a valid duration; write {_EXAMPLES}")
        digits, unit = m.group(1), m.group(2)
        rank = _UNIT_ORDER.index(unit)
        if rank <= last_rank:
            raise DurationError(
                f"[{text}] is not a valid duration: units go from largest to smallest, "
                f"each at most once (e.g. 1h30m)"
            )
        if len(digits) > _MAX_DIGITS:
            raise DurationError(f"duration [{text}] is too large")
        last_rank = rank
        total += int(digits) * _US_PER[unit]
        pos = m.end()
    return _to_timedelta(total, text)


def _parse_iso(body: str, text: str) -> timedelta | None:
    m = _ISO.fullmatch(body)
    if m is None or body in ("P", "PT") or body.endswith("T"):
        return None
    if m.group("Y") is not None or m.group("MO") is not None:
        raise DurationError(f"[{text}]: months and years have no fixed length; use days, e.g. P30D")
    present = [k for k in ("W", "D", "H", "MI", "S") if m.group(k) is not None]
    total = Fraction(0)
    for i, key in enumerate(present):
        raw = m.group(key).replace(",", ".")
        if "." in raw and i != len(present) - 1:
            raise DurationError(f"[{text}]: only the smallest unit may have a fraction")
        if len(raw) > _MAX_DIGITS + 8:
            raise DurationError(f"duration [{text}] is too large")
        total += Fraction(raw) * _ISO_US[key]
    return _to_timedelta(round(total), text)


def parse_duration(text: Any, *, iso_only: bool = False) -> timedelta:
    """Parse a duration; ``iso_only`` refuses the short form (the intent dialect's ``every``).

    Zero and negative durations (a leading ``-``) are accepted; callers decide whether they make
    sense where the duration is used.
    """
    if isinstance(text, bool) or not isinstance(text, str):
        shown = "true" if text is True else "false" if text is False else text
        hint = "PT30S" if iso_only else "30s or PT30S"
        raise DurationError(f"[{shown}] is not a duration; write e.g. {hint}")
    stripped = text.strip()
    negative = stripped.startswith("-")
    body = stripped[1:] if negative else stripped
    result: timedelta | None = None
    if body.startswith("P"):
        result = _parse_iso(body, text)
    if result is None:
        if iso_only:
            try:
                short = parse_short_duration(body)
            except DurationError:
                raise DurationError(
                    f"[{text}] is not an ISO-8601 duration; write e.g. PT30S, PT5M, PT1H or P1D"
                ) from None
            sign = "-" if negative else ""
            raise DurationError(
                f"[{text}] is not an ISO-8601 duration; write {sign}{format_duration(short)}"
            )
        if body.startswith("P"):
            raise DurationError(f"[{text}] is not a valid duration; write {_EXAMPLES}")
        result = parse_short_duration(body)
    return -result if negative else result


def _split(td: timedelta) -> tuple[str, int, int, int, int, int]:
    micros = td // timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    days, rem = divmod(micros, _US_PER["d"])
    hours, rem = divmod(rem, _US_PER["h"])
    minutes, rem = divmod(rem, _US_PER["m"])
    seconds, frac = divmod(rem, 10**6)
    return sign, days, hours, minutes, seconds, frac


def format_duration(td: timedelta) -> str:
    """ISO-8601 text: ``PT30S``, ``P1D``, ``PT1H30M``, ``PT0.5S`` (days never fold into weeks)."""
    sign, days, hours, minutes, seconds, frac = _split(td)
    date_part = f"{days}D" if days else ""
    time_part = ""
    if hours:
        time_part += f"{hours}H"
    if minutes:
        time_part += f"{minutes}M"
    if seconds or frac:
        time_part += str(seconds)
        if frac:
            time_part += "." + f"{frac:06d}".rstrip("0")
        time_part += "S"
    if not date_part and not time_part:
        return "PT0S"
    return f"{sign}P{date_part}" + (f"T{time_part}" if time_part else "")


def format_short_duration(td: timedelta) -> str:
    """Short-form text used when showing a duration literal back in an expression (``1h30m``).

    Sub-millisecond parts have no short form; they only arise from arithmetic, never from source.
    """
    sign, days, hours, minutes, seconds, frac = _split(td)
    out = "".join(
        f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")) if n
    )
    if frac:
        out += f"{frac // 1000}ms" if frac % 1000 == 0 else f"{frac}us"
    return sign + (out or "0s")
