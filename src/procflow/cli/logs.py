"""What ``procflow worker`` and ``procflow serve`` log, and how: ``--log-format text|json``
(``PROCFLOW_LOG_FORMAT``), on stderr, through the standard :mod:`logging` module.

A log call says what happened in its message and who it concerns in ``extra=``: ``run_id``,
``definition``, ``step``, ``attempt``, ``outcome``, ``duration_ms``, ``worker``. The text format
appends those as ``key=value``; the JSON format writes one object a line with ``ts``, ``level``,
``msg``, ``logger`` and each of them that applies. A message never holds a var, secret or token
value: log calls name runs and steps, never what they carry (a failed run's or an incident's
message is masked before it is logged; ``procflow.runtime.work.run_logs``).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

import click

from procflow.config import SETTINGS

__all__ = ["FIELDS", "JsonFormatter", "TextFormatter", "configure_logs", "log_format_option"]

FIELDS = ("run_id", "definition", "step", "attempt", "outcome", "duration_ms", "worker")
"""What a log line may say about whom it concerns (passed with ``extra=``)."""

# The loggers procflow writes to, and uvicorn's (serve): they all go through one handler.
LOGGERS = ("procflow", "uvicorn")

_FORMAT = SETTINGS["PROCFLOW_LOG_FORMAT"]
log_format_option = click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    envvar=_FORMAT.env,
    default=_FORMAT.default,
    show_default=True,
    show_envvar=True,
    help="How log lines on stderr look: text, or JSON objects one a line.",
)


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {
        name: getattr(record, name) for name in FIELDS if getattr(record, name, None) is not None
    }


class TextFormatter(logging.Formatter):
    """``2027-01-01T00:00:00.000Z INFO procflow.worker: worker started worker=host:1#ab12``."""

    def format(self, record: logging.LogRecord) -> str:
        about = "".join(f" {name}={value}" for name, value in _fields(record).items())
        line = (
            f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}{about}"
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts``, ``level``, ``msg``, ``logger``, the fields that apply,
    and ``error`` (the traceback) when an exception is logged."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
            "logger": record.name,
            **_fields(record),
        }
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class _Stderr(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a line is logged (a caller may swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def configure_logs(log_format: str, *, verbose: bool = False) -> None:
    """Send procflow's (and uvicorn's) log lines to stderr in ``log_format``: INFO and up, or
    DEBUG too (a worker's claims) with ``verbose``. Calling it again replaces the handler."""
    handler = _Stderr()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if isinstance(h, _Stderr)]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        if name == "procflow":
            logger.setLevel(logging.DEBUG if verbose else logging.INFO)
