"""The Python API: ``procflow.Engine``, what a program embedding procflow calls.

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

It wraps the runtime's engine and exposes only what users call; the CLI and the HTTP face call
the same runtime calls, so no face can do what another cannot. Every call that changes something,
and every record read, takes ``user=``: a name, with exactly the roles the token table gives it,
or an :class:`~procflow.runtime.data.identity.Actor`; without it the program acts as an
administrator. The role table refuses what the user's roles do not allow
(:class:`~procflow.errors.NotPermittedError`), and nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

from procflow.cursors import (
    DEFAULT_PAGE,
    MAX_PAGE,
    decode_cursor,
    encode_cursor,
)
from procflow.errors import UsageError
from procflow.runtime import engine as _runtime
from procflow.runtime.data.identity import Actor
from procflow.runtime.definitions.deploy import Deployed
from procflow.runtime.operations import listing

__all__ = ["Actor", "Engine", "Events", "Page", "Records", "Runs", "Schedules", "Tasks"]

Key = TypeVar("Key", int, str)


@dataclass(frozen=True)
class Page:
    """A page of a list, newest first, as the HTTP API answers it: ``next_cursor`` is the
    ``cursor=`` of the next page (the same text ``?cursor=`` and ``--cursor`` take), None after
    the last."""

    items: list[dict[str, Any]]
    next_cursor: str | None


User = Actor | str | None
"""Who makes a call: a user name (its roles from the token table), an Actor, or None (an
administrator)."""


def _key(cursor: str | None, list_name: str, kind: type[Key]) -> Key | None:
    if cursor is None:
        return None
    key = decode_cursor(cursor, list_name, kind)
    if key is None:
        raise UsageError(
            f"cursor is not one the {list_name} list gave out (take next_cursor from a page of "
            "the same list, or leave it out to start from the newest)"
        )
    assert isinstance(key, kind)
    return key


def _page(list_name: str, page: listing.Page[Key]) -> Page:
    cursor = None if page.next_key is None else encode_cursor(list_name, page.next_key)
    return Page(page.items, cursor)


def _every(read: Callable[[str | None], Page]) -> Iterator[dict[str, Any]]:
    """Every item of a list, following its pages to the end."""
    cursor: str | None = None
    while True:
        page = read(cursor)
        yield from page.items
        cursor = page.next_cursor
        if cursor is None:
            return


class Records:
    """``engine.records``: entity records; every write fires its lifecycle event."""

    def __init__(self, engine: _runtime.Engine) -> None:
        self._e = engine

    def create(self, entity: str, data: Mapping[str, Any], *, user: User = None) -> dict[str, Any]:
        """``user``, when given, owns the record (its ``owner``)."""
        return self._e.create_record(entity, data, user=user)

    def update(
        self, entity: str, id_: int, patch: Mapping[str, Any], *, user: User = None
    ) -> dict[str, Any]:
        return self._e.update_record(entity, id_, patch, user=user)

    def delete(self, entity: str, id_: int, *, user: User = None) -> None:
        """``user``: who deletes it, the ``by`` of the runs the delete cancels."""
        self._e.delete_record(entity, id_, user=user)

    def get(self, entity: str, id_: int, *, user: User = None) -> dict[str, Any]:
        return self._e.get_record(entity, id_, user=user)

    def page(
        self, entity: str, *, limit: int = DEFAULT_PAGE, cursor: str | None = None,
        user: User = None,
    ) -> Page:  # fmt: skip
        """A page of ``entity``'s records, newest first (``limit``: 1 to 500)."""
        before = _key(cursor, "records", int)
        page = self._e.records_page(entity, limit=limit, before=before, user=user)
        return _page("records", page)

    def list(self, entity: str, *, user: User = None) -> list[dict[str, Any]]:
        """Every record of ``entity``, newest first (read a page at a time)."""
        return list(_every(lambda c: self.page(entity, limit=MAX_PAGE, cursor=c, user=user)))


