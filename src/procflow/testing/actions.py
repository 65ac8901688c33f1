"""One scenario, run: a fresh virtual-clock store, the run started from ``given``, then each action
of ``do:`` in order (each works what is due before the next), ``expect`` checking as it goes."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from procflow.config import env_name, raw
from procflow.errors import ExprError, NotFoundError, ProcflowError
from procflow.expr.context import EvalContext
from procflow.expr.template import compile_value, render_value
from procflow.model.ir import Application, Entity, Flow, Process
from procflow.model.source import Pos
from procflow.runtime.clock import from_iso
from procflow.runtime.data.identity import Actor
from procflow.runtime.data.inputs import check_inputs
from procflow.runtime.engine import Engine
from procflow.store.store import Store
from procflow.testing import coverage
from procflow.testing.expectations import Failure, Observed, check
from procflow.testing.fakes import InstalledFakes
from procflow.testing.scenario_types import Action, Scenario, TestFile


@dataclass
class Outcome:
    """How a scenario ended: its first failure (None: it passed) and what its run took."""

    failure: Failure | None = None
    steps: set[str] = field(default_factory=set)
    routes: set[tuple[str, str]] = field(default_factory=set)


class _ActionError(Exception):
    """An action the store refused (no such task, a bad record write): the scenario fails."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.key)
        self.failure = failure


def run_scenario(test: TestFile, scenario: Scenario) -> Outcome:
    """Run ``scenario`` of ``test`` on a store of its own, gone afterwards."""
    # An in-memory SQLite database shared by this process's connections: the holder keeps it
    # alive while the engine opens its own connections to it (a file would cost an fsync per
    # commit, several times the scenario's own work).
    url = f"sqlite:///file:procflow-test-{uuid.uuid4().hex}?mode=memory&cache=shared"
    holder = Store(url)
    try:
        holder.init(virtual_clock=True, now=from_iso(scenario.given.clock))
        with InstalledFakes(scenario.fakes, test.process) as fakes:
            engine = Engine(url, environ=scenario_environment(scenario))
            try:
                return _Run(test, scenario, engine, fakes).run()
            finally:
                engine.close()
    finally:
        holder.close()


# The token table names users and their roles for ``complete ... as:`` (given.users aside).
_PASSED_THROUGH = ("PROCFLOW_API_TOKENS", "PROCFLOW_API_TOKENS_FILE")


def scenario_environment(scenario: Scenario) -> dict[str, str]:
    """What the scenario's steps see of an environment: its secrets and the token table, and
    nothing else of the caller's (no SMTP URL or Slack token: a test never reaches the network)."""
    environ = {env_name(n): value for n in _PASSED_THROUGH if (value := raw(n)) is not None}
    return environ | dict(scenario.given.secrets)


# What run expectations see when a scheduled flow's scenario has no run yet.
NO_RUN: dict[str, Any] = {
    "id": None, "status": "no run", "history": [], "bindings": {}, "output": None,
    "error": None, "tokens": [],
}  # fmt: skip


