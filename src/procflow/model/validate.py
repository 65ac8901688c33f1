"""Loading a definition file: YAML with positions → IR, with every problem reported at once."""

from __future__ import annotations

import gc
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from procflow.errors import DefinitionError, UsageError
from procflow.expr.hints import hint_budget
from procflow.model.reading.files import DEFAULT_MAX_FILE_SIZE, read_text
from procflow.model.source import Diagnostic, Diagnostics, Pos

if TYPE_CHECKING:
    from procflow.model.flow.calls import Signatures
    from procflow.model.ir import Application, Flow, InputDecl

Dialect = Literal["intent", "flow"]


@dataclass(frozen=True)
class Loaded:
    """The outcome of reading one file: the IR (when it could be built) and every diagnostic."""

    path: str
    dialect: Dialect
    definition: Application | Flow | None
    diagnostics: list[Diagnostic]
    source: str = ""  # the text compiled (what a deploy stores: the file is read once)
    # A flow file with errors: its flow as far as it compiled, for the calls checked across the
    # files validated together (its name still counts; its inputs are not trusted)
    partial: Flow | None = None

    @property
    def ok(self) -> bool:
        return self.definition is not None and not any(
            d.severity == "error" for d in self.diagnostics
        )


def dialect_of(path: str) -> Dialect:
    name = os.path.basename(path)
    if name.endswith(".intent"):
        return "intent"
    if name.endswith((".flow.yaml", ".flow.yml")):
        return "flow"
    raise UsageError(
        f"{path}: not a definition file; procflow reads *.intent and *.flow.yaml files"
    )


def load_text(text: str, path: str, project_dir: str | None = None) -> Loaded:
    """Compile ``text`` as the file ``path`` (its name decides the dialect)."""
    with _collector_paused(), hint_budget():
        return _compile(text, path, project_dir)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while a file compiles. The node tree is made of
    hundreds of thousands of young objects without cycles to collect, and the passes the
    collector starts every few hundred allocations took 40 % of the time of a large file. (Paused
    for the whole process: another thread's garbage waits the second or so a file takes.)"""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def import_compilers() -> None:
    """Import now what compiling a file of either dialect imports on first use: for a process
    about to compile many (a worker, which then freezes what is loaded out of the collector's
    scans)."""
    import procflow.model.connectors.manifest
    import procflow.model.connectors.registry
    import procflow.model.flow.compiler
    import procflow.model.intent.compiler
    import procflow.model.reading.yamlsrc  # noqa: F401


def _compile(text: str, path: str, project_dir: str | None) -> Loaded:
    # Imported here: the compilers pull in the expression language and connector registry,
    # which `procflow --help` should not pay for.
    from procflow.model.reading.yamlsrc import load_yaml

    dialect = dialect_of(path)
    project = project_dir or str(Path(path).resolve().parent)
    diags = Diagnostics()
    root = load_yaml(text, path, diags)
    definition: Application | Flow | None = None
    partial: Flow | None = None
    if root is not None:
        if dialect == "intent":
            from procflow.model.intent.compiler import compile_intent

            definition = compile_intent(root, path, project, diags)
        else:
            from procflow.model.connectors.registry import ConnectorRegistry
            from procflow.model.flow.compiler import compile_flow

            flow = compile_flow(root, path, project, diags, ConnectorRegistry(project))
            definition, partial = (None, flow) if diags.has_errors else (flow, None)
    return Loaded(path, dialect, definition, diags.sorted(), text, partial)


def load_file(
    path: str, project_dir: str | None = None, *, max_size: int = DEFAULT_MAX_FILE_SIZE
) -> Loaded:
    """Read and compile the file ``path``. A file that cannot be used as given (none there, not
    a regular file, over ``max_size`` bytes, unreadable) raises :class:`UsageError`."""
    dialect = dialect_of(path)
    try:
        text = read_text(path, max_size)
    except UnicodeDecodeError as exc:
        d = Diagnostic("error", f"the file is not UTF-8 text ({exc.reason})", Pos(path, 1, 1, ""))
        return Loaded(path, dialect, None, [d])
    return load_text(text, path, project_dir)


def compile_file(
    path: str, project_dir: str | None = None, *, max_size: int = DEFAULT_MAX_FILE_SIZE
) -> Application | Flow:
    """The IR of a valid file; raises :class:`DefinitionError` with every problem otherwise."""
    loaded = load_file(path, project_dir, max_size=max_size)
    if not loaded.ok or loaded.definition is None:
        raise DefinitionError(loaded.diagnostics)
    return loaded.definition


def check_calls_together(
    files: Sequence[Loaded], deployed: Signatures | None = None, intents: Collection[str] = ()
) -> list[Loaded]:
    """``files`` with the problems of their calls joined to their own diagnostics: every call is
    checked against the flows of all ``files`` over the ``deployed`` ones (a file's flow is the
    newer), and refused when it names one of the intent processes of ``files`` or ``intents``.
    A flow file with errors takes part with what compiled: its calls are checked, and it is a
    flow others may call, but its inputs are not checked (its declarations may be the error)."""
    from procflow.model.flow.calls import check_calls

    known: dict[str, Mapping[str, InputDecl] | None] = dict(deployed or {})
    processes = set(intents)
    for loaded in files:
        flow = flow_of(loaded)
        if flow is not None:
            known[flow.name] = flow.inputs if loaded.ok else None
        elif loaded.dialect == "intent" and loaded.definition is not None:
            app = cast("Application", loaded.definition)
            processes.update(p.name for p in app.processes)
    out = []
    for loaded in files:
        flow = flow_of(loaded)
        found = check_calls(flow, known, processes) if flow is not None else []
        if found:
            joined = Diagnostics([*loaded.diagnostics, *found]).sorted()
            loaded = replace(loaded, diagnostics=joined)
        out.append(loaded)
    return out


def flow_of(loaded: Loaded) -> Flow | None:
    """The flow of a flow file, as far as it compiled when the file has errors."""
    if loaded.dialect != "flow":
        return None
    return cast("Flow | None", loaded.definition) or loaded.partial
