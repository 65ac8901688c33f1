"""The Python API (interfaces.md, "Python API").

```python
import procflow
engine = procflow.Engine("sqlite:///app.db")            # or procflow.Engine.virtual(path)
engine.deploy("app.intent")
rec = engine.records.create("TenantApplication", {"title": "acme"})
engine.work(until_idle=True)
run = engine.runs.for_record("TenantApplication", rec["id"])[0]
engine.advance("PT30S")
task = engine.tasks.list(assignee="manager")[0]
engine.tasks.complete(task["id"], "approve", {"note": "ok"}, user="alice")
```
"""

from __future__ import annotations

from typing import Any

from procflow.runtime import engine as _engine
from procflow.store.rows import RunRow


class Records:
    """``engine.records``: entity records; every write fires its lifecycle event."""

    def __init__(self, engine: _engine.Engine) -> None:
        self._e = engine

    def create(
        self, entity: str, data: dict[str, Any], *, user: str | None = None
    ) -> dict[str, Any]:
        return self._e.create_record(entity, data, user=user)

    def update(self, entity: str, id_: int, patch: dict[str, Any]) -> dict[str, Any]:
        return self._e.update_record(entity, id_, patch)

    def delete(self, entity: str, id_: int) -> None:
        self._e.delete_record(entity, id_)

    def get(self, entity: str, id_: int) -> dict[str, Any]:
        return self._e.get_record(entity, id_)

    def list(self, entity: str) -> list[dict[str, Any]]:
        return self._e.list_records(entity)


class Runs:
    """``engine.runs``: start (flows), list, show, cancel and retry runs."""

    def __init__(self, engine: _engine.Engine) -> None:
        self._e = engine

    def start(self, name: str, inputs: dict[str, Any] | None = None) -> str:
        """Start a run of the deployed flow ``name``; returns its id."""
        return self._e.start_flow(name, inputs or {})

    def for_record(self, entity: str, id_: int) -> list[dict[str, Any]]:
        return [self._e.show(r.id) for r in self._e.runs_for_record(entity, id_)]

    def list(self, status: str | None = None, name: str | None = None) -> list[RunRow]:
        return self._e.list_runs(status, name)

    def show(self, run_id: str, history: int | None = None) -> dict[str, Any]:
        return self._e.show(run_id, history)

    def cancel(self, run_id: str) -> None:
        self._e.cancel(run_id)

    def retry(self, run_id: str) -> None:
        self._e.retry(run_id)


class Tasks:
    """``engine.tasks``: open user tasks, and completing one."""

    def __init__(self, engine: _engine.Engine) -> None:
        self._e = engine

    def list(self, assignee: str | None = None) -> list[dict[str, Any]]:
        return self._e.list_tasks(assignee)

    def complete(
        self,
        task_id: int,
        action: str | None = None,
        data: dict[str, Any] | None = None,
        *,
        user: str | None = None,
    ) -> dict[str, Any]:
        """Complete an open task; without ``user``, as an administrator."""
        return self._e.complete_task(task_id, action, data, user)


class Engine(_engine.Engine):
    """The engine with the Python API's ``records``, ``runs`` and ``tasks`` namespaces."""

    @property
    def records(self) -> Records:
        return Records(self)

    @property
    def runs(self) -> Runs:
        return Runs(self)

    @property
    def tasks(self) -> Tasks:
        return Tasks(self)