class Runs:
    """``engine.runs``: start, list, show, cancel and retry runs."""

    def __init__(self, engine: _runtime.Engine) -> None:
        self._e = engine

    def start(
        self, name: str, inputs: Mapping[str, Any] | None = None, *, user: User = None
    ) -> str:
        """Start a run of the deployed flow ``name``; returns its id. ``user`` (here, and on
        cancel and retry): who asked, recorded as the history entry's ``by``."""
        return self._e.start_flow(name, inputs or {}, user=user)

    def start_for_record(
        self, name: str, entity: str, id_: int, *, again: bool = False, user: User = None
    ) -> str:
        """Start a run of the intent process ``name`` for a record; returns its id. A triggered
        process runs once per record: a second start needs ``again``."""
        return self._e.start(name, record=(entity, id_), again=again, user=user)

    def for_record(self, entity: str, id_: int) -> list[dict[str, Any]]:
        return [self._e.show(r.id) for r in self._e.runs_for_record(entity, id_)]

    def page(
        self, status: str | None = None, name: str | None = None, *,
        limit: int = DEFAULT_PAGE, cursor: str | None = None, waiting_for: str | None = None,
        parent: str | None = None,
    ) -> Page:  # fmt: skip
        """A page of runs (``runs list --json`` items), newest first, optionally of one status
        and definition, waiting for one kind (``queue``, ``throttle``, ``timer``…), and only the
        runs ``parent`` started by ``call``; give the same filters again with ``cursor``."""
        before = _key(cursor, "runs", str)
        found = self._e.runs_page(
            status, name, limit=limit, before=before, waiting=waiting_for, parent=parent
        )
        return _page("runs", found)

    def list(
        self, status: str | None = None, name: str | None = None, *,
        waiting_for: str | None = None, parent: str | None = None,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Every run (``runs list --json`` items), newest first (read a page at a time)."""
        return list(
            _every(
                lambda c: self.page(
                    status, name, limit=MAX_PAGE, cursor=c, waiting_for=waiting_for, parent=parent
                )
            )
        )

    def show(self, run_id: str, history: int | None = None) -> dict[str, Any]:
        return self._e.show(run_id, history)

    def cancel(self, run_id: str, *, user: User = None) -> None:
        self._e.cancel(run_id, user=user)

    def retry(self, run_id: str, *, user: User = None) -> None:
        self._e.retry(run_id, user=user)

    def purge(
        self, *, ended_before: str | datetime | timedelta, dry_run: bool = False, user: User = None
    ) -> dict[str, Any]:
        """Delete the runs completed, cancelled or aborted before ``ended_before`` (a timestamp,
        a duration counted back from the store's clock, a datetime or a timedelta) with all
        their rows; ``dry_run``: only count them. Returns ``{purged, dry_run, ended_before,
        rows}`` (``procflow runs purge --json``). Waiting, running and failed runs stay."""
        return self._e.purge(ended_before, dry_run=dry_run, user=user)


class Tasks:
    """``engine.tasks``: open user tasks, and completing one."""

    def __init__(self, engine: _runtime.Engine) -> None:
        self._e = engine

    def page(
        self, assignee: str | None = None, *, limit: int = DEFAULT_PAGE, cursor: str | None = None
    ) -> Page:
        """A page of open tasks, newest first, optionally of one assignee."""
        before = _key(cursor, "tasks", int)
        return _page("tasks", self._e.tasks_page(assignee, limit=limit, before=before))

    def list(self, assignee: str | None = None) -> list[dict[str, Any]]:
        """Every open task, newest first (read a page at a time)."""
        return list(_every(lambda c: self.page(assignee, limit=MAX_PAGE, cursor=c)))

    def complete(
        self,
        task_id: int,
        action: str | None = None,
        data: Mapping[str, Any] | None = None,
        *,
        user: Actor | str | None = None,
    ) -> dict[str, Any]:
        """Complete an open task as ``user``: a name has exactly the roles the token table
        (``PROCFLOW_API_TOKENS``) gives it, an :class:`Actor` the roles it carries; without
        ``user``, as an administrator. Only the task's assigned user, a member of its assigned
        role, or an administrator may (else :class:`~procflow.errors.ForbiddenError`)."""
        return self._e.complete_task(task_id, action, data, user)


class Events:
    """``engine.events``: accept an event from the outside world."""

    def __init__(self, engine: _runtime.Engine) -> None:
        self._e = engine

    def send(
        self, type_: str, data: Any = None, id_: str | None = None, *, user: User = None
    ) -> dict[str, Any]:
        """Deliver it to every matching waiting run and start the flows it triggers; returns
        the delivery report ``{event_id, duplicate, resumed, started}``. ``user``: who sent it,
        the ``by`` of the ``event.received`` entries of the runs it resumes."""
        return self._e.send_event(type_, data, id_, user=user)


class Schedules:
    """``engine.schedules``: flow schedules, each addressed as its flow's name (a lone schedule)
    or ``FLOW/NAME``; every call answers the ``procflow schedules ... --json`` shape."""

    def __init__(self, engine: _runtime.Engine) -> None:
        self._e = engine

    def page(self, *, limit: int = DEFAULT_PAGE, cursor: str | None = None) -> Page:
        """A page of schedules by name (``limit``: 1 to 500)."""
        after = _key(cursor, "schedules", str)
        return _page("schedules", self._e.schedules.page(limit=limit, after=after))

    def list(self) -> list[dict[str, Any]]:
        """Every schedule, by name (read a page at a time): spec, state, next slots, last run,
        counts."""
        return list(_every(lambda c: self.page(limit=MAX_PAGE, cursor=c)))

    def show(self, name: str, next: int = 3) -> dict[str, Any]:
        """One schedule, with its ``next`` slots (1 to 1000)."""
        return self._e.schedules.show(name, next)

    def pause(self, name: str, note: str | None = None, *, user: User = None) -> dict[str, Any]:
        """Stop ``name`` firing (its flow stays enabled; no slot is counted missed meanwhile);
        ``note``: why, one line shown with its state. Needs the role ``deployer``."""
        return self._e.schedules.pause(name, note, user=user)

    def resume(self, name: str, *, user: User = None) -> dict[str, Any]:
        """Arm a paused schedule's first slot after now. Needs the role ``deployer``."""
        return self._e.schedules.resume(name, user=user)

    def trigger(
        self, name: str, overlap: str | None = None, *, user: User = None
    ) -> dict[str, Any]:
        """Start one run now, as a slot at the current instant: the schedule's overlap applies
        unless ``overlap="allow"``. Returns ``{name, started, skipped, buffered}``
        (``started``: the run ids). Needs the role ``operator``."""
        if overlap not in (None, "allow"):
            raise UsageError(f'overlap takes only "allow" (or None), not [{overlap}]')
        return self._e.schedules.trigger(name, allow_overlap=overlap == "allow", user=user)

    def backfill(
        self, name: str, from_: str | datetime, to: str | datetime, *, dry_run: bool = False,
        user: User = None,
    ) -> dict[str, Any]:  # fmt: skip
        """One run for every slot of [``from_``, ``to``] (ISO-8601 timestamps with a zone, or
        datetimes: naive ones are UTC) that has none yet, oldest first, overlap ignored; at
        most 1000 slots, none after now. ``dry_run``: only list them. Returns ``{name,
        dry_run, slots: [{slot, run_id, started}]}``. Needs the role ``deployer``."""
        return self._e.schedules.backfill(name, from_, to, dry_run=dry_run, user=user)


class Engine:
    """``procflow.Engine(url)``: deploy definitions, write records, run, and work."""

    def __init__(self, url: str | None = None, **options: Any) -> None:
        self._attach(_runtime.Engine(url, **options))

    @classmethod
    def virtual(cls, path_or_url: str, **options: Any) -> Self:
        """An engine on a virtual-clock store (a SQLite file path, or a new or empty store's
        URL): time moves only by :meth:`advance` and :meth:`set_clock`."""
        engine = cls.__new__(cls)  # the store must be made virtual before the engine opens it
        engine._attach(_runtime.Engine.virtual(path_or_url, **options))
        return engine

    def _attach(self, runtime: _runtime.Engine) -> None:
        self._e = runtime
        self.records = Records(runtime)
        self.runs = Runs(runtime)
        self.tasks = Tasks(runtime)
        self.events = Events(runtime)
        self.schedules = Schedules(runtime)

    def deploy(self, *paths: str, user: User = None) -> list[Deployed]:
        """Validate definition files completely (a flow's calls: across them and the deployed
        flows), then store their new versions, all or none."""
        return self._e.deploy(*paths, user=user)

    def enable(self, name: str, enabled: bool = True, *, user: User = None) -> None:
        """Enable (or disable) a definition: a disabled one starts no new runs."""
        self._e.set_enabled(name, enabled, user=user)

    def work(self, until_idle: bool = True) -> int:
        """Run what is due; returns the number of steps committed."""
        return self._e.work(until_idle=until_idle)

    def now(self) -> int:
        """The store's clock, in microseconds since the epoch."""
        return self._e.now()

    @property
    def is_virtual(self) -> bool:
        return self._e.is_virtual

    def advance(self, duration: str | timedelta) -> None:
        """Virtual clock only: step through every due time up to now + ``duration``."""
        self._e.advance(duration)

    def set_clock(self, timestamp: str) -> None:
        """Virtual clock only: move forward to ``timestamp`` the same way as :meth:`advance`."""
        self._e.set_clock(_runtime.from_iso(timestamp))

    def close(self) -> None:
        self._e.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
