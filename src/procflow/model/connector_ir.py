"""The connector part of the IR: a manifest's config, actions and events, and the schema of
their fields (re-exported by :mod:`procflow.model.ir`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# --- connectors --------------------------------------------------------------------------------

SchemaType = Literal[
    "string", "integer", "number", "boolean", "object", "array", "timestamp", "any"
]


@dataclass(frozen=True, slots=True)
class SchemaField:
    name: str
    type: SchemaType
    required: bool = False
    description: str | None = None


Schema = Mapping[str, SchemaField]


@dataclass(frozen=True, slots=True)
class ConfigItem:
    name: str
    env: str | None = None
    default: Any = None
    secret: bool = False
    required: bool = False
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ActionSpec:
    name: str
    args: Schema
    result: Schema | None = None  # None: the result's fields are not declared (not checked)
    description: str | None = None


@dataclass(frozen=True, slots=True)
class EventSpec:
    name: str
    payload: Schema
    correlate_on: tuple[str, ...] = ()
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectorManifest:
    name: str
    source: Literal["project", "entrypoint", "builtin"]
    config: Mapping[str, ConfigItem] = field(default_factory=dict)
    actions: Mapping[str, ActionSpec] = field(default_factory=dict)
    events: Mapping[str, EventSpec] = field(default_factory=dict)
    description: str | None = None
    directory: str | None = None  # project connectors: the folder with manifest.yaml + package
    module: str | None = None  # importable module implementing the actions
