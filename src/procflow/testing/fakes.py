"""Fakes a scenario installs for delegates, connector actions and called flows, and the calls
they answer.

A fake is installed where the engine looks for test doubles (the runtime's ``FAKES``,
``ACTION_FAKES`` and ``CALL_FAKES``), so the step runs exactly as it would with real code:
retries, ``onError``, ``optional``, timeouts and history are the engine's own. Scenarios run one
at a time in a process, so the tables are only ever filled by one scenario.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from procflow.errors import ActionTimeout, NonRetryableError
from procflow.model.flow.calls import call_steps
from procflow.model.ir import Delegate, Flow, Process, ServiceTask
from procflow.runtime.interpret.actions import ACTION_FAKES
from procflow.runtime.interpret.context import StepContext
from procflow.runtime.interpret.delegates import FAKES
from procflow.runtime.interpret.flow_call import CALL_FAKES, CallAsk
from procflow.testing.scenario_types import FakeSpec


class _FakeFailure(RuntimeError):
    """Stands for the failure a fake was told to produce: ``fail: N`` and ``raise:``."""


class CallLog:
    """How many calls each fake answered, by the name the test file gives it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def record(self, name: str) -> int:
        """Count a call of ``name``; its number (1, 2, ...) among this fake's calls."""
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + 1
            return self.counts[name]


class Fake:
    """One fake's behaviour on one call: fail, time out, or succeed with its result."""

    def __init__(self, spec: FakeSpec, calls: CallLog, produces: Callable[[str], tuple[str, ...]]):
        self.spec = spec
        self.calls = calls
        self.produces_of = produces

    def answer(self, ctx: StepContext | CallAsk) -> Any:
        number = self.calls.record(self.spec.name)
        spec = self.spec
        timeout = ctx.timeout
        if spec.takes is not None and timeout is not None and spec.takes.total_seconds() > timeout:
            raise ActionTimeout(
                f"the attempt ran longer than {timeout:g}s",
                seconds=timeout, step=ctx.step, virtual=True,
            )  # fmt: skip
        if spec.raise_ is not None:
            if spec.non_retryable:
                raise NonRetryableError(spec.raise_)
            raise _FakeFailure(spec.raise_)
        if ctx.attempt <= spec.fail:
            raise _FakeFailure(spec.message)
        if spec.returns_each is not None:
            return spec.returns_each[min(number, len(spec.returns_each)) - 1]
        return spec.returns

    def delegate(self, ctx: StepContext) -> Any:
        """A delegate: its result, then the record fields and vars it writes on success."""
        result = self.answer(ctx)
        for name, value in self.spec.sets.items():
            ctx.record[name] = value
        given = self.spec.produces or {}
        for var in self.produces_of(ctx.step):
            ctx.vars[var] = given.get(var, f"fake-{var}")
        for var, value in given.items():
            if var not in ctx.vars:
                ctx.vars[var] = value
        return result

    def action(self, ctx: StepContext, **_args: Any) -> Any:
        return self.answer(ctx)

    def call(self, ask: CallAsk) -> Any:
        """A called flow: the child's output (the call step binds it), or its failure."""
        return self.answer(ask)


class InstalledFakes:
    """The fakes of one scenario, installed for as long as the ``with`` block runs."""

    def __init__(self, fakes: dict[str, FakeSpec], chosen: Process | Flow) -> None:
        self.calls = CallLog()
        self.chosen = chosen
        self.fakes = {name: Fake(spec, self.calls, self._produces) for name, spec in fakes.items()}
        self._saved: list[tuple[dict[Any, Any], Any, Any]] = []

    def _produces(self, step: str) -> tuple[str, ...]:
        if isinstance(self.chosen, Process):
            found = self.chosen.step(step) if step in {s.name for s in self.chosen.steps} else None
            return found.produces if isinstance(found, ServiceTask) else ()
        return ()

    def __enter__(self) -> InstalledFakes:
        for name, fake in self.fakes.items():
            for table, key, fn in self._targets(name, fake):
                self._saved.append((table, key, table.get(key)))
                table[key] = fn
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for table, key, previous in reversed(self._saved):
            if previous is None:
                table.pop(key, None)
            else:
                table[key] = previous
        self._saved.clear()

    def _targets(self, name: str, fake: Fake) -> Iterator[tuple[dict[Any, Any], Any, Any]]:
        """Where ``name`` is installed: each delegate it names, the flow a step calls, or the
        connector action."""
        if isinstance(self.chosen, Flow) and name in called_flows(self.chosen):
            yield CALL_FAKES, name, fake.call
            return
        delegates = {
            (s.action.module, s.action.attr)
            for s in (self.chosen.steps if isinstance(self.chosen, Process) else ())
            if isinstance(s, ServiceTask)
            and isinstance(s.action, Delegate)
            and name in (s.action.ref, s.action.attr, f"{s.action.module}.{s.action.attr}")
        }
        for key in sorted(delegates):
            yield FAKES, key, fake.delegate
        if not delegates and "." in name:
            connector, _, action = name.partition(".")
            yield ACTION_FAKES, (connector, action), fake.action


def called_flows(flow: Flow) -> set[str]:
    """The names of the flows ``flow``'s call steps start (recover steps included)."""
    return {step.flow for step in call_steps(flow.steps + (flow.recover or ()))}


@contextmanager
def installed(fakes: dict[str, FakeSpec], chosen: Process | Flow) -> Iterator[InstalledFakes]:
    with InstalledFakes(fakes, chosen) as done:
        yield done
