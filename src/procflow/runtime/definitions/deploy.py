"""Deploying definition files: validate completely (the calls across the files and the deployed
flows included), then store new versions in one transaction.

An intent file defines one definition per process (its versions share the file's source) plus
the entities and seeds the processes run on. Identical content deploys nothing new.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from procflow.errors import DefinitionError, DeployError, RecordError, UsageError
from procflow.model.ir import Application, Entity, Flow, WaitForStep
from procflow.model.validate import Loaded, load_file, load_text
from procflow.runtime.clock import micros
from procflow.runtime.data.records import seed_rows
from procflow.runtime.definitions.budgets import declare_budgets
from procflow.runtime.definitions.callees import checked_files
from procflow.runtime.definitions.catalog import Catalog, event_retention
from procflow.runtime.interpret.flow_state import FlowIndex
from procflow.store.store import Tx

_DIALECT_NOUN = {"flow": "a flow", "intent": "an intent process"}


@dataclass(frozen=True)
class Deployed:
    name: str
    dialect: str
    version: int
    version_id: int
    created: bool  # False: identical content was already the latest version


def compile_for_deploy(
    path: str, project_dir: str | None, max_file_size: int
) -> tuple[Loaded, str]:
    loaded = load_file(path, project_dir, max_size=max_file_size)
    if not loaded.ok or loaded.definition is None:
        raise DefinitionError(loaded.diagnostics)
    return loaded, loaded.source  # the text validated, not a second read of the file


def sent_text(text: str, file: str, project_dir: str | None, max_file_size: int) -> Loaded:
    """A definition file's text, sent rather than read (the HTTP API), compiled as the file
    ``file`` (its name decides the dialect) with ``project_dir`` as its project folder (None:
    the working directory). Newlines are normalised as a file read is, so the same file sent or
    deployed from disk is the same version."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_file_size:
        raise UsageError(
            f"{file}: the definition is {size:,} bytes, larger than the limit of "
            f"{max_file_size:,} bytes (PROCFLOW_MAX_FILE_SIZE)"
        )
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return load_text(text, file, project_dir)


OnFlow = Callable[[Tx, Flow], None]
"""What else a deploy of a flow does in its transaction (the engine arms its schedules: the
schedules room is above this one)."""
OnApp = Callable[[Tx, Application], None]
"""The same for an intent file (the engine arms its ``schedules:``)."""


def deploy_paths(
    catalog: Catalog, paths: Sequence[str], now: int, max_file_size: int,
    on_flow: OnFlow | None = None, on_app: OnApp | None = None,
) -> list[Deployed]:  # fmt: skip
    """Validate every file of ``paths`` completely, their calls across them and the deployed
    flows included, then store their new versions in one transaction: a file refused refuses
    them all, so a flow is never stored without a flow it calls from the same deploy."""
    read = [load_file(path, catalog.project_dir, max_size=max_file_size) for path in paths]
    return _store(catalog, checked_files(catalog, read), now, on_flow, on_app)


def deploy_sent(
    catalog: Catalog, text: str, file: str, now: int, max_file_size: int,
    on_flow: OnFlow | None = None, on_app: OnApp | None = None,
) -> tuple[list[Deployed], Loaded]:  # fmt: skip
    """Deploy a file's text sent as ``file`` (see :func:`sent_text`), its calls checked against
    the deployed flows and itself; also returns what compiling it found (its warnings)."""
    loaded = checked_files(catalog, [sent_text(text, file, catalog.project_dir, max_file_size)])[0]
    return _store(catalog, [loaded], now, on_flow, on_app), loaded


def _store(
    catalog: Catalog, files: Sequence[Loaded], now: int, on_flow: OnFlow | None,
    on_app: OnApp | None,
) -> list[Deployed]:  # fmt: skip
    done: list[Deployed] = []
    with catalog.store.tx() as tx:
        tx.lock_deploys()  # a concurrent deploy waits, then sees this one's versions
        for loaded in files:
            done += _store_file(tx, catalog, loaded, now, on_flow, on_app)
    return done


def _store_file(
    tx: Tx, catalog: Catalog, loaded: Loaded, now: int, on_flow: OnFlow | None,
    on_app: OnApp | None,
) -> list[Deployed]:  # fmt: skip
    definition = loaded.definition
    assert definition is not None
    project = catalog.project_dir or definition.project_dir
    if isinstance(definition, Flow):
        # Runs stay on the version they started with, so the event retention is the
        # longest lookback ever deployed (it only grows), not just the latest one's.
        lookback = longest_lookback(FlowIndex(definition))
        if lookback > event_retention(tx):
            tx.meta_set("event_retention", str(lookback))
        declare_budgets(tx, definition)
    done = deploy(tx, definition, loaded.source, definition.file, project, now)
    if isinstance(definition, Flow) and on_flow is not None:
        on_flow(tx, definition)
    if isinstance(definition, Application) and on_app is not None:
        on_app(tx, definition)
    return done


