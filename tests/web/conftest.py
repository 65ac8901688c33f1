"""Fixtures of the web UI's TestClient tests (``web``, ``make_web``); what they share lives in
``web_site.py`` (a module name of its own: every test folder here has a ``conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from web_site import ONBOARDING, ORDERS, PROVISIONING, REMINDERS, MakeWeb, Web

from procflow.runtime.engine import Engine
from procflow.server.app import create_app
from procflow.server.state import ServerState


@pytest.fixture
def make_web(db_url: str, db_env: dict[str, str], tmp_path: Path) -> Iterator[MakeWeb]:
    with ExitStack() as stack:
        engine = Engine.virtual(db_url, environ=db_env)
        stack.callback(engine.close)
        for path in (ORDERS, PROVISIONING, ONBOARDING, REMINDERS):
            engine.deploy(str(path))

        def make(environ: dict[str, str] | None = None) -> Web:
            state = ServerState.of(db_url, None, {**db_env, **(environ or {})})
            client = stack.enter_context(TestClient(create_app(state)))
            return Web(client, engine, tmp_path)

        yield make


@pytest.fixture
def web(make_web: MakeWeb) -> Web:
    """No token table: every caller is the administrator ``local``."""
    return make_web()
