"""Finding connector manifests: project-local, installed packages, then the built-ins.

What connectors and actions exist, with their args, results and config, is compile-time
knowledge: flows are validated against it. Calling an action is the runtime's business
(:mod:`procflow.runtime.interpret.actions`); the registry only names the module that implements it.

Sources, first match wins:

1. ``<project>/connectors/<name>/manifest.yaml`` (the Python package beside it is imported by the
   runtime as ``connectors.<name>`` with the project directory on the import path);
2. installed packages: an entry point in the group ``procflow.connectors`` whose *name* is the
   connector's name and whose *value* is an importable module (``acme_crm.connector``, no
   ``:attr``); the manifest is the ``manifest.yaml`` in that module's directory;
3. the built-ins shipped as package data beside their code in ``procflow.connectors.builtin``
   (``<name>.yaml``, read with :mod:`importlib.resources`, without importing the plugin code).

Manifests are read lazily, once per registry, so a broken connector the flow does not use costs
nothing and reports nothing.
"""

from __future__ import annotations

import importlib.util
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from procflow.model.ir import ConnectorManifest
from procflow.model.source import Diagnostic, Diagnostics, Pos

if TYPE_CHECKING:
    from importlib import metadata


ENTRY_POINT_GROUP = "procflow.connectors"
BUILTIN_PACKAGE = "procflow.connectors.builtin"
MANIFEST = "manifest.yaml"


class ConnectorRegistry:
    """The connectors a project's flows can use, found by name (first source wins)."""

    def __init__(self, project_dir: str) -> None:
        self.project_dir = project_dir
        self._loaded: dict[str, ConnectorManifest | None] = {}
        self._diagnostics: dict[str, list[Diagnostic]] = {}

    # --- public -------------------------------------------------------------------------------

    def get(self, name: str) -> ConnectorManifest | None:
        """The manifest of connector ``name``, or ``None`` when no source has it (or it is
        unreadable; the problem is then in :meth:`diagnostics_for`)."""
        if name not in self._loaded:
            diags = Diagnostics()
            self._loaded[name] = self._load(name, diags)
            self._diagnostics[name] = diags.items
        return self._loaded[name]

    def names(self) -> list[str]:
        """Every connector name any source offers (without reading the manifests)."""
        return sorted(set(self._project_dirs) | set(self._entry_points) | set(_builtin_names()))

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """The problems of every manifest read so far, positioned in the manifest files."""
        return [d for items in self._diagnostics.values() for d in items]

    def diagnostics_for(self, name: str) -> list[Diagnostic]:
        return list(self._diagnostics.get(name, ()))

    # --- sources ------------------------------------------------------------------------------

    @cached_property
    def _project_dirs(self) -> dict[str, Path]:
        root = Path(self.project_dir) / "connectors"
        if not root.is_dir():
            return {}
        return {p.name: p for p in sorted(root.iterdir()) if (p / MANIFEST).is_file()}

    @cached_property
    def _entry_points(self) -> dict[str, metadata.EntryPoint]:
        from importlib import metadata  # looked at on first use only (~8 ms of start-up)

        return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}

    def _load(self, name: str, diags: Diagnostics) -> ConnectorManifest | None:
        # Reading a manifest needs YAML: imported with the first one read, so that a run calling
        # no connector (or a command that only reads runs) never imports it.
        from procflow.model.connectors.manifest import load_manifest

        if name in self._project_dirs:
            folder = self._project_dirs[name]
            return load_manifest(
                str(folder / MANIFEST),
                "project",
                diags,
                expected_name=name,
                directory=str(folder),
                module=f"connectors.{name}",
            )
        if name in self._entry_points:
            return self._load_entry_point(self._entry_points[name], diags)
        if name in _builtin_names():
            manifest, problems = _builtin(name)
            diags.extend(problems)
            return manifest
        return None

    def _load_entry_point(
        self, ep: metadata.EntryPoint, diags: Diagnostics
    ) -> ConnectorManifest | None:
        where = Pos(f"<entry point {ENTRY_POINT_GROUP}:{ep.name}>", 1, 1, "")
        if ep.attr:
            diags.error(
                where,
                f"the entry point's value [{ep.value}] must name a module (no ':attr'); "
                "its directory holds manifest.yaml",
            )
            return None
        try:
            spec = importlib.util.find_spec(ep.module)
        except (ImportError, ValueError) as exc:
            spec = None
            diags.error(where, f"cannot find module [{ep.module}]: {exc}")
        if spec is None or spec.origin is None:
            if not diags.items:
                diags.error(where, f"cannot find module [{ep.module}]")
            return None
        from procflow.model.connectors.manifest import load_manifest

        folder = Path(spec.origin).parent
        manifest = folder / MANIFEST
        if not manifest.is_file():
            diags.error(where, f"module [{ep.module}] has no {MANIFEST} in {folder}")
            return None
        return load_manifest(
            str(manifest),
            "entrypoint",
            diags,
            expected_name=ep.name,
            directory=str(folder),
            module=ep.module,
        )


def builtin_manifest(name: str) -> ConnectorManifest | None:
    """The manifest of the built-in connector ``name`` whatever a project declares (procflow's
    own mail, an intent's ``notify``, goes through the built-in ``email``); ``None`` when there
    is no such built-in."""
    if name not in _builtin_names():
        return None
    return _builtin(name)[0]


# The built-ins are package data and never change while the process runs: read each once per
# process (YAML parsing dominates validation time), not once per registry.


@cache
def _builtin_names() -> frozenset[str]:
    files = resources.files(BUILTIN_PACKAGE).iterdir()
    return frozenset(f.name.removesuffix(".yaml") for f in files if f.name.endswith(".yaml"))


@cache
def _builtin(name: str) -> tuple[ConnectorManifest | None, tuple[Diagnostic, ...]]:
    from procflow.model.connectors.manifest import load_manifest

    text = resources.files(BUILTIN_PACKAGE).joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    diags = Diagnostics()
    manifest = load_manifest(
        f"<procflow>/connectors/builtin/{name}.yaml",
        "builtin",
        diags,
        text=text,
        expected_name=name,
        module=f"{BUILTIN_PACKAGE}.{name}",
    )
    return manifest, tuple(diags.items)
