"""Record writes and reads (intent entities): each write checks its values, then commits with
every run it starts, aborts, resumes or cancels, in one transaction.

A delete is refused while another record refers to the record through a to-one relation (a
dangling id would break that record's reads and its runs' writes), and for a seeded row, which
is part of the deployed definition: processes and new records name it (``setRelationField``,
a status relation's ``init``), and a redeploy of the same file would not bring it back.

Starting a process by hand for a record (``procflow start NAME --record ENTITY:ID``) lives here
too, as it is about a record: the record must be of the process's trigger entity (for a process
without a trigger: of an entity of its application), and a triggered process runs at most once
per record — "ran" meaning any run of that process for that record, whatever its status and
however it started — unless the caller asks for another run (``again``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procflow.errors import NotFoundError, UsageError
from procflow.model.ir import Application, Entity, Process, RecordAction
from procflow.model.source import suggest
from procflow.runtime.data.identity import Actor, checked_name
from procflow.runtime.data.record_access import authorize_record
from procflow.runtime.data.records import new_record, patch_record, record_json
from procflow.runtime.data.user_json import text_problem
from procflow.runtime.operations.lifecycle import cancel_run, on_record_write
from procflow.runtime.operations.listing import Page, records_page
from procflow.runtime.runs.host import RunHost
from procflow.runtime.runs.starts import insert_intent_run, record_start_key
from procflow.store.store import Tx

__all__ = ["RecordCalls", "write_new_record"]


class RecordCalls:
    """``records create|update|delete|get|list`` for every face."""

    def __init__(self, host: RunHost) -> None:
        self.host = host

    def create(
        self, entity: str, data: Mapping[str, Any], actor: Actor, *, named: bool = True
    ) -> dict[str, Any]:
        """``actor`` asks (refused unless the application's permissions allow it); ``named``:
        it was named by the caller, and owns the record (the unnamed administrator does not)."""
        user = actor.user if named else None
        with self.host.store.tx() as tx:
            app, decl = self._declared(entity, tx, actor, RecordAction.CREATE)
            record = write_new_record(self.host, tx, app, decl, data, user, self.host.now())
            return record_json(decl, record)

    def update(
        self, entity: str, id_: int, patch: Mapping[str, Any], actor: Actor
    ) -> dict[str, Any]:
        with self.host.store.tx() as tx:
            app, decl = self._declared(entity, tx, actor, RecordAction.UPDATE)
            row = tx.record(entity, id_, lock=True)  # a concurrent write waits: none is lost
            if row is None:
                raise NotFoundError.record(entity, id_)
            record = patch_record(app, decl, row.data, patch, exists=tx.record_exists)
            now = self.host.now()
            tx.update_record(entity, id_, record, now)
            on_record_write(self.host, tx, "onUpdate", app, entity, row.data, record, now)
            return record_json(decl, record)

    def delete(self, entity: str, id_: int, actor: Actor, *, named: bool = True) -> None:
        """Delete a record; the runs about it are cancelled (``actor``, when ``named``, recorded
        as the ``by`` of their ``run.cancelled``), then ``onDelete`` fires."""
        user = actor.user if named else None
        with self.host.store.tx() as tx:
            app, _ = self._declared(entity, tx, actor, RecordAction.DELETE)
            row = tx.record(entity, id_, lock=True)
            if row is None:
                raise NotFoundError.record(entity, id_)
            _refuse_if_referenced(tx, app, entity, id_)
            now = self.host.now()
            tx.delete_record(entity, id_)
            for run in tx.active_runs_for_record(entity, id_):
                reason = f"its [{entity}] record {id_} was deleted"
                cancel_run(tx, run, now, reason=reason, by=user)
            on_record_write(self.host, tx, "onDelete", app, entity, row.data, None, now)

    def start(
        self, name: str, record: tuple[str, int], *, again: bool = False, user: str | None = None
    ) -> str:
        """Start a run of the intent process ``name`` for ``record`` (module notes); its id.
        ``user``, when named, is recorded as the ``by`` of ``run.started``."""
        entity, id_ = record
        user = checked_name(user)
        _check_text(name, "the process name")
        _check_text(entity, "the entity name")
        with self.host.store.tx() as tx:
            hint = f"[{name}] is a flow; start it with --input/--inputs"
            version = self.host.catalog.startable(tx, name, "intent", hint)
            compiled, process = self.host.catalog.process(version.id, name, tx)
            assert isinstance(compiled.definition, Application)
            _check_record_entity(compiled.definition, process, entity)
            row = tx.record(entity, id_)
            if row is None:
                raise NotFoundError.record(entity, id_)
            return _new_run(tx, version.id, process, record, row.data, self.host.now(), again, user)

    def get(self, entity: str, id_: int, actor: Actor) -> dict[str, Any]:
        reader = self.host.store.read()
        _, decl = self._declared(entity, reader, actor, RecordAction.READ)
        row = reader.record(entity, id_)
        if row is None:
            raise NotFoundError.record(entity, id_)
        return record_json(decl, row.data)

    def list(self, entity: str, actor: Actor) -> list[dict[str, Any]]:
        reader = self.host.store.read()
        _, decl = self._declared(entity, reader, actor, RecordAction.READ)
        return [record_json(decl, r.data) for r in reader.records(entity)]

    def page(self, entity: str, limit: int, before: int | None, actor: Actor) -> Page[int]:
        """Record JSON of ``entity``'s records after the one with id ``before``, newest first."""
        reader = self.host.store.read()
        self._declared(entity, reader, actor, RecordAction.READ)
        return records_page(reader, self.host.catalog, entity, limit, before)

    def _declared(
        self, entity: str, reader: Tx, actor: Actor, action: RecordAction
    ) -> tuple[Application, Entity]:
        """The application declaring ``entity``, and the entity, once ``actor`` may ``action``
        its records."""
        _check_text(entity, "the entity name")
        app = self.host.catalog.application_of(entity, reader)
        decl = app.entity(entity)
        assert decl is not None
        authorize_record(actor, app, entity, action)
        return app, decl


def write_new_record(
    host: RunHost, tx: Tx, app: Application, decl: Entity, data: Mapping[str, Any],
    owner: str | None, now: int,
) -> dict[str, Any]:  # fmt: skip
    """Create a record of ``decl`` from ``data`` in ``tx`` and fire its ``onCreate``: what
    ``records create`` and an intent schedule's ``generate`` do. Returns the stored record;
    a bad write raises (a RecordError or UsageError) before anything is written."""
    record = new_record(app, decl, data, exists=tx.record_exists)
    pk = decl.primary_key.name
    tx.lock_record_ids(decl.name)  # a concurrent create of the same id waits, then is refused
    if record.get(pk) is None:
        record[pk] = tx.next_record_id(decl.name)
    elif tx.record_exists(decl.name, record[pk]):
        raise UsageError(f"[{decl.name}] record {record[pk]} already exists")
    tx.insert_record(decl.name, record[pk], record, owner, now)
    on_record_write(host, tx, "onCreate", app, decl.name, None, record, now)
    return record


def _check_text(text: str, what: str) -> None:
    """Refuse a name or id that is not valid Unicode text: it cannot be stored or printed."""
    problem = text_problem(text)
    if problem is not None:
        raise UsageError(f"{what} is text that is not valid Unicode ({problem})")


def _new_run(
    tx: Tx,
    version_id: int,
    process: Process,
    record: tuple[str, int],
    data: Mapping[str, Any],
    now: int,
    again: bool,
    by: str | None,
) -> str:
    entity, id_ = record
    trigger = process.trigger
    given_key = data.get(trigger.business_key) if trigger and trigger.business_key else None
    business_key = str(id_ if given_key is None else given_key)
    # A triggered process claims its trigger's start key (lifecycle.on_record_write spells it
    # the same way), so the trigger never starts another run for a record started by hand.
    start_key = record_start_key(process.name, entity, id_) if trigger is not None else None
    if start_key is not None and not again:
        _refuse_second_run(tx, process, record)
    run_id = insert_intent_run(tx, version_id, process, now, record, business_key, start_key, by=by)
    if run_id is None:  # the key is taken: by an earlier run (again), or a concurrent start
        if not again:
            _refuse_second_run(tx, process, record)
        run_id = insert_intent_run(tx, version_id, process, now, record, business_key, by=by)
    assert run_id is not None  # without a start key there is nothing to conflict with
    return run_id


def _check_record_entity(app: Application, process: Process, entity: str) -> None:
    """Refuse a record of an entity the process does not run for: its steps would read and
    write a record of their own entity with that id."""
    if process.trigger is not None:
        wanted = process.trigger.entity
        if entity != wanted:
            raise UsageError(
                f"process [{process.name}] runs for a [{wanted}] record (the entity of its "
                f"trigger), not a [{entity}] record"
            )
        return
    names = sorted(e.name for e in app.entities)
    if entity not in names:
        raise UsageError(
            f"process [{process.name}] runs for a record of an entity of [{app.name}] "
            f"({', '.join(names)}), not a [{entity}] record" + suggest(entity, names)
        )


def _refuse_second_run(tx: Tx, process: Process, record: tuple[str, int]) -> None:
    """Refuse a second run of a triggered process for a record (see the module notes)."""
    entity, id_ = record
    runs = [r for r in tx.runs_for_record(entity, id_) if r.name == process.name]
    if not runs:
        return
    latest = runs[-1]
    raise UsageError(
        f"process [{process.name}] already ran for [{entity}] record {id_} "
        f"(run {latest.id}, {latest.status}); a triggered process runs at most once per "
        "record: start it again on purpose with --again (again=True)"
    )


def _refuse_if_referenced(tx: Tx, app: Application, entity: str, id_: int) -> None:
    """Refuse deleting a record another record refers to, or a seeded row (module notes)."""
    for other in app.entities:
        for rel in other.relations:
            if not rel.to_one or rel.to != entity:
                continue
            # Relations live inside each record's JSON: the referring records are read and
            # matched here (a delete of a referenced entity's record is a rare operator act).
            for row in tx.records(other.name):
                if row.data.get(rel.name) == id_ and (other.name, row.id) != (entity, id_):
                    raise UsageError(
                        f"[{entity}] record {id_} cannot be deleted: [{other.name}] record "
                        f"{row.id} refers to it (relation [{rel.name}]); change or delete that "
                        "record first"
                    )
    decl = app.entity(entity)
    assert decl is not None
    pk = decl.primary_key.name
    for seed in app.seeds:
        if seed.entity == entity and any(row.get(pk) == id_ for row in seed.rows):
            raise UsageError(
                f"[{entity}] record {id_} cannot be deleted: it is a row of seed [{seed.name}] "
                f"of [{app.name}], part of the deployed definition"
            )
