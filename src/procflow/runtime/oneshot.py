"""``procflow run``: deploy a file, start one run, and work until it ends or only waits."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from procflow.errors import UsageError
from procflow.model.ir import Application, Flow, Process
from procflow.runtime.clock import system_now
from procflow.runtime.engine import Engine
from procflow.runtime.inputs import cli_inputs
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
) -> dict[str, Any]:
    deployed = engine.deploy(path)
    definition = engine.catalog.compiled(deployed[0].version_id).definition
    if isinstance(definition, Flow):
        pairs, text = (
            (start.pairs, start.inputs_json) if isinstance(start, FlowStart) else ([], None)
        )
        run_id = engine.start_flow(definition.name, cli_inputs(definition, pairs, text))
        work_until_settled(engine, run_id, wait=wait)
        return engine.show(run_id)
    if isinstance(start, FlowStart):
        raise UsageError("--input/--inputs are for flows; an intent run takes --record JSON")
    record = start
    app = definition
    assert isinstance(app, Application)
    process = choose_process(app, [d.name for d in deployed], process_name)
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
    created = engine.create_record(trigger.entity, record)
    entity = app.entity(trigger.entity)
    assert entity is not None
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
        due = engine.store.read().next_due()
        if due is None:
            return  # waiting on something no clock brings (a person, an event)
        if engine.is_virtual:
            engine.set_clock(max(due, engine.now()))
        else:
            time.sleep(min(1.0, max(0.0, (due - system_now()) / 1_000_000)))
