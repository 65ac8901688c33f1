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
from procflow.server.oidc import Identity, OidcVerifier, looks_like_jwt
from procflow.server.problems import Problem

__all__ = ["LOCAL", "Engines", "Identity", "ServerState"]

# Without a token table or an OpenID Connect issuer the server listens on loopback only and
# every caller is this user.
LOCAL = Actor("local", frozenset({"admin"}))
# The threads that run the handlers, each with its engine for the life of the process: half of
# the 32 connections a process's PostgreSQL pool holds (the worker, its heartbeat and its slot
# threads take theirs from it too). A pool of the server's own, not AnyIO's: AnyIO retires a
# thread idle for 10 s and starts a new one for the next burst, and each new thread opened an
# engine of its own while the retired one's stayed open: after a few bursts the pool was dry
# and every request waited 30 s for a connection, then failed.
REQUEST_THREADS = 16
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="procflow"'}

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
    oidc: OidcVerifier | None = None

    @classmethod
    def of(cls, url: str, project_dir: str | None, environ: Mapping[str, str]) -> ServerState:
        config = Config.from_environ(environ)
        tokens = TokenTable.from_config(config)
        oidc = OidcVerifier.from_config(config)
        return cls(config, Engines(url, project_dir, environ), tokens, dict(environ), oidc)

    @property
    def open(self) -> bool:
        """Neither a token table nor an issuer: every caller is the local administrator."""
        return self.tokens is None and self.oidc is None

    async def authenticate(self, headers: Mapping[str, str]) -> Actor:
        """The caller named by ``Authorization: Bearer <token or JWT>`` (401 without one, or
        with one that is not valid; 503 when a JWT's keys cannot be fetched); when
        :attr:`open`, the local administrator. Keys a JWT needs are fetched on a thread, so
        the event loop never waits for the identity provider."""
        if self.open:
            return LOCAL
        token = self.bearer(headers)
        if self.oidc is not None and looks_like_jwt(token) and self.oidc.needs_keys(token):
            await asyncio.get_running_loop().run_in_executor(None, self.oidc.fetch_keys, token)
        return self._identity(token).actor

    def identify(self, token: str) -> Identity:
        """Who ``token`` (a JWT or a token of the table) names, and until when: as
        :meth:`authenticate`, but it may wait for the identity provider (call it on a request
        thread, not the event loop)."""
        if self.oidc is not None and looks_like_jwt(token):
            self.oidc.fetch_keys(token)
        return self._identity(token)

    def bearer(self, headers: Mapping[str, str]) -> str:
        """The token of ``Authorization: Bearer <token>``; 401 when there is none."""
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if not token.strip():
            raise Problem(401, self._wanted(), headers=dict(_CHALLENGE))
        if scheme.lower() != "bearer":
            raise Problem(401, "the bearer token is not valid", headers=dict(_CHALLENGE))
        return token.strip()

    def _identity(self, token: str) -> Identity:
        if self.oidc is not None and looks_like_jwt(token):
            return self.oidc.verify(token)
        actor = self.tokens.actor_for_token(token) if self.tokens is not None else None
        if actor is None:
            raise Problem(401, "the bearer token is not valid", headers=dict(_CHALLENGE))
        return Identity(actor)

    def _wanted(self) -> str:
        if self.oidc is None:
            return "a bearer token from PROCFLOW_API_TOKENS is required"
        issuer = self.oidc.settings.issuer
        if self.tokens is None:
            return f"a bearer JWT of [{issuer}] is required"
        return f"a bearer token is required: a JWT of [{issuer}] or one from PROCFLOW_API_TOKENS"

    @functools.cached_property
    def metrics(self) -> ProcessMetrics:
        """This process's metrics: ``GET /metrics``, and the in-process worker's observer."""
        return ProcessMetrics(self.engines.url)

    def secret(self, name: str) -> str | None:
        """A signing secret from the server's environment (``SLACK_SIGNING_SECRET``…)."""
        value = self.environ.get(name)
        return value or None
