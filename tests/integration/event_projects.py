"""A project whose one connector only declares events, and flows deployed from text: what the
tests of accepting events start from."""

from __future__ import annotations

from pathlib import Path

from procflow.runtime.engine import Engine


def events_project(root: Path, connector: str, manifest: str) -> Path:
    """``root/project`` with ``connectors/<connector>``: ``manifest`` and no actions."""
    project = root / "project"
    folder = project / "connectors" / connector
    folder.mkdir(parents=True)
    (folder / "manifest.yaml").write_text(manifest)
    (folder / "__init__.py").write_text('"""Events only: no actions."""\n')
    return project


def deploy_text(engine: Engine, project: Path, text: str) -> None:
    """Deploy the flow ``text`` (its first line ``flow: NAME``) from ``project/NAME.flow.yaml``."""
    name = text.split("\n", 1)[0].removeprefix("flow: ").strip()
    path = project / f"{name}.flow.yaml"
    path.write_text(text)
    engine.deploy(str(path))
