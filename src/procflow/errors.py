"""procflow's one exception tree.

Every error procflow raises on purpose derives from :class:`ProcflowError`; anything else reaching
the CLI is a bug. Messages say what went wrong, where, and how to fix it. The run, step, entity,
record or definition an error concerns are keyword-only attributes (``None`` when the raising code
does not know them); an error about one input field has ``field``, so the HTTP face can fill a
problem's ``errors[{field, message}]``. ``exit_code``: 1 the definition or run is bad, 2 the
request is unusable (every ``UsageError``).

    ProcflowError         exit 1
      BadDefinitionError    the definition is bad
        DefinitionError       an invalid file: diagnostics
        DeployError           not deployable over what is deployed: definition, entity
      ExprError             an expression cannot be parsed or evaluated: offset
        ExprSyntaxError       not valid text
        ExprEvalError         valid, but not on these values
      DurationError         a malformed duration literal
      CalendarError         a schedule's calendar cannot be built: key
      UsageError            exit 2: the request is unusable
        ConfigError           a setting's value: setting
        MissingExtraError     an optional part of procflow is not installed: extra
        NotFoundError         unknown definition, run, record, task: kind, key, entity
        StateConflictError    a run's, task's or schedule's state forbids it now (HTTP 409)
          RunStateError         the run's status forbids it (cancel, retry): run_id, status
        InputError            a flow's inputs: flow, input (= field), problems
        RecordError           a record write: entity, field, record_id, problems
        EventError            an event: event_type, field
        TaskError             completing a task: task_id, run_id, step, field
          TaskNotOpenError      closed, or its run ended (also a StateConflictError: 409)
        ForbiddenError        the caller may not do this (another's task, HTTP 403): user, task_id
      NotPermittedError     the caller's roles do not allow this (HTTP 403, exit 1): user, roles
      LimitReached          a flow's concurrency refuses a start (HTTP 409, exit 1): flow, key
      StepFailure           a step attempt failed
      CallRefused           a call step's flow cannot start a run now
      NonRetryableError     skip the remaining retry attempts
      ContractError         a delegate broke its step's contract: run_id, step, var
      CodeLoadError         the project's code cannot be imported
      SecretMissing         secret(name) of an unset variable
      SecretKeyError        the var key is missing, unreadable or wrong
      VarValueError         a var value that cannot be stored
      HttpProblem           the HTTP face refuses a request: status, errors, headers
      StoreError            the database is missing, uninitialised, or of another version
        StoreConflict         a transaction rolled back by a concurrent one: safe to redo
          FlowsChanged        an event checked against flows since redeployed: safe to redo
      ConnectorError        calling a connector action failed: connector, action
        ConnectorConfigError  a required config value is missing: item, env
        ConnectorLoadError    the action's code cannot be imported or found
        ActionTimeout         the attempt outran the step's timeout: seconds, step
        ActionResultError     the action returned no JSON mapping: step
        HttpRequestError      http.request could not send or receive
        HttpStatusError       http.request got an unaccepted status: status
        SlackError            slack.post failed, may work again: error
          SlackFatalError       refused for good (also a NonRetryableError)
        SmtpError             email.send failed this time: code
          SmtpFatalError        refused for good (also a NonRetryableError)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol


class DiagnosticLike(Protocol):
    """What :class:`DefinitionError` needs of a diagnostic (``procflow.model.source.Diagnostic``).

    A protocol rather than an import: this module sits below every other one, so it imports
    nothing from procflow.
    """

    @property
    def severity(self) -> str: ...

    def format(self, display_file: str | None = None) -> str: ...

    def as_json(self, display_file: str | None = None) -> dict[str, object]: ...


class ProcflowError(Exception):
    """Base of every error procflow raises on purpose.

    ``exit_code`` is what the CLI exits with when this error ends a command (and what the HTTP
    face maps to a status): 1 the definition or run is bad, 2 the request is unusable.
    """

    exit_code: ClassVar[int] = 1


# --- definitions -----------------------------------------------------------------------------


class BadDefinitionError(ProcflowError):
    """The definition is bad (exit 1): invalid in itself, or unusable over what is deployed."""

    exit_code: ClassVar[int] = 1


class DefinitionError(BadDefinitionError):
    """A definition file is invalid; carries every problem found in it."""

    def __init__(self, diagnostics: Sequence[DiagnosticLike]) -> None:
        self.diagnostics = list(diagnostics)
        errors = [d for d in diagnostics if d.severity == "error"]
        first = errors[0].format() if errors else "invalid definition"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(first + more)


class DeployError(BadDefinitionError):
    """A valid file that cannot be deployed over what is already there: a name deployed in the
    other dialect, an entity another file declares, an incompatible entity change, a bad seed.

    ``definition`` is the name of the definition (flow or application) being deployed;
    ``entity`` the entity in question, if any.
    """

    def __init__(
        self, message: str, *, definition: str | None = None, entity: str | None = None
    ) -> None:
        super().__init__(message)
        self.definition = definition
        self.entity = entity


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


class CalendarError(ProcflowError):
    """A schedule's calendar cannot be built (``procflow.calendar``): a bad cron, ``every``
    under a second, an unknown time zone, ``end`` before ``start``, two of cron/every/at.

    ``key`` is the schedule key the problem is about (``cron``, ``every``, ``at``, ``timezone``,
    ``start``, ``end``), so a compiler can report it at that key; ``None`` when it is about
    several (none or two of cron/every/at).
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


