"""The definition catalog: deployed versions compiled once per process and kept in memory.

A worker meets the same few versions over and over, so each is compiled from its stored source
on first use and cached by version id (a version never changes once stored). Everything that
asks "which definition is this run on" or "which processes does a record write trigger" asks
here.
"""

from __future__ import annotations

from dataclasses import dataclass

from procflow.errors import NotFoundError, UsageError
from procflow.model.ir import Application, Flow, Process, WaitForStep
from procflow.model.source import suggest
from procflow.model.validate import Loaded
from procflow.runtime.clock import micros
from procflow.runtime.data.events import MIN_RETENTION_SECONDS
from procflow.runtime.definitions.deploy import (
    Deployed,
    compile_for_deploy,
    compile_source,
    compile_text_for_deploy,
    deploy,
)
from procflow.runtime.interpret.flow_state import FlowIndex
from procflow.store.rows import VersionRow
from procflow.store.store import Store, Tx

__all__ = ["Catalog", "Compiled", "longest_lookback"]


@dataclass
class Compiled:
    version: VersionRow
    definition: Application | Flow
    project_dir: str
    index: FlowIndex | None = None  # flows: every step by id


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
            definition = compile_source(version.source, version.file, project)
            index = FlowIndex(definition) if isinstance(definition, Flow) else None
            hit = Compiled(version, definition, project, index)
            self._compiled[version_id] = hit
        return hit

    def process(
        self, version_id: int, name: str, reader: Tx | None = None
    ) -> tuple[Compiled, Process]:
        compiled = self.compiled(version_id, reader)
        app = compiled.definition
        assert isinstance(app, Application)
        return compiled, next(p for p in app.processes if p.name == name)

    def flow(self, version_id: int, reader: Tx | None = None) -> tuple[Compiled, Flow]:
        compiled = self.compiled(version_id, reader)
        assert isinstance(compiled.definition, Flow) and compiled.index is not None
        return compiled, compiled.definition

    def latest_processes(self, tx: Tx) -> list[tuple[Compiled, Process]]:
        """The latest version of every enabled intent process (the candidates for triggers)."""
        out: list[tuple[Compiled, Process]] = []
        for name, dialect, enabled, _latest in tx.definitions():
            version = tx.latest_version(name) if dialect == "intent" and enabled else None
            if version is None:
                continue
            compiled = self.compiled(version.id, tx)
            app = compiled.definition
            if isinstance(app, Application):
                out.extend((compiled, p) for p in app.processes if p.name == name)
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
        app = self.compiled(version_id, reader).definition
        assert isinstance(app, Application)
        return app

    def deploy(self, path: str, now: int, max_file_size: int) -> list[Deployed]:
        """Validate ``path`` completely, then store its new versions in one transaction."""
        loaded, source = compile_for_deploy(path, self.project_dir, max_file_size)
        return self._store(loaded, source, now)

    def deploy_text(
        self, text: str, file: str, now: int, max_file_size: int
    ) -> tuple[list[Deployed], Loaded]:
        """Deploy a file's text sent as ``file`` (see ``compile_text_for_deploy``); also returns
        what compiling it found (its warnings)."""
        loaded = compile_text_for_deploy(text, file, self.project_dir, max_file_size)
        return self._store(loaded, loaded.source, now), loaded

    def _store(self, loaded: Loaded, source: str, now: int) -> list[Deployed]:
        definition = loaded.definition
        assert definition is not None
        project = self.project_dir or definition.project_dir
        with self.store.tx() as tx:
            tx.lock_deploys()  # a concurrent deploy waits, then sees this one's versions
            if isinstance(definition, Flow):
                # Runs stay on the version they started with, so the event retention is the
                # longest lookback ever deployed (it only grows), not just the latest one's.
                lookback = longest_lookback(FlowIndex(definition))
                if lookback > event_retention(tx):
                    tx.meta_set("event_retention", str(lookback))
            return deploy(tx, definition, source, definition.file, project, now)


def longest_lookback(index: FlowIndex) -> int:
    """The longest ``wait_for`` lookback of a flow, in microseconds (0: none)."""
    steps = index.steps.values()
    return max(
        (micros(s.lookback) for s in steps if isinstance(s, WaitForStep) and s.lookback),
        default=0,
    )


def event_retention(tx: Tx) -> int:
    """Keep events for the longest lookback of any flow version ever deployed (a run may
    still be on an old version), at least 24 hours; in microseconds."""
    stored = tx.meta_get("event_retention")
    return max(MIN_RETENTION_SECONDS * 1_000_000, int(stored) if stored else 0)
