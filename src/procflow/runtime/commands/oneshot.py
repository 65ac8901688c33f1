"""``procflow run``: deploy a file, start one run, and work until it ends or only waits."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from procflow.errors import UsageError
from procflow.model.ir import Application, Entity, Flow, Process
from procflow.runtime.clock import system_now
from procflow.runtime.data.inputs import cli_inputs
from procflow.runtime.data.records import new_record
from procflow.runtime.definitions.deploy import compile_for_deploy
from procflow.runtime.engine import Engine
from procflow.states import FINISHED


def choose_process(app: Application, deployed: list[str], name: str | None) -> Process:
    processes = [p for p in app.processes if p.name in deployed]
    if name is not None:
        chosen = next((p for p in processes if p.name == name), None)
        if chosen is None:
            from procflow.model.source import suggest

            known = [p.name for p in processes]
            raise UsageError(f"no process [{name}] in this file{suggest(name, known)}")
        return chosen
    triggered = [p for p in processes if p.trigger is not None]
    if len(triggered) == 1:
        return triggered[0]
    names = ", ".join(p.name for p in triggered) or "none"
    raise UsageError(
        f"the file has {len(triggered)} triggered processes ({names}); choose one with --process"
    )


@dataclass(frozen=True)
class FlowStart:
    """A flow's inputs as given on the command line (``--input k=v``, ``--inputs JSON``)."""

    pairs: list[str]
    inputs_json: str | None


def run_once(
    engine: Engine,
    path: str,
    start: dict[str, Any] | FlowStart,
    process_name: str | None,
    *,
    wait: bool,
    user: str | None = None,
) -> dict[str, Any]:
    """Deploy ``path`` and start one run: a flow with ``start``'s inputs (``user``: its
    ``by``), or a triggered process by creating ``start`` as its trigger record (``user``: the
    record's owner); then work it (:func:`work_until_settled`); the run's JSON. Everything that
    can be checked without the store is checked before the deploy, so a refused start deploys
    nothing; a named ``user`` deploys too, so needs the role ``deployer``."""
    loaded, _ = compile_for_deploy(path, engine.project_dir, engine.max_file_size)
    definition = loaded.definition
    if isinstance(definition, Flow):
        pairs, text = (
            (start.pairs, start.inputs_json) if isinstance(start, FlowStart) else ([], None)
        )
        inputs = cli_inputs(definition, pairs, text)
        engine.deploy(path, user=user)
        run_id = engine.start_flow(definition.name, inputs, user=user)
        work_until_settled(engine, run_id, wait=wait)
        return engine.show(run_id)
    if isinstance(start, FlowStart):
        raise UsageError("--input/--inputs are for flows; an intent run takes --record JSON")
    assert isinstance(definition, Application)
    process = _triggered_process(definition, process_name)
    assert process.trigger is not None
    entity = definition.entity(process.trigger.entity)
    assert entity is not None
    new_record(definition, entity, start, exists=lambda _entity, _id: True)  # values, types
    engine.deploy(path, user=user)
    return _run_for_record(engine, process, entity, start, user, wait=wait)


def _triggered_process(app: Application, name: str | None) -> Process:
    if not app.processes:
        raise UsageError("the file defines no process to run")
    process = choose_process(app, [p.name for p in app.processes], name)
    trigger = process.trigger
    if trigger is None:
        raise UsageError(
            f"process [{process.name}] has no trigger; create its record, then "
            f"`procflow start {process.name} --record ENTITY:ID`"
        )
    if trigger.event != "onCreate":
        raise UsageError(
            f"process [{process.name}] starts {trigger.event} of [{trigger.entity}]; --record "
            "creates a record, so use `procflow records` to update or delete one instead"
        )
    return process


def _run_for_record(
    engine: Engine,
    process: Process,
    entity: Entity,
    record: dict[str, Any],
    user: str | None,
    *,
    wait: bool,
) -> dict[str, Any]:
    trigger = process.trigger
    assert trigger is not None
    created = engine.create_record(trigger.entity, record, user=user)
    record_id = int(created[entity.primary_key.name])
    runs = [r for r in engine.runs_for_record(trigger.entity, record_id) if r.name == process.name]
    if not runs:
        guard = " and ".join(trigger.when_source) or "its trigger"
        raise UsageError(
            f"created [{trigger.entity}] record {record_id}, but it did not start "
            f"[{process.name}]: {guard} is false for it"
        )
    run_id = runs[0].id
    work_until_settled(engine, run_id, wait=wait)
    return engine.show(run_id)


def work_until_settled(engine: Engine, run_id: str, *, wait: bool) -> None:
    """Work until the run ends; without ``wait``, also stop once it only waits on the future."""
    while True:
        engine.work(until_idle=True)
        status = engine.store.read().run(run_id)
        if status is None or status.status in FINISHED or not wait:
            return
        due = engine.store.read().next_timer_due()  # a schedule's slots are not this run's
        if due is None:
            return  # waiting on something no clock brings (a person, an event)
        if engine.is_virtual:
            engine.set_clock(max(due, engine.now()))
        else:
            time.sleep(min(1.0, max(0.0, (due - system_now()) / 1_000_000)))
