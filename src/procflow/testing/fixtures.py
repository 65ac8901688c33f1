"""The pytest side of :mod:`procflow.testing`: the ``engine`` fixture and fakes for one block.

In a ``conftest.py``: ``pytest_plugins = ["procflow.testing"]``; then a test takes ``engine``::

    def test_flaky(engine, tmp_path):
        engine.deploy("app.intent")
        with fake_delegate("custom.SchemaProvisioner", lambda ctx: None):
            engine.records.create("TenantApplication", {"title": "acme"})
            engine.work()
        engine.advance("PT30S")   # virtual time: no sleeping
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from procflow.api import Engine
from procflow.runtime.interpret.actions import ACTION_FAKES
from procflow.runtime.interpret.delegates import FAKES


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    """A fresh engine on a virtual-clock SQLite store in a temporary folder."""
    eng = Engine.virtual(str(tmp_path / "procflow.db"))
    try:
        yield eng
    finally:
        eng.close()


@contextmanager
def fake_delegate(target: str, fake: Callable[..., Any] | type) -> Iterator[None]:
    """Replace the delegate ``target`` (``custom.X`` or bare ``X``) while the block runs."""
    module, _, attr = target.rpartition(".")
    key = (module or "custom", attr)
    previous = FAKES.get(key)
    FAKES[key] = fake
    try:
        yield
    finally:
        if previous is None:
            FAKES.pop(key, None)
        else:
            FAKES[key] = previous


@contextmanager
def fake_action(target: str, fake: Callable[..., Any]) -> Iterator[None]:
    """Replace the connector action ``target`` (``search.status``) while the block runs; the
    fake is called like the real one, ``fake(ctx, **args)``."""
    connector, _, action = target.partition(".")
    if not connector or not action:
        raise ValueError(f"fake_action needs <connector>.<action>, got [{target}]")
    key = (connector, action)
    previous = ACTION_FAKES.get(key)
    ACTION_FAKES[key] = fake
    try:
        yield
    finally:
        if previous is None:
            ACTION_FAKES.pop(key, None)
        else:
            ACTION_FAKES[key] = previous
