"""What a delegate or connector action sees of its attempt: :class:`StepContext`.

The public surface for connector code (the built-ins included): :class:`StepContext` and
:class:`KeptMessage`; it imports nothing of procflow but :mod:`procflow.errors`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from procflow.errors import ContractError


class VarsView(MutableMapping[str, Any]):
    """``ctx.vars``: reads only ``uses``/``produces`` names, writes only ``produces`` names.

    A breach is remembered even if the delegate swallows the exception, so the step fails anyway.
    """

    def __init__(
        self,
        step: str,
        produces: tuple[str, ...],
        uses: tuple[str, ...],
        load: Callable[[str], tuple[bool, Any]],
        *,
        run_id: str | None = None,
    ) -> None:
        self._run_id = run_id
        self._step = step
        self._produces = produces
        self._uses = uses  # tuples of a few names: a set per attempt would cost more than it saves
        self._load = load
        self.written: dict[str, Any] = {}
        self.breach: str | None = None

    def _fail(self, message: str, var: str) -> ContractError:
        self.breach = self.breach or message
        return ContractError(message, run_id=self._run_id, step=self._step, var=var)

    def __getitem__(self, name: str) -> Any:
        if name in self.written:
            return self.written[name]
        if name not in self._uses and name not in self._produces:
            raise self._fail(
                f"step [{self._step}] read var [{name}], which it neither uses nor produces; "
                f"add it to uses: in the definition",
                name,
            )
        is_set, value = self._load(name)
        if not is_set:
            raise self._fail(
                f"step [{self._step}] read var [{name}], which is not set "
                "(never produced, or already cleared)",
                name,
            )
        return value

    def __setitem__(self, name: str, value: Any) -> None:
        if name not in self._produces:
            raise self._fail(
                f"step [{self._step}] set var [{name}], which it does not produce; "
                "add it to produces: in the definition",
                name,
            )
        self.written[name] = value

    def __delitem__(self, name: str) -> None:
        raise self._fail(
            f"step [{self._step}] deleted var [{name}]; vars are cleared by clearAfter", name
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self.written)

    def __len__(self) -> int:
        return len(self.written)


@dataclass(frozen=True)
class KeptMessage:
    """A message a connector kept in ``ctx.outbox`` instead of sending it (outbox mode): stored
    with the step's commit and listed by ``procflow outbox list``."""

    channel: str  # email, slack, ...
    recipient: str
    subject: str | None
    body: str | None


@dataclass
class StepContext:
    """One per attempt (docs/connectors.md, "Writing an action"; docs/reference/intent.md)."""

    run_id: str
    step: str
    attempt: int
    idempotency_key: str
    project_dir: str
    log: logging.LoggerAdapter[logging.Logger]
    record: MutableMapping[str, Any] = field(default_factory=dict)
    vars: MutableMapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)
    args: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    # The attempt's timeout in seconds (None: the step sets none): an action passes it on to its
    # own I/O, so a request gives up when the attempt does.
    timeout: float | None = None
    # Messages a sender kept in outbox mode; committed with the step (never lost).
    outbox: list[KeptMessage] = field(default_factory=list)
    # Recipients a sender really sent to (history: ``message.sent``).
    sent: list[str] = field(default_factory=list)


class HistoryLog(logging.Logger):
    """A step's logger: collects the delegate's log lines (masked later) for the attempt's
    history entries. Not registered with :mod:`logging` (no global state), no parent, and no
    handler object per attempt (a ``logging.Handler`` costs a lock and a global registration)."""

    def __init__(self, name: str, lines: list[tuple[str, str]] | None = None) -> None:
        super().__init__(name)
        self.propagate = False
        self.lines: list[tuple[str, str]] = [] if lines is None else lines

    def callHandlers(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.DEBUG:
            try:
                self.lines.append((record.levelname.lower(), record.getMessage()))
            except Exception:  # a bad format string must not fail the step
                self.lines.append((record.levelname.lower(), str(record.msg)))
        if self.handlers:  # ones the delegate added itself
            super().callHandlers(record)


class StepLog(logging.LoggerAdapter[logging.Logger]):
    """``ctx.log``: the step's :class:`HistoryLog`, built on first use (most attempts log
    nothing); ``lines`` collects what it logs either way."""

    def __init__(self, name: str) -> None:  # no super().__init__: it would set ``logger``
        self.extra: Mapping[str, object] | None = {}
        self.lines: list[tuple[str, str]] = []
        self._name = name
        self._logger: logging.Logger | None = None

    @property
    def logger(self) -> logging.Logger:
        if self._logger is None:
            self._logger = HistoryLog(self._name, self.lines)
        return self._logger

    @logger.setter
    def logger(self, value: logging.Logger) -> None:  # the delegate swapped it: let it
        self._logger = value


def step_logger(run_id: str, step: str) -> tuple[logging.LoggerAdapter[logging.Logger], StepLog]:
    log = StepLog(f"procflow.run.{run_id}.{step}")
    return log, log