class _Run:
    def __init__(self, test: TestFile, scenario: Scenario, engine: Engine, fakes: InstalledFakes):
        self.test = test
        self.scenario = scenario
        self.engine = engine
        self.fakes = fakes
        self.run_id = ""
        self.record: tuple[str, int] | None = None

    def run(self) -> Outcome:
        outcome = Outcome()
        try:
            self._start()
            for action in self.scenario.actions:
                failure = self._do(action)
                if failure is not None:
                    outcome.failure = failure
                    break
        except _ActionError as exc:
            outcome.failure = exc.failure
        for run_id in self._covered():
            history = self.engine.show(run_id)["history"]
            outcome.steps |= coverage.visited(history)
            outcome.routes |= coverage.taken(self.test.process, history)
        return outcome

    def _covered(self) -> list[str]:
        """The runs whose steps count: the scenario's own run, or, in a scenario of a
        scheduled flow that starts none, every run its schedules started."""
        if self.run_id:
            return [self.run_id]
        return [r["id"] for r in self._flow_runs()]

    def _flow_runs(self) -> list[dict[str, Any]]:
        """Every run of the tested flow, oldest first (``runs show`` JSON)."""
        chosen = self.test.process
        if not isinstance(chosen, Flow):
            return []
        rows = sorted(self.engine.list_runs(name=chosen.name), key=lambda r: (r.started_at, r.id))
        return [self.engine.show(r.id) for r in rows]

    # --- given ----------------------------------------------------------------------------

    def _start(self) -> None:
        given, chosen = self.scenario.given, self.test.process
        pos = self.scenario.pos
        for callee in self.test.callees:  # a called flow without a fake runs for real
            self._guard("given", pos, partial(self.engine.deploy, callee))
        self._guard("given", pos, lambda: self.engine.deploy(self.test.definition_path))
        for entity, rows in given.records.items():
            for row in rows:
                self._guard("given.records", pos, partial(self.engine.create_record, entity, row))
        if isinstance(chosen, Flow) and given.inputs is None:
            pass  # a scheduled flow's scenario: its schedules start the runs
        elif isinstance(chosen, Flow):
            inputs = given.inputs or {}
            self.run_id = self._guard(
                "given.inputs", pos,
                lambda: self.engine.start_flow(chosen.name, check_inputs(chosen, inputs)),
            )  # fmt: skip
        else:
            self._start_for_record(chosen, given.record or {})
        self.engine.work(until_idle=True)

    def _start_for_record(self, process: Process, record: dict[str, Any]) -> None:
        pos = self.scenario.pos
        if process.trigger is None:
            raise _ActionError(Failure("given", "a triggered process", process.name, pos))
        entity = process.trigger.entity
        created = self._guard(
            "given.record", pos, lambda: self.engine.create_record(entity, record)
        )
        app = self.test.application
        key = app.entity(entity) if app is not None else None
        record_id = int(created[key.primary_key.name if key is not None else "id"])
        self.record = (entity, record_id)
        runs = [r for r in self.engine.runs_for_record(entity, record_id) if r.name == process.name]
        if not runs:
            guard = " and ".join(process.trigger.when_source) or "its trigger"
            raise _ActionError(
                Failure("given.record", f"a run of {process.name}", "no run", pos,
                        note=f"the record did not start the process: {guard} is false for it")
            )  # fmt: skip
        self.run_id = runs[0].id

    def _guard(self, key: str, pos: Pos, call: Callable[[], Any]) -> Any:
        """``call``'s result; a refusal of the engine fails the scenario at ``pos``."""
        try:
            return call()
        except ProcflowError as exc:
            raise _ActionError(Failure(key, "success", str(exc), pos)) from None

    # --- do -------------------------------------------------------------------------------

    def _do(self, action: Action) -> Failure | None:
        if action.kind == "expect":
            return self._expect(action)
        try:
            self._guard(
                action.kind, action.pos, lambda: getattr(self, f"_{action.kind}")(action.value)
            )
        except _ActionError as exc:
            found = exc.failure
            raise _ActionError(
                Failure(
                    found.key, found.expected, found.actual, found.pos or action.pos, found.note
                )
            ) from None
        self.engine.work(until_idle=True)
        return None

    def _advance(self, value: str) -> None:
        self.engine.advance(value)

    def _until(self, value: str) -> None:
        self.engine.set_clock(from_iso(value))

    def _event(self, value: dict[str, Any]) -> None:
        rendered = self._render(value)
        self.engine.send_event(str(rendered["type"]), rendered.get("data"), rendered.get("id"))

    def _render(self, value: dict[str, Any]) -> Any:
        run_id = self._current()
        shown = self.engine.show(run_id, 0) if run_id else NO_RUN | {"started_at": None}
        env = {
            "bindings": shown["bindings"],
            "run": {"id": run_id, "started_at": shown["started_at"]},
            "record": self._record_now(),
        }
        now = datetime.fromtimestamp(self.engine.now() / 1_000_000, UTC)
        try:
            return render_value(compile_value(value), env, EvalContext(now=lambda: now))
        except ExprError as exc:
            raise _ActionError(Failure("event", "values to render", exc.message)) from None

    def _complete(self, value: dict[str, Any]) -> None:
        step = value["task"]
        open_tasks = [t for t in self.engine.list_tasks() if t["run_id"] == self._current()]
        task = next((t for t in open_tasks if t["step"] == step), None)
        if task is None:
            shown = [t["step"] for t in open_tasks]
            raise _ActionError(Failure("complete", f"an open task at [{step}]", shown))
        self.engine.complete_task(
            task["id"], value.get("action"), value.get("data"), self._actor(value.get("as"))
        )

    def _actor(self, name: Any) -> Actor | str | None:
        if name is None:
            return None
        roles = self.scenario.given.users.get(str(name))
        return Actor(str(name), frozenset(roles)) if roles is not None else str(name)

    def _update(self, value: dict[str, Any]) -> None:
        entity, record_id = self._own_record("update")
        self.engine.update_record(entity, record_id, value)

    def _create(self, value: dict[str, Any]) -> None:
        for entity, data in value.items():
            self.engine.create_record(entity, data)

    def _delete(self, _value: Any) -> None:
        entity, record_id = self._own_record("delete")
        self.engine.delete_record(entity, record_id)

    def _cancel(self, _value: Any) -> None:
        self.engine.cancel(self._current())

    def _current(self) -> str:
        """The run actions act on: the scenario's own, else the newest its schedules started
        ("" before there is one)."""
        if self.run_id:
            return self.run_id
        runs = self.engine.list_runs(name=self.test.process.name)
        return max(runs, key=lambda r: (r.started_at, r.id)).id if runs else ""

    def _own_record(self, key: str) -> tuple[str, int]:
        if self.record is None:
            raise _ActionError(Failure(key, "a run with a record", "a flow run has none"))
        return self.record

    # --- expect ---------------------------------------------------------------------------

    def _expect(self, action: Action) -> Failure | None:
        seen = self._observed()
        for key, expected in action.value.items():
            failure = check(key, expected, seen)
            if failure is not None:
                return Failure(failure.key, failure.expected, failure.actual,
                               action.keys.get(key, action.pos), failure.note)  # fmt: skip
        return None

    def _observed(self) -> Observed:
        app = self.test.application
        entity: Entity | None = None
        if self.record is not None and app is not None:
            entity = app.entity(self.record[0])
        runs = self._flow_runs()
        run = self.engine.show(self.run_id) if self.run_id else (runs[-1] if runs else NO_RUN)
        return Observed(
            run=run,
            runs=runs,
            record=self._record_now(),
            entity=entity,
            application=app if isinstance(app, Application) else None,
            tasks=self.engine.list_tasks(),
            outbox=self.engine.list_outbox(),
            calls=dict(self.fakes.calls.counts),
        )

    def _record_now(self) -> dict[str, Any] | None:
        if self.record is None:
            return None
        try:
            return self.engine.get_record(*self.record)
        except NotFoundError:
            return None
