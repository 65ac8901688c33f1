"""One attempt of a flow action step: render its args, then call the connector.

The attempt's outcome is plain data (:class:`~procflow.runtime.interpret.actions.ActionAttempt`);
the flow machine decides what it means (bind, retry, fail) and commits it. Secrets read by
``secret()`` and the connector's secret config live only in this attempt's memory; everything that
leaves it is masked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from procflow.config import raw
from procflow.errors import ExprError, SecretMissing
from procflow.expr import EvalContext, render_value
from procflow.model.ir import ActionStep, ConnectorManifest
from procflow.runtime.data.secrets import Masker
from procflow.runtime.interpret.actions import ActionAttempt, Caller, run_action

__all__ = ["ActionAttempt", "SecretReader", "attempt_action"]


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
            path = raw("PROCFLOW_SECRETS_FILE", self.environ)
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
    try:
        args = render_value(dict(step.args), env, EvalContext(now=eval_ctx.now, secret=secrets))
    except ExprError as exc:  # the message may quote a secret() value: masked
        masker = Masker(secrets.used)
        error = masker.mask(f"args: {exc.message}")
        return ActionAttempt(error=error, kind="expression", final=True), masker
    except SecretMissing as exc:  # the environment may be fixed before the next attempt
        return ActionAttempt(error=str(exc)), Masker(secrets.used)
    caller = Caller(run_id, step.id, attempt, f"{run_id}/{path}", project_dir)
    timeout = step.mods.timeout.total_seconds() if step.mods.timeout else None
    out = run_action(
        manifest, step.action, args, caller, environ=environ, timeout=timeout, hide=secrets.used
    )
    return out, out.masker
