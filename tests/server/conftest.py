"""Fixtures for the HTTP face, on both store backends (``db_url``, ``db_env``).

- ``client``: a Starlette ``TestClient`` on ``create_app(ServerState.of(db_url, ...))`` without a
  token table (every caller is the administrator ``local``); ``make_client(environ=...)`` builds
  one with settings of the test's own (``{"PROCFLOW_API_TOKENS": serving.TOKENS}`` for tokens).
- ``server_url``: the base URL of a real ``procflow serve`` subprocess on 127.0.0.1, a free port
  and the test's store, with its worker; ``start_server(*flags, environ=...)`` starts others.
  Every server still running when its test ends gets SIGTERM.

The token table and the subprocess harness are in ``serving.py`` (``from serving import ...``);
the test identity provider (``provider``) in ``oidc_provider.py``, and a server taking its JWTs
(``make_oidc``, SQLite only) in ``oidc_site.py``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path

import pytest
from api_site import make_site, site  # noqa: F401  (fixtures of the resource route tests)
from oidc_provider import provider  # noqa: F401  (the test identity provider)
from oidc_site import make_oidc  # noqa: F401  (a server taking its JWTs)
from serving import MakeClient, Served, StartServer, subprocess_env
from starlette.testclient import TestClient

from procflow.server.app import create_app
from procflow.server.state import ServerState


@pytest.fixture
def start_server(db_url: str, db_env: dict[str, str], tmp_path: Path) -> Iterator[StartServer]:
    """``start_server(*flags, environ=None, wait=True, db=None)``: a ``procflow serve --port 0
    --db URL *flags`` subprocess (by default on the test's store) with the backend's settings
    and ``environ``; its serving line is read when ``wait``."""
    started: list[Served] = []

    def start(
        *flags: str,
        environ: Mapping[str, str] | None = None,
        wait: bool = True,
        db: str | None = None,
    ) -> Served:
        args = ["--port", "0", "--db", db or db_url, *flags]
        served = Served(args, subprocess_env(db_env, environ), tmp_path)
        started.append(served)
        if wait:
            served.wait_serving()
        return served

    yield start
    for served in started:
        try:
            served.stop()
        except subprocess.TimeoutExpired:
            served.kill()


@pytest.fixture
def server_url(start_server: StartServer) -> str:
    """The base URL (``http://127.0.0.1:PORT``) of a real server on the test's store."""
    return start_server().base_url


@pytest.fixture
def make_client(db_url: str, db_env: dict[str, str]) -> Iterator[MakeClient]:
    """``make_client(environ=None, project=None)``: a TestClient on the test's store (its
    lifespan entered, so the app's engines are closed when the test ends)."""
    with ExitStack() as stack:

        def make(
            environ: Mapping[str, str] | None = None, project: str | None = None
        ) -> TestClient:
            state = ServerState.of(db_url, project, {**db_env, **(environ or {})})
            return stack.enter_context(TestClient(create_app(state)))

        yield make


@pytest.fixture
def client(make_client: MakeClient) -> TestClient:
    """A TestClient on the test's store without a token table: every caller is ``local``, an
    administrator."""
    return make_client()
