"""The definitions the BPMN export is checked on (``tests/unit/test_bpmn.py`` against the XSD,
``tests/browser/test_bpmn_js.py`` in bpmn-js): every process and flow of every example file, and
of ``tests/bpmn_cases/`` (a flow with every construct and modifier once; an intent file whose
step names are the names the export gives its own elements)."""

from __future__ import annotations

from pathlib import Path

from procflow import graph
from procflow.model.validate import compile_file

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "bpmn_cases"


def definition_files() -> list[Path]:
    examples = [*ROOT.glob("examples/**/*.intent"), *ROOT.glob("examples/**/*.flow.yaml")]
    cases = [*CASES.glob("*.intent"), *CASES.glob("*.flow.yaml")]
    return sorted(examples) + sorted(cases)


def definitions() -> list[tuple[str, str]]:
    """(file relative to the repository, definition name), in a stable order."""
    out: list[tuple[str, str]] = []
    for path in definition_files():
        rel = str(path.relative_to(ROOT))
        out += [(rel, name) for name in graph.names(compile_file(str(path)))]
    return out


def exported(file: str, name: str | None = None) -> str:
    """What ``procflow graph FILE [--name NAME] --format bpmn`` prints (less its newline)."""
    return graph.draw(compile_file(str(ROOT / file)), name, "bpmn")
