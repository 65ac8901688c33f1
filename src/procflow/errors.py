"""procflow's one exception tree.

Every error procflow raises on purpose derives from :class:`ProcflowError`; anything else reaching
the CLI is a bug. Messages say what went wrong, where, and how to fix it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from procflow.model.source import Diagnostic


class ProcflowError(Exception):
    """Base of every error procflow raises on purpose.

    ``exit_code`` is what the CLI exits with when this error ends a command (and what the HTTP
    face maps to a status): 1 the definition or run is bad, 2 the request is unusable.
    """

    exit_code: ClassVar[int] = 1


# --- definitions -----------------------------------------------------------------------------


class DefinitionError(ProcflowError):
    """A definition file is invalid; carries every problem found in it."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        errors = [d for d in diagnostics if d.severity == "error"]
        first = errors[0].format() if errors else "invalid definition"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(first + more)


# --- expressions -----------------------------------------------------------------------------


class ExprError(ProcflowError):
    """An expression could not be parsed or evaluated.

    ``offset`` is the 0-based character index into the expression text where the problem is,
    or ``None`` when the problem has no single place.
    """

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


class ExprSyntaxError(ExprError):
    """The expression text is not valid (also: too long, nested too deep)."""


class ExprEvalError(ExprError):
    """The expression is valid but cannot be evaluated on these values."""


class DurationError(ProcflowError):
    """A duration literal is malformed (both syntaxes: ``1h30m`` and ISO-8601 ``PT1H30M``)."""


# --- requests and runs -----------------------------------------------------------------------


class UsageError(ProcflowError):
    """A request that cannot be used: unknown name or id, bad input, a rejected write (exit 2)."""

    exit_code: ClassVar[int] = 2


class ConfigError(UsageError):
    """A setting (an environment variable or its flag) has a value procflow cannot use."""

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class NotFoundError(UsageError):
    """An unknown definition, run, record, task or event type."""


class StepFailure(ProcflowError):
    """A step attempt failed (raised by the runtime, caught and routed by it)."""


class NonRetryableError(ProcflowError):
    """Raised by a delegate or connector action to skip the remaining retry attempts."""
