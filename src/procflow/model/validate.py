"""Loading a definition file: YAML with positions → IR, with every problem reported at once."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from procflow.errors import DefinitionError, UsageError
from procflow.model.ir import Application, Flow
from procflow.model.source import Diagnostic, Diagnostics, Pos

Dialect = Literal["intent", "flow"]


@dataclass(frozen=True)
class Loaded:
    """The outcome of reading one file: the IR (when it could be built) and every diagnostic."""

    path: str
    dialect: Dialect
    definition: Application | Flow | None
    diagnostics: list[Diagnostic]

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
    # Imported here: the compilers pull in the expression language and connector registry,
    # which `procflow --help` should not pay for.
    from procflow.model.yamlsrc import load_yaml

    dialect = dialect_of(path)
    project = project_dir or str(Path(path).resolve().parent)
    diags = Diagnostics()
    root = load_yaml(text, path, diags)
    definition: Application | Flow | None = None
    if root is not None:
        if dialect == "intent":
            from procflow.model.intent import compile_intent

            definition = compile_intent(root, path, project, diags)
        else:
            from procflow.model.flow import compile_flow
            from procflow.model.registry import ConnectorRegistry

            definition = compile_flow(root, path, project, diags, ConnectorRegistry(project))
    return Loaded(path, dialect, definition, diags.sorted())


def load_file(path: str, project_dir: str | None = None) -> Loaded:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory; name a *.intent or *.flow.yaml file") from None
    except UnicodeDecodeError as exc:
        d = Diagnostic("error", f"the file is not UTF-8 text ({exc.reason})", Pos(path, 1, 1, ""))
        return Loaded(path, dialect_of(path), None, [d])
    return load_text(text, path, project_dir)


def compile_file(path: str, project_dir: str | None = None) -> Application | Flow:
    """The IR of a valid file; raises :class:`DefinitionError` with every problem otherwise."""
    loaded = load_file(path, project_dir)
    if not loaded.ok or loaded.definition is None:
        raise DefinitionError(loaded.diagnostics)
    return loaded.definition