# --- requests --------------------------------------------------------------------------------


class UsageError(ProcflowError):
    """A request that cannot be used: unknown name or id, bad input, a rejected write (exit 2)."""

    exit_code: ClassVar[int] = 2


class ConfigError(UsageError):
    """A setting (an environment variable or its flag) has a value procflow cannot use."""

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class MissingExtraError(UsageError):
    """A command needs an optional part of procflow (an extra) that is not installed.

    ``what`` is what needs it (``procflow serve``, ``PostgreSQL``), ``extra`` the extra's name.
    """

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"{what} needs the {extra} extra: pip install 'procflow[{extra}]'")
        self.extra = extra


class NotFoundError(UsageError):
    """An unknown definition, run, record, task or event type.

    ``kind`` says which (``definition``, ``run``, ``record``, ``entity``, ``task``,
    ``event type``) and ``key`` is what was looked up (a record's id, with its ``entity``).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        key: str | int | None = None,
        entity: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.key = key
        self.entity = entity

    @classmethod
    def run(cls, run_id: str) -> NotFoundError:
        return cls(f"no run with id [{run_id}]", kind="run", key=run_id)

    @classmethod
    def definition(cls, name: str) -> NotFoundError:
        return cls(f"no deployed definition named [{name}]", kind="definition", key=name)

    @classmethod
    def record(cls, entity: str, id_: int) -> NotFoundError:
        return cls(f"no [{entity}] record with id {id_}", kind="record", key=id_, entity=entity)


class StateConflictError(UsageError):
    """The state of a run, task or schedule forbids the request now (HTTP 409): it ended, it is
    not open, it is not paused."""


class LimitReached(ProcflowError):
    """A flow with ``concurrency: { on_limit: refuse }`` has every place for the key taken:
    the start is refused and nothing is stored (exit 1, HTTP 409: the request is sound, the
    flow's state refuses it now)."""

    def __init__(self, message: str, *, flow: str, key: str) -> None:
        super().__init__(message)
        self.flow = flow
        self.key = key


class RunStateError(StateConflictError):
    """The run's status forbids the request (cancelling an ended run, retrying one that has not
    failed); ``status`` is the run's status then."""

    def __init__(self, message: str, *, run_id: str, status: str) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.status = status


class InputError(UsageError):
    """The inputs given to start a run are unusable; ``problems`` lists each one (unprefixed).

    ``input`` (also ``field``) is the input the first problem is about, or ``None`` when that
    problem is about the command line's form rather than one input.
    """

    def __init__(self, flow: str, problems: Sequence[str], *, input: str | None = None) -> None:
        self.flow = flow
        self.problems = list(problems)
        self.input = input
        self.field = input
        super().__init__("\n".join(f"flow [{flow}]: {p}" for p in self.problems))


class RecordError(UsageError):
    """A record write (or seed row, or single value) that violates its entity's declaration.

    ``problems`` lists every ``(field, problem)`` found, in declaration order (unknown keys last);
    ``field`` is the first problem's field name, for callers that point at one place;
    ``record_id`` is the id of the record being updated.
    """

    def __init__(
        self,
        problems: Sequence[tuple[str, str]],
        *,
        entity: str | None = None,
        action: str = "write",
        where: str | None = None,
        record_id: int | None = None,
    ) -> None:
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        self.entity = entity
        self.record_id = record_id
        self.field: str | None = self.problems[0][0] if self.problems else None
        head = f"cannot {action} [{entity}] record" if entity is not None else "invalid value"
        if where:
            head += f" ({where})"
        super().__init__(_record_message(head, self.problems))


def _record_message(head: str, problems: Sequence[tuple[str, str]]) -> str:
    lines = [f"[{name}]: {problem}" for name, problem in problems]
    if len(lines) == 1:
        return f"{head}: {lines[0]}"
    return f"{head} ({len(lines)} problems):\n" + "\n".join(f"  {line}" for line in lines)


class EventError(UsageError):
    """An event that cannot be accepted (unknown type, bad payload, bad envelope).

    ``event_type`` is the event's type when it has one; ``field`` the envelope key (``type``,
    ``data``, ``id``) or payload field (dotted, as in ``correlate_on``) the first problem is about.
    """

    def __init__(
        self, message: str, *, event_type: str | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.event_type = event_type
        self.field = field


class TaskError(UsageError):
    """A task that cannot be completed this way: not open, its run ended, or an action or field
    its form does not allow (``field`` is ``action`` or the form field). A task the caller may
    not complete is a :class:`ForbiddenError`."""

    def __init__(
        self,
        message: str,
        *,
        task_id: int | None = None,
        run_id: str | None = None,
        step: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.run_id = run_id
        self.step = step
        self.field = field


class ForbiddenError(UsageError):
    """The caller may not do this: completing a task assigned to another user, or to a role
    the caller is not a member of (the HTTP face answers 403; the CLI exits 2). ``user`` is the
    caller's name; ``task_id``, ``run_id`` and ``step`` name the task when it is one."""

    def __init__(
        self,
        message: str,
        *,
        user: str,
        task_id: int | None = None,
        run_id: str | None = None,
        step: str | None = None,
    ) -> None:
        super().__init__(message)
        self.user = user
        self.task_id = task_id
        self.run_id = run_id
        self.step = step


class NotPermittedError(ProcflowError):
    """The caller's roles do not allow this action (the role table, or an intent file's record
    permissions): HTTP 403, CLI exit 1. ``roles`` are the roles that would allow it (one
    suffices); ``entity`` names the records' entity for a record action."""

    def __init__(
        self, message: str, *, user: str, roles: tuple[str, ...], entity: str | None = None
    ) -> None:
        super().__init__(message)
        self.user = user
        self.roles = roles
        self.entity = entity


# --- runs and steps --------------------------------------------------------------------------


class TaskNotOpenError(TaskError, StateConflictError):
    """The task is completed or withdrawn, or its run has ended: nothing to complete now."""


class StepFailure(ProcflowError):
    """A step attempt failed (raised by the runtime, caught and routed by it)."""


class CallRefused(ProcflowError):
    """A call step's flow cannot start a run now (not deployed, not a flow, disabled): the step
    fails with ``error.type: call``."""


class NonRetryableError(ProcflowError):
    """Raised by a delegate or connector action to skip the remaining retry attempts."""


class ContractError(ProcflowError):
    """A delegate broke its step's declared contract (an undeclared var, an unset var).

    ``run_id`` and ``step`` say where; ``var`` is the var it read, set or deleted.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        step: str | None = None,
        var: str | None = None,
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.step = step
        self.var = var


class CodeLoadError(ProcflowError):
    """The project's code could not be imported."""


class SecretMissing(ProcflowError):
    """``secret(name)`` named a variable the worker does not have."""


class SecretKeyError(ProcflowError):
    """The secret key is missing, too short, unreadable, or not the one the data was sealed with."""


class VarValueError(ProcflowError):
    """A var value that cannot be stored (it is not JSON). The message never shows the value."""


# --- store -----------------------------------------------------------------------------------


class StoreError(ProcflowError):
    """The database is missing, not initialised, or at an unknown schema version."""


class StoreConflict(StoreError):
    """PostgreSQL rolled the transaction back to break a deadlock (or a serialisation
    conflict) with a concurrent one: nothing of it was committed, and doing it again is safe."""


class FlowsChanged(StoreConflict):
    """The deployed flows an event was checked against changed before its transaction stored
    it: nothing of it is committed, and doing it again (checked against them anew) is safe."""


# --- the HTTP face ---------------------------------------------------------------------------


class HttpProblem(ProcflowError):
    """A request the HTTP face refuses before or outside the engine (an unreadable body, no
    token, a bad signature, too large): answered as a problem document with ``status``;
    ``errors`` names each bad field, ``headers`` go with the answer."""

    def __init__(
        self,
        status: int,
        detail: str,
        errors: Sequence[dict[str, Any]] = (),
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = list(errors)
        self.headers = headers or {}


# --- connectors ------------------------------------------------------------------------------


class ConnectorError(ProcflowError):
    """Calling a connector action failed; ``connector`` and ``action`` name it when known.

    Raised by the runtime's call path (config, loading, timeout, result) and by the built-in
    connectors; an action's own failure is a failed attempt, so ``retry`` applies.
    """

    def __init__(
        self, message: str, *, connector: str | None = None, action: str | None = None
    ) -> None:
        super().__init__(message)
        self.connector = connector
        self.action = action


class ConnectorConfigError(ConnectorError):
    """A ``required`` config value of a connector is missing from the environment.

    ``item`` is the config item, ``env`` the environment variable it is read from (if any).
    """

    def __init__(self, message: str, *, connector: str, item: str, env: str | None = None) -> None:
        super().__init__(message, connector=connector)
        self.item = item
        self.env = env


class ConnectorLoadError(ConnectorError):
    """The code implementing a connector action cannot be imported or found."""


class ActionTimeout(ConnectorError):
    """The attempt ran longer than the step's ``timeout`` (its late result is discarded).

    ``seconds`` is that timeout; ``step`` the step whose attempt it was. ``virtual``: the time ran
    on the virtual clock only (a test fake that ``takes`` longer): the attempt fails once the
    clock reaches its start plus ``seconds``, not at once.
    """

    def __init__(
        self, message: str, *, seconds: float, step: str | None = None, virtual: bool = False
    ) -> None:
        super().__init__(message)
        self.seconds = seconds
        self.step = step
        self.virtual = virtual


class ActionResultError(ConnectorError):
    """An action returned something other than a JSON-compatible mapping (``step`` says whose)."""

    def __init__(self, message: str, *, step: str | None = None) -> None:
        super().__init__(message)
        self.step = step


class HttpRequestError(ConnectorError):
    """``http.request`` could not send the request or receive the response (network, timeout)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, connector="http", action="request")


class HttpStatusError(ConnectorError):
    """``http.request``: the response's ``status`` is not one of the accepted ones."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message, connector="http", action="request")
        self.status = status


class SlackError(ConnectorError):
    """``slack.post``: Slack refused or failed the call; trying again may work.

    ``error`` is Slack's error code, when it gave one.
    """

    def __init__(self, message: str, error: str | None = None) -> None:
        super().__init__(message, connector="slack", action="post")
        self.error = error


class SlackFatalError(SlackError, NonRetryableError):
    """``slack.post``: Slack refused the call for a reason no retry can fix (``invalid_auth``)."""

    def __init__(self, message: str, error: str) -> None:
        super().__init__(message, error)


class SmtpError(ConnectorError):
    """``email.send`` (and ``notify``): the message could not be sent this time (network, a 4xx
    answer); ``retry`` applies. ``code`` is the SMTP answer's code, when there was one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message, connector="email", action="send")
        self.code = code


class SmtpFatalError(SmtpError, NonRetryableError):
    """``email.send`` (and ``notify``): the server refused the message for good (a 5xx answer);
    not retried."""
