"""The definition catalog: deployed versions compiled once per process and kept in memory.

A worker meets the same few versions over and over, so each is compiled from its stored source
on first use and cached by version id (a version never changes once stored). Everything that
asks "which definition is this run on" or "which processes does a record write trigger" asks
here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from procflow.errors import DefinitionError, NotFoundError, UsageError
from procflow.model.source import suggest
from procflow.model.validate import load_text
from procflow.runtime.data.events import MIN_RETENTION_SECONDS
from procflow.store.rows import VersionRow
from procflow.store.store import Store, Tx

if TYPE_CHECKING:
    from procflow.model.ir import Application, Flow, Process
    from procflow.runtime.interpret.flow_state import FlowIndex

__all__ = ["Catalog", "Compiled", "compile_source", "event_retention"]


@dataclass
class Compiled:
    version: VersionRow
    definition: Application | Flow
    project_dir: str
    index: FlowIndex | None = None  # flows: every step by id

    # The stored dialect says which IR a version compiled into, so that the modules reading runs
    # never import the IR's classes to ask (importing them is a third of a `runs list`'s start).
    @property
    def app(self) -> Application | None:
        return cast("Application", self.definition) if self.version.dialect == "intent" else None

    @property
    def flow(self) -> Flow | None:
        return cast("Flow", self.definition) if self.version.dialect == "flow" else None


PRUNE_EVERY_MICROS = 60 * 1_000_000


class Catalog:
    """Compiled versions of one store, by version id."""

    def __init__(self, store: Store, project_dir: str | None) -> None:
        self.store = store
        self.project_dir = project_dir  # overrides each version's recorded folder when set
        self._compiled: dict[int, Compiled] = {}
        self._events_pruned_at: int | None = None  # by this process, on the store's clock
        self._event_flows: list[tuple[Flow, int]] | None = None  # as last read for an event

    def events_prune_due(self, now: int) -> bool:
        """Whether accepting an event at ``now`` should also prune expired events: at most once
        a minute of the store's clock per process, not with every event (retention is at least
        a day, so a minute's delay keeps nothing that matters, and saves two statements)."""
        last = self._events_pruned_at
        if last is not None and 0 <= now - last < PRUNE_EVERY_MICROS:
            return False
        self._events_pruned_at = now
        return True

    def compiled(self, version_id: int, reader: Tx | None = None) -> Compiled:
        hit = self._compiled.get(version_id)
        if hit is None:
            version = (reader or self.store.read()).version(version_id)
            project = self.project_dir or version.project_dir
            hit = Compiled(version, compile_source(version.source, version.file, project), project)
            if hit.flow is not None:
                # Only a flow's versions need the index, and only once compiled (the IR is
                # loaded by then): the interpreter's module is not imported to read a run.
                from procflow.runtime.interpret.flow_state import FlowIndex

                hit.index = FlowIndex(hit.flow)
            self._compiled[version_id] = hit
        return hit

    def process(
        self, version_id: int, name: str, reader: Tx | None = None
    ) -> tuple[Compiled, Process]:
        compiled = self.compiled(version_id, reader)
        app = compiled.app
        assert app is not None
        return compiled, next(p for p in app.processes if p.name == name)

    def flow(self, version_id: int, reader: Tx | None = None) -> tuple[Compiled, Flow]:
        compiled = self.compiled(version_id, reader)
        assert compiled.flow is not None and compiled.index is not None
        return compiled, compiled.flow

    def latest_processes(self, tx: Tx) -> list[tuple[Compiled, Process]]:
        """The latest version of every enabled intent process (the candidates for triggers)."""
        out: list[tuple[Compiled, Process]] = []
        for name, dialect, enabled, _latest in tx.definitions():
            version = tx.latest_version(name) if dialect == "intent" and enabled else None
            if version is None:
                continue
            compiled = self.compiled(version.id, tx)
            if compiled.app is not None:
                out.extend((compiled, p) for p in compiled.app.processes if p.name == name)
        return out

    def latest_flows(self, tx: Tx) -> list[tuple[Flow, int]]:
        """The latest version of every enabled flow, with its version id."""
        return [(self.flow(vid, tx)[1], vid) for vid in tx.latest_enabled_flow_versions()]

    def event_flows(self) -> list[tuple[Flow, int]]:
        """The latest enabled flows as this catalog last read them (now, the first time): what
        an event is checked against. The transaction that stores the event reads their version
        ids anyway and compares (``CheckedEvent.deliver``): a statement saved per event, and
        :meth:`forget_event_flows` when they changed."""
        if self._event_flows is None:
            self._event_flows = self.latest_flows(self.store.read())
        return self._event_flows

    def forget_event_flows(self) -> None:
        self._event_flows = None

    def latest_flow(self, name: str) -> Flow | None:
        """The latest deployed version of flow ``name``; None when ``name`` is not a flow."""
        reader = self.store.read()
        version = reader.latest_version(name)
        if version is None:
            raise NotFoundError.definition(name)
        if version.dialect != "flow":
            return None
        return self.flow(version.id, reader)[1]

    def startable(self, tx: Tx, name: str, dialect: str, hint: str) -> VersionRow:
        """The latest version of ``name`` if it is of ``dialect`` and enabled (else why not)."""
        found = tx.latest_version_enabled(name)
        if found is None:
            raise NotFoundError.definition(name)
        version, enabled = found
        if version.dialect != dialect:
            raise UsageError(hint)
        if not enabled:
            raise UsageError(f"[{name}] is disabled; enable it to start runs")
        return version

    def application_of(self, entity: str, reader: Tx | None = None) -> Application:
        """The intent application that declares ``entity`` (its latest deploy)."""
        reader = reader or self.store.read()
        version_id = reader.entity_version(entity)
        if version_id is None:
            known = sorted(reader.entities())
            raise NotFoundError(
                f"unknown entity [{entity}]{suggest(entity, known)}", kind="entity", key=entity
            )
        app = self.compiled(version_id, reader).app
        assert app is not None
        return app


def event_retention(tx: Tx) -> int:
    """Keep events for the longest lookback of any flow version ever deployed (a run may
    still be on an old version), at least 24 hours; in microseconds."""
    stored = tx.meta_get("event_retention")
    return max(MIN_RETENTION_SECONDS * 1_000_000, int(stored) if stored else 0)


def compile_source(source: str, file: str, project_dir: str) -> Application | Flow:
    """Re-compile a stored version (workers do this once per version and cache it)."""
    loaded = load_text(source, file, project_dir)
    if not loaded.ok or loaded.definition is None:
        raise DefinitionError(loaded.diagnostics)
    return loaded.definition
