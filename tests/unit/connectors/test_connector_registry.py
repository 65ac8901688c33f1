"""Where manifests come from: project-local, then entry points, then the built-ins."""

from __future__ import annotations

import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from procflow.model.connectors.registry import ENTRY_POINT_GROUP, ConnectorRegistry
from procflow.model.validate import load_text

CRM = """\
connector: crm
actions:
  get:
    args: { id: { type: string, required: true } }
    result: { name: { type: string } }
events:
  won:
    payload: { deal: { type: object } }
    correlate_on: [deal.id]
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, *points: tuple[str, str]) -> None:
    eps = [metadata.EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in points]

    def entry_points(group: str) -> list[metadata.EntryPoint]:
        assert group == ENTRY_POINT_GROUP
        return eps

    monkeypatch.setattr(metadata, "entry_points", entry_points)


def test_names_lists_every_source_without_reading_manifests(tmp_path: Path) -> None:
    write(tmp_path / "connectors" / "crm" / "manifest.yaml", "connector: [broken\n")
    (tmp_path / "connectors" / "notes").mkdir()  # no manifest.yaml: not a connector
    registry = ConnectorRegistry(str(tmp_path))
    assert {"crm", "email", "http", "log", "slack"} <= set(registry.names())
    assert "notes" not in registry.names()
    assert registry.diagnostics == []  # nothing read yet


def test_project_connector_overrides_a_builtin(tmp_path: Path) -> None:
    write(
        tmp_path / "connectors" / "slack" / "manifest.yaml",
        "connector: slack\nactions:\n  post:\n    args: { room: { type: string } }\n",
    )
    registry = ConnectorRegistry(str(tmp_path))
    slack = registry.get("slack")
    assert slack is not None and slack.source == "project"
    assert list(slack.actions["post"].args) == ["room"]
    assert slack.directory == str(tmp_path / "connectors" / "slack")
    assert slack.module == "connectors.slack"


def test_get_is_cached_and_unknown_is_none(tmp_path: Path) -> None:
    write(tmp_path / "connectors" / "crm" / "manifest.yaml", CRM)
    registry = ConnectorRegistry(str(tmp_path))
    assert registry.get("crm") is registry.get("crm")
    assert registry.get("nope") is None


def test_entry_point_connector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "site" / "acme_crm" / "__init__.py", "")
    write(tmp_path / "site" / "acme_crm" / "manifest.yaml", CRM)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    fake_entry_points(monkeypatch, ("crm", "acme_crm"))
    registry = ConnectorRegistry(str(tmp_path / "project"))
    crm = registry.get("crm")
    assert crm is not None and crm.source == "entrypoint" and crm.module == "acme_crm"
    assert "crm" in registry.names() and registry.diagnostics == []
    sys.modules.pop("acme_crm", None)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("acme_crm:get", "must name a module (no ':attr')"),
        ("no_such_module_xyz", "cannot find module [no_such_module_xyz]"),
        (
            "no_such_pkg_xyz.sub",
            "cannot find module [no_such_pkg_xyz.sub]: No module named 'no_such_pkg_xyz'",
        ),
        ("json", "has no manifest.yaml"),
    ],
)
def test_entry_point_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    fake_entry_points(monkeypatch, ("crm", value))
    registry = ConnectorRegistry(str(tmp_path))
    assert registry.get("crm") is None
    [diag] = registry.diagnostics
    assert diag.pos.file == f"<entry point {ENTRY_POINT_GROUP}:crm>"
    assert message in diag.message


def test_manifest_problems_reach_the_flow_with_the_manifest_path(tmp_path: Path) -> None:
    manifest = tmp_path / "connectors" / "crm" / "manifest.yaml"
    write(
        manifest,
        """\
        connector: crm
        actions:
          get:
            args: { id: { type: strin, required: true } }
            retsult: {}
        events:
          won:
            payload: { deal: { type: object } }
            correlate_on: [dael]
        """,
    )
    write(tmp_path / "connectors" / "unused" / "manifest.yaml", "connector: [broken\n")
    flow = (
        "flow: t\nsteps:\n  - a: { crm.get: { id: x } }\n"
        "  - w: { wait_for: crm.won, match: {}, timeout: 1h }\n"
    )
    loaded = load_text(flow, str(tmp_path / "t.flow.yaml"), project_dir=str(tmp_path))
    shown = [d.format() for d in loaded.diagnostics]
    assert shown == [
        f"{manifest}:4:25: error: connector [crm] action [get] args [id]: unknown type [strin]; "
        "did you mean [string]? (one of string, integer, number, boolean, object, array, "
        "timestamp, any) (actions.get.args.id.type)",
        f"{manifest}:5:5: error: connector [crm] action [get]: unknown key [retsult]; did you mean "
        "[result]? (actions.get.retsult)",
        f"{manifest}:9:20: error: connector [crm] event [won]: correlate_on [dael] does not name "
        "a payload field; did you mean [deal]? (events.won.correlate_on[0])",
    ]  # the flow itself is fine against what could be read; the unused manifest is not read
    assert loaded.definition is None


def test_manifest_name_mismatch_in_flow_output(tmp_path: Path) -> None:
    write(tmp_path / "connectors" / "other" / "manifest.yaml", "connector: othr\n")
    loaded = load_text(
        "flow: t\nsteps:\n  - a: { other.x: {} }\n",
        str(tmp_path / "t.flow.yaml"),
        project_dir=str(tmp_path),
    )
    shown = [d.format() for d in loaded.diagnostics]
    assert any(
        "manifest.yaml:1:12: error: manifest: connector [othr] is found as [other]" in s
        for s in shown
    )
    assert any(
        "t.flow.yaml:3:10: error: step [a]: connector [other] has no action [x]" in s for s in shown
    )
