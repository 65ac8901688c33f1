"""Record writes and reads (intent entities): each write checks its values, then commits with
every run it starts, aborts, resumes or cancels, in one transaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procflow.errors import NotFoundError, UsageError
from procflow.model.ir import Application, Entity
from procflow.runtime.host import RunHost
from procflow.runtime.lifecycle import cancel_run, on_record_write
from procflow.runtime.records import new_record, patch_record, record_json
from procflow.store.store import Tx

__all__ = ["RecordCalls"]


class RecordCalls:
    """``records create|update|delete|get|list`` for every face."""

    def __init__(self, host: RunHost) -> None:
        self.host = host

    def create(
        self, entity: str, data: Mapping[str, Any], *, user: str | None = None
    ) -> dict[str, Any]:
        with self.host.store.tx() as tx:
            app, decl = self._declared(entity, tx)
            record = new_record(app, decl, data, exists=tx.record_exists)
            pk = decl.primary_key.name
            tx.lock_record_ids(entity)  # a concurrent create of the same id waits, then is refused
            if record.get(pk) is None:
                record[pk] = tx.next_record_id(entity)
            elif tx.record_exists(entity, record[pk]):
                raise UsageError(f"[{entity}] record {record[pk]} already exists")
            now = self.host.now()
            tx.insert_record(entity, record[pk], record, user, now)
            on_record_write(self.host, tx, "onCreate", app, entity, None, record, now)
            return record_json(decl, record)

    def update(self, entity: str, id_: int, patch: Mapping[str, Any]) -> dict[str, Any]:
        with self.host.store.tx() as tx:
            app, decl = self._declared(entity, tx)
            row = tx.record(entity, id_, lock=True)  # a concurrent write waits: none is lost
            if row is None:
                raise NotFoundError.record(entity, id_)
            record = patch_record(app, decl, row.data, patch, exists=tx.record_exists)
            now = self.host.now()
            tx.update_record(entity, id_, record, now)
            on_record_write(self.host, tx, "onUpdate", app, entity, row.data, record, now)
            return record_json(decl, record)

    def delete(self, entity: str, id_: int) -> None:
        """Delete a record; the runs about it are cancelled, then ``onDelete`` fires."""
        with self.host.store.tx() as tx:
            app, _ = self._declared(entity, tx)
            row = tx.record(entity, id_, lock=True)
            if row is None:
                raise NotFoundError.record(entity, id_)
            now = self.host.now()
            tx.delete_record(entity, id_)
            for run in tx.active_runs_for_record(entity, id_):
                cancel_run(tx, run, now, reason=f"its [{entity}] record {id_} was deleted")
            on_record_write(self.host, tx, "onDelete", app, entity, row.data, None, now)

    def get(self, entity: str, id_: int) -> dict[str, Any]:
        reader = self.host.store.read()
        _, decl = self._declared(entity, reader)
        row = reader.record(entity, id_)
        if row is None:
            raise NotFoundError.record(entity, id_)
        return record_json(decl, row.data)

    def list(self, entity: str) -> list[dict[str, Any]]:
        reader = self.host.store.read()
        _, decl = self._declared(entity, reader)
        return [record_json(decl, r.data) for r in reader.records(entity)]

    def _declared(self, entity: str, reader: Tx) -> tuple[Application, Entity]:
        app = self.host.catalog.application_of(entity, reader)
        decl = app.entity(entity)
        assert decl is not None
        return app, decl
