"""The intent dialect's compiler: a ``*.intent`` node tree → :class:`Application`.

The dialect is described in docs/reference/intent.md.

Every problem is reported into the diagnostics and compilation carries on, so one validation run
shows all of a file's problems. The work is split by topic: ``intent_data`` (entities),
``intent_seeds`` (seeds, forms), ``intent_process``/``intent_steps``/``intent_tasks``/
``intent_actions`` (processes), ``intent_expr`` (expressions against entity fields),
``intent_graph`` (routing), ``intent_delegate`` (Python code found without importing it),
``intent_permissions`` (who may read and write records) and ``intent_schedules`` with
``sweep_where`` and ``sweep_generate`` (sweeps run at each slot of a cron).
"""

from __future__ import annotations

from procflow.model.intent.data import (
    Catalog,
    compile_entities,
    declare_entities,
    finish_relations,
)
from procflow.model.intent.delegate import DelegateResolver
from procflow.model.intent.permissions import compile_permissions
from procflow.model.intent.proc import Env
from procflow.model.intent.process import compile_process
from procflow.model.intent.schedules import compile_schedules
from procflow.model.intent.seeds import compile_forms, compile_seeds
from procflow.model.intent.values import read_description
from procflow.model.ir import Application, Process
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, YSeq, kind_name
from procflow.model.source import Diagnostics, Pos

__all__ = ["compile_intent"]

TOP_KEYS = (
    "name", "description", "version", "entities", "seeds", "processes", "forms", "permissions",
    "schedules",
)  # fmt: skip
TOP_NOT_RUN = (
    "reports", "actions", "notifications", "integrations", "uses",
    "widgets", "prints", "generates", "rollups", "inbound", "transitions",
)  # fmt: skip
FILE = "file"  # the context of top-level messages


def compile_intent(
    root: YNode, file: str, project_dir: str, diags: Diagnostics
) -> Application | None:
    """Compile one intent file; every problem goes to ``diags``.

    Returns the application whenever the file is a mapping with a name (check ``diags`` for
    errors before using it), ``None`` otherwise.
    """
    reader = Reader(diags)
    if not isinstance(root, YMap):
        reader.error(
            root.pos,
            FILE,
            f"an intent file is a mapping (name:, entities:, ...), got {kind_name(root)}",
        )
        return None
    reader.keys(root, TOP_KEYS, FILE, not_run=TOP_NOT_RUN)
    name = reader.string(reader.require(root, "name", FILE, "the application's name"), FILE, "name")
    if name is not None and not name.strip():
        reader.error(root.entries["name"].value.pos, FILE, "name must not be empty")
    description = read_description(root, FILE, reader)
    version = _version(root, reader)
    catalog = Catalog(reader)
    entity_items = reader.seq(root.get("entities"), FILE, "entities")
    declare_entities(entity_items, catalog)
    compiled = compile_entities(entity_items, catalog)
    seeds = compile_seeds(reader.seq(root.get("seeds"), FILE, "seeds"), catalog)
    finish_relations(compiled, catalog)
    forms = compile_forms(reader.seq(root.get("forms"), FILE, "forms"), catalog)
    env = Env(reader, catalog, {f.name: f for f in forms}, DelegateResolver(project_dir))
    processes = _processes(root, env)
    permissions = compile_permissions(
        reader.seq(root.get("permissions"), FILE, "permissions"), catalog
    )
    schedules = compile_schedules(
        reader.seq(root.get("schedules"), FILE, "schedules"), env, _by_name(root, processes)
    )
    if not name:
        return None
    entities = tuple(catalog.entities[c.entity.name] for c in compiled)
    return Application(
        name,
        file,
        project_dir,
        root.pos,
        description,
        version,
        entities,
        tuple(seeds),
        tuple(forms),
        tuple(processes),
        permissions,
        schedules,
    )


def _version(root: YMap, reader: Reader) -> str | None:
    node = root.get("version")
    if (
        isinstance(node, YScalar)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return str(node.value)  # a free label: ``version: 2`` and ``version: 1.5`` are fine
    return reader.string(node, FILE, "version")


def _processes(root: YMap, env: Env) -> list[Process]:
    processes: list[Process] = []
    first: dict[str, Pos] = {}
    for i, item in enumerate(env.reader.seq(root.get("processes"), FILE, "processes")):
        node = env.reader.map(item, FILE, "each process")
        if node is None:
            continue
        process = compile_process(node, i, env)
        if process is None:
            continue
        if process.name in first:
            env.reader.error(
                node.entries["name"].value.pos,
                f"process [{process.name}]",
                f"declared twice (first at line {first[process.name].line})",
            )
            continue
        first[process.name] = process.pos
        processes.append(process)
    return processes


def _by_name(root: YMap, processes: list[Process]) -> dict[str, Process | None]:
    """Every process name the file declares, with its process (None: it has problems of its
    own, reported already)."""
    compiled: dict[str, Process | None] = {p.name: p for p in processes}
    declared = root.get("processes")
    for item in declared.items if isinstance(declared, YSeq) else []:
        name = item.get("name") if isinstance(item, YMap) else None
        if isinstance(name, YScalar) and isinstance(name.value, str):
            compiled.setdefault(name.value, None)
    return compiled
