"""The checked content of a ``*.test.yaml`` file: what :mod:`.scenario_model` builds and the runner
runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from procflow.model.ir import Application, Flow, Process
from procflow.model.source import Pos

DEFAULT_CLOCK = "2027-01-01T00:00:00Z"


@dataclass(frozen=True)
class FakeSpec:
    """One fake, as the file gives it (``returns``, ``fail``, ``raise``, ...)."""

    name: str
    pos: Pos
    returns: Any = None
    returns_each: tuple[Any, ...] | None = None
    fail: int = 0
    message: str = "fake failure"
    raise_: str | None = None
    non_retryable: bool = False
    sets: dict[str, Any] = field(default_factory=dict)
    produces: dict[str, Any] | None = None
    takes: timedelta | None = None


@dataclass(frozen=True)
class Action:
    """One item of ``do:``: its kind (``advance``, ``expect``, ...), its value, where it is."""

    kind: str
    value: Any
    pos: Pos
    keys: dict[str, Pos] = field(default_factory=dict)  # expect: each check's position


@dataclass(frozen=True)
class Given:
    record: dict[str, Any] | None = None
    inputs: dict[str, Any] | None = None
    clock: str = DEFAULT_CLOCK
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    users: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    pos: Pos
    given: Given
    actions: tuple[Action, ...]
    fakes: dict[str, FakeSpec]  # the file's fakes with this scenario's own replacing them


@dataclass(frozen=True)
class TestFile:
    path: str  # as found (relative to where the command runs, when below it)
    definition_path: str
    definition: Application | Flow
    process: Process | Flow  # the process (intent) or the flow under test
    scenarios: tuple[Scenario, ...]
    callees: tuple[str, ...] = ()  # the files of the project's flows it calls, callees first

    @property
    def application(self) -> Application | None:
        return self.definition if isinstance(self.definition, Application) else None