def longest_lookback(index: FlowIndex) -> int:
    """The longest ``wait_for`` lookback of a flow, in microseconds (0: none)."""
    steps = index.steps.values()
    return max(
        (micros(s.lookback) for s in steps if isinstance(s, WaitForStep) and s.lookback),
        default=0,
    )


def definition_names(definition: Application | Flow) -> list[str]:
    if isinstance(definition, Flow):
        return [definition.name]
    return [p.name for p in definition.processes]


def declared_var_names(definition: Application | Flow, name: str) -> list[str] | None:
    """The vars process ``name`` declares, kept with its version; None for a flow."""
    if isinstance(definition, Flow):
        return None
    return next([v.name for v in p.vars] for p in definition.processes if p.name == name)


def deploy(
    tx: Tx, definition: Application | Flow, source: str, file: str, project_dir: str, now: int
) -> list[Deployed]:
    digest = hashlib.sha256(source.encode()).hexdigest()
    dialect = "flow" if isinstance(definition, Flow) else "intent"
    out = []
    versions: list[int] = []
    for name in definition_names(definition):
        latest = tx.latest_version(name)
        if latest is not None and latest.dialect != dialect:
            raise DeployError(
                f"[{name}] is already deployed as {_DIALECT_NOUN[latest.dialect]}; "
                f"{_DIALECT_NOUN[dialect]} cannot reuse the name",
                definition=name,
            )
        if latest is not None and latest.hash == digest:
            out.append(Deployed(name, dialect, latest.version, latest.id, False))
            versions.append(latest.id)
            continue
        vars_ = declared_var_names(definition, name)
        row = tx.insert_version(name, dialect, digest, file, project_dir, source, now, vars_)
        out.append(Deployed(name, dialect, row.version, row.id, True))
        versions.append(row.id)
    if isinstance(definition, Application):
        anchor = (
            versions[0]
            if versions
            else _app_anchor(tx, definition, digest, file, project_dir, source, now)
        )
        _deploy_entities(tx, definition, anchor, now)
    return out


def _app_anchor(
    tx: Tx, app: Application, digest: str, file: str, project_dir: str, source: str, now: int
) -> int:
    """An intent file with no processes still needs a version row to anchor its entities."""
    name = f"{app.name}@entities"
    latest = tx.latest_version(name)
    if latest is not None and latest.hash == digest:
        return latest.id
    return tx.insert_version(name, "intent", digest, file, project_dir, source, now).id


def entity_declaration(entity: Entity) -> dict[str, Any]:
    return {
        "fields": {f.name: {"type": f.type, "required": f.required} for f in entity.fields},
        "relations": {r.name: {"kind": r.kind, "to": r.to} for r in entity.relations},
    }


def _deploy_entities(tx: Tx, app: Application, version_id: int, now: int) -> None:
    existing = tx.entities()
    for entity in app.entities:
        declared = entity_declaration(entity)
        if entity.name in existing:
            owner, previous = existing[entity.name]
            if owner != app.name:
                raise DeployError(
                    f"entity [{entity.name}] is already declared by the deployed file [{owner}]; "
                    "two files cannot declare the same entity",
                    definition=app.name,
                    entity=entity.name,
                )
            _check_compatible(app.name, entity.name, previous, declared)
        tx.put_entity(entity.name, app.name, version_id, declared)
    for seed in app.seeds:
        try:
            rows = seed_rows(app, seed)
        except RecordError as exc:
            raise DeployError(str(exc), definition=app.name, entity=exc.entity) from None
        seeded = app.entity(seed.entity)
        assert seeded is not None
        pk = seeded.primary_key.name
        for row in rows:
            tx.upsert_seed(seed.entity, int(row[pk]), row, now)


def _check_compatible(definition: str, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    problems = []
    for field_name, spec in old["fields"].items():
        now_spec = new["fields"].get(field_name)
        if now_spec is None:
            problems.append(f"field [{field_name}] was removed")
        elif now_spec["type"] != spec["type"]:
            problems.append(
                f"field [{field_name}] changed type from {spec['type']} to {now_spec['type']}"
            )
    for field_name, spec in new["fields"].items():
        if field_name not in old["fields"] and spec["required"]:
            problems.append(f"new field [{field_name}] is required (existing records lack it)")
    for rel_name, spec in old["relations"].items():
        now_rel = new["relations"].get(rel_name)
        if now_rel is None:
            problems.append(f"relation [{rel_name}] was removed")
        elif now_rel != spec:
            problems.append(f"relation [{rel_name}] changed")
    if problems:
        raise DeployError(
            f"entity [{name}] cannot change this way over deployed records: "
            + "; ".join(problems)
            + ". Redeploys may add entities, optional fields and relations only.",
            definition=definition,
            entity=name,
        )
