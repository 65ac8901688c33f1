"""Label text shared by the builders and the emitters."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from procflow.model.ir import RetryPolicy

MAX_LINE = 80  # label lines longer than this are cut with "…"


def clean(text: str) -> str:
    """One line, whitespace collapsed, cut at MAX_LINE characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE else flat[: MAX_LINE - 1] + "…"


def source_text(value: object) -> str:
    """The source text of a template (``{{ }}`` around a whole expression dropped)."""
    text = value if isinstance(value, str) else getattr(value, "text", None)
    text = text.strip() if isinstance(text, str) else str(value)
    if text.startswith("{{") and text.endswith("}}") and text.count("{{") == 1:
        return text[2:-2].strip()
    return text


def short_duration(td: timedelta) -> str:
    """The flow dialect's short form: ``30s``, ``1h30m``, ``24h``, ``2d`` (days from two up)."""
    total_ms = round(td.total_seconds() * 1000)
    days, rest = divmod(total_ms, 86_400_000) if total_ms >= 2 * 86_400_000 else (0, total_ms)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, ms = divmod(rest, 1000)
    parts = ((days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s"), (ms, "ms"))
    return "".join(f"{v}{u}" for v, u in parts if v) or "0s"


def retry_line(retry: RetryPolicy, fmt: Callable[[timedelta], str]) -> str:
    """A step's retry policy, with durations in the dialect's own notation (``fmt``)."""
    return f"retry {retry.count} × {fmt(retry.every)}"
