"""What one ``procflow serve`` process holds: its settings, who its callers are, and an engine
per server thread (an engine is one store connection, and connections are not shared between
threads)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from procflow.config import Config
from procflow.runtime.engine import Engine
from procflow.runtime.grouping import TxGroup
from procflow.runtime.identity import Actor, TokenTable
from procflow.server.metrics import ProcessMetrics
from procflow.server.problems import Problem

__all__ = ["LOCAL", "Engines", "ServerState"]

# Without a token table the server listens on loopback only and every caller is this user.
LOCAL = Actor("local", frozenset({"admin"}))


class Engines:
    """An engine per thread, opened on first use and closed with the server."""

    def __init__(self, url: str, project_dir: str | None, environ: Mapping[str, str]) -> None:
        self.url = url
        self.project_dir = project_dir
        self.environ = dict(environ)
        self._local = threading.local()
        self._all: list[Engine] = []
        self._lock = threading.Lock()
        self._writes = TxGroup()  # the request threads' user calls share transactions

    def get(self) -> Engine:
        engine: Engine | None = getattr(self._local, "engine", None)
        if engine is None:
            engine = Engine(
                self.url, project_dir=self.project_dir, environ=self.environ, create=False
            )
            engine.writes = self._writes
            self._local.engine = engine
            with self._lock:
                self._all.append(engine)
        return engine

    def close(self) -> None:
        with self._lock:
            engines, self._all = self._all, []
        for engine in engines:
            engine.close()


@dataclass
class ServerState:
    """Settings and shared objects of one server process."""

    config: Config
    engines: Engines
    tokens: TokenTable | None
    environ: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, url: str, project_dir: str | None, environ: Mapping[str, str]) -> ServerState:
        config = Config.from_environ(environ)
        tokens = TokenTable.from_config(config)
        return cls(config, Engines(url, project_dir, environ), tokens, dict(environ))

    def authenticate(self, headers: Mapping[str, str]) -> Actor:
        """The caller named by ``Authorization: Bearer <token>`` (401 without one, or with one
        the table does not hold); without a token table, the local administrator."""
        if self.tokens is None:
            return LOCAL
        scheme, _, token = headers.get("authorization", "").partition(" ")
        actor = self.tokens.actor_for_token(token.strip()) if scheme.lower() == "bearer" else None
        if actor is None:
            raise Problem(
                401,
                "a bearer token from PROCFLOW_API_TOKENS is required"
                if not token
                else "the bearer token is not valid",
                headers={"WWW-Authenticate": 'Bearer realm="procflow"'},
            )
        return actor

    @functools.cached_property
    def metrics(self) -> ProcessMetrics:
        """This process's metrics: ``GET /metrics``, and the in-process worker's observer."""
        return ProcessMetrics(self.engines.url)

    def secret(self, name: str) -> str | None:
        """A signing secret from the server's environment (``SLACK_SIGNING_SECRET``…)."""
        value = self.environ.get(name)
        return value or None
