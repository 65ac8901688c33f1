"""What one ``procflow serve`` process holds: its settings, who its callers are, and an engine
per server thread (an engine is one store connection, and connections are not shared between
threads)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from procflow.config import Config
from procflow.runtime.data.identity import Actor, TokenTable
from procflow.runtime.engine import Engine
from procflow.runtime.operations.grouping import TxGroup
from procflow.server.metrics import ProcessMetrics
from procflow.server.problems import Problem

__all__ = ["LOCAL", "Engines", "ServerState"]

# Without a token table the server listens on loopback only and every caller is this user.
LOCAL = Actor("local", frozenset({"admin"}))
# The threads that run the handlers, each with its engine for the life of the process: half of
# the 32 connections a process's PostgreSQL pool holds (the worker, its heartbeat and its slot
# threads take theirs from it too). A pool of the server's own, not AnyIO's: AnyIO retires a
# thread idle for 10 s and starts a new one for the next burst, and each new thread opened an
# engine of its own while the retired one's stayed open: after a few bursts the pool was dry
# and every request waited 30 s for a connection, then failed.
REQUEST_THREADS = 16

_T = TypeVar("_T")


class Engines:
    """The request threads, and an engine per thread, opened on first use and closed with the
    server."""

    def __init__(self, url: str, project_dir: str | None, environ: Mapping[str, str]) -> None:
        self.url = url
        self.project_dir = project_dir
        self.environ = dict(environ)
        self._local = threading.local()
        self._all: list[Engine] = []
        self._lock = threading.Lock()
        self._writes = TxGroup()  # the request threads' user calls share transactions
        self._threads = ThreadPoolExecutor(REQUEST_THREADS, thread_name_prefix="procflow-request")

    async def call(self, function: Callable[..., _T], *args: Any) -> _T:
        """``function(*args)`` on a request thread (where :meth:`get` is this thread's
        engine), in the caller's context (its trace, its log fields)."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, context.run, function, *args)

    @property
    def opened(self) -> int:
        """How many engines are open: at most one per request thread."""
        with self._lock:
            return len(self._all)

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
        self._threads.shutdown(wait=True)
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
