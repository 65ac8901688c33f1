"""One attempt of a flow action step: render args, resolve config, call the connector.

The attempt's outcome is plain data (:class:`ActionAttempt`); the flow machine decides what it
means (bind, retry, fail) and commits it. Secrets read by ``secret()`` and the connector's
secret config live only in this attempt's memory; everything that leaves it is masked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from procflow.connectors.actions import (
    ActionTimeout,
    call_action,
    check_args,
    load_action,
    resolve_config,
)
from procflow.errors import ExprError, NonRetryableError, ProcflowError
from procflow.expr import EvalContext, render_value
from procflow.model.ir import ActionStep, ConnectorManifest
from procflow.runtime import faults
from procflow.runtime.context import StepContext, step_logger
from procflow.runtime.secrets import Masker
from procflow.runtime.transition import OutboxMessage


class SecretMissing(ProcflowError):
    """``secret(name)`` named a variable the worker does not have."""


@dataclass
class ActionAttempt:
    result: dict[str, Any] | None = None
    error: str | None = None
    kind: str = "action"  # the error's type: action | expression | timeout
    final: bool = False  # no further attempts (NonRetryableError, a bad rendered arg)
    logs: list[tuple[str, str]] = field(default_factory=list)
    outbox: list[OutboxMessage] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)  # recipients a built-in really sent to


class SecretReader:
    """``secret(name)``: the worker's environment, else ``PROCFLOW_SECRETS_FILE`` (``NAME=value``
    lines, read when an attempt first asks). Remembers what it handed out, for masking."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.used: list[str] = []
        self._file: dict[str, str] | None = None

    def __call__(self, name: str) -> str:
        value = self.environ.get(name)
        if value is None:
            value = self._from_file().get(name)
        if value is None:
            raise SecretMissing(
                f"secret [{name}] is not set: define the environment variable {name} for the "
                "worker, or a NAME=value line in the file named by PROCFLOW_SECRETS_FILE"
            )
        self.used.append(value)
        return value

    def _from_file(self) -> dict[str, str]:
        if self._file is None:
            self._file = {}
            path = self.environ.get("PROCFLOW_SECRETS_FILE")
            if path and Path(path).is_file():
                for line in Path(path).read_text(encoding="utf-8").splitlines():
                    key, sep, value = line.partition("=")
                    if sep and key.strip() and not key.lstrip().startswith("#"):
                        self._file[key.strip()] = value.strip()
        return self._file


def attempt_action(
    step: ActionStep,
    manifest: ConnectorManifest,
    env: Mapping[str, Any],
    eval_ctx: EvalContext,
    *,
    run_id: str,
    path: str,
    attempt: int,
    project_dir: str,
    environ: Mapping[str, str],
) -> tuple[ActionAttempt, Masker]:
    """Run one attempt; returns its outcome and the masker for everything it produced."""
    secrets = SecretReader(environ)
    out = ActionAttempt()
    config: dict[str, Any] = {}
    masker = Masker(())
    try:
        ctx_eval = EvalContext(now=eval_ctx.now, secret=secrets)
        try:
            args = render_value(dict(step.args), env, ctx_eval)
        except ExprError as exc:  # the message may quote a secret() value: masked below
            out.error, out.kind, out.final = f"args: {exc.message}", "expression", True
            masker = _masker(secrets, manifest, config)
            out.error = masker.mask(out.error)
            return out, masker
        config = resolve_config(manifest, environ)
        masker = _masker(secrets, manifest, config)
        fn = load_action(manifest, step.action, project_dir)
        check_args(manifest, step.action, args)
        log, lines = step_logger(run_id, step.id)
        ctx = StepContext(
            run_id=run_id, step=step.id, attempt=attempt,
            idempotency_key=f"{run_id}/{path}", project_dir=project_dir, log=log,
            args=args, config=config,
        )  # fmt: skip
        out.logs = lines.lines
        timeout = step.mods.timeout.total_seconds() if step.mods.timeout else None
        faults.point("before_delegate")
        try:
            out.result = masker.mask_data(call_action(fn, ctx, args, timeout))
        finally:  # the side effect happened, failed or not; nothing is committed yet
            out.outbox = list(ctx.outbox)
            out.sent = list(ctx.sent)
            faults.point("after_delegate")
    except SecretMissing as exc:
        out.error = str(exc)
    except ActionTimeout as exc:
        out.error, out.kind = str(exc), "timeout"
    except NonRetryableError as exc:
        out.error, out.final = _message(exc), True
    except Exception as exc:  # the action's failure is the attempt's, whatever it raised
        out.error = _message(exc)
    masker = _masker(secrets, manifest, config)
    if out.error is not None:
        out.error = masker.mask(out.error)
    for message in out.outbox:
        message.body = masker.mask(message.body) if message.body else message.body
        message.subject = masker.mask(message.subject) if message.subject else message.subject
    out.logs = [(level, masker.mask(line)) for level, line in out.logs]
    return out, masker


def _masker(
    secrets: SecretReader, manifest: ConnectorManifest, config: Mapping[str, Any]
) -> Masker:
    hidden = [*secrets.used]
    hidden.extend(
        str(config[name])
        for name, item in manifest.config.items()
        if item.secret and name in config
    )
    return Masker(hidden)


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
