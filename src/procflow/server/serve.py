"""``procflow serve``: one process answering HTTP (uvicorn) with, unless ``--no-worker``, a worker
thread advancing runs beside it.

It binds its socket first (``--port 0``: the system picks a free port), then, once the server
accepts connections, prints exactly one line on stdout, ``serving on http://HOST:PORT``, so a
caller reading that line can connect at once; notices go to stderr. SIGTERM and SIGINT finish the
requests in flight and the worker's attempt, then the process exits 0.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType

import uvicorn

from procflow.errors import ConfigError
from procflow.runtime.engine import Engine
from procflow.runtime.work.observe import Observer
from procflow.runtime.work.run_logs import with_run_logs
from procflow.server.app import create_app
from procflow.server.oidc_keys import is_loopback
from procflow.server.state import ServerState

__all__ = ["ServeOptions", "bind", "check_exposure", "is_loopback", "serve"]

log = logging.getLogger("procflow.server")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True)
class ServeOptions:
    url: str
    project_dir: str | None
    host: str = "127.0.0.1"
    port: int = 8080
    worker: bool = True
    insecure: bool = False


def serve(
    options: ServeOptions,
    environ: Mapping[str, str],
    say: Callable[[str], None] = print,
    note: Callable[[str], None] = print,
) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code (0). ``say`` prints the serving line
    (stdout), ``note`` the notices about how the server is exposed (stderr)."""
    stop = threading.Event()
    server: _Server | None = None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Before uvicorn takes the signals over (and again when it hands them back): a signal
        # that arrives while starting stops the server as soon as it is up.
        stop.set()
        if server is not None:
            server.should_exit = True

    previous = {s: signal.signal(s, on_signal) for s in _SIGNALS}
    try:
        state = ServerState.of(options.url, options.project_dir, environ)
        check_exposure(options, tokens=not state.open, note=note)
        # The store must open (and, on PostgreSQL, the secret key be there) before anything
        # listens: a server that cannot work is refused at start, not on its first request.
        Engine(options.url, project_dir=options.project_dir, environ=environ, create=False).close()
        sock = bind(options.host, options.port)
        host, port = sock.getsockname()[:2]
        config = uvicorn.Config(
            create_app(state),
            http="httptools",  # C: a fifth less CPU a request than h11 (bench/README)
            log_level="warning",
            access_log=False,
            lifespan="on",
            log_config=None,  # uvicorn's lines go through procflow's handler (--log-format)
        )
        server = _Server(config, lambda: say(f"serving on http://{_url_host(host)}:{port}"))
        server.should_exit = stop.is_set()
        observer = state.metrics.observer  # the in-process worker's attempts, on /metrics
        worker = _start_worker(options, environ, stop, observer) if options.worker else None
        try:
            server.run(sockets=[sock])
        finally:
            stop.set()  # the worker finishes its attempt in flight and hands the rest back
            if worker is not None:
                worker.join()
            sock.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


class _Server(uvicorn.Server):
    """uvicorn's server, telling ``started`` once it accepts connections."""

    def __init__(self, config: uvicorn.Config, started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_started()


def check_exposure(options: ServeOptions, *, tokens: bool, note: Callable[[str], None]) -> None:
    """Without a token table or an OpenID Connect issuer (``tokens``: either is set) every
    caller is an administrator: only loopback may reach it."""
    if tokens:
        return
    if is_loopback(options.host):
        note(
            "no PROCFLOW_API_TOKENS or PROCFLOW_OIDC_ISSUER: listening on loopback only, every "
            "caller is the administrator 'local'"
        )
        return
    if not options.insecure:
        raise ConfigError(
            f"refusing to serve on [{options.host}] without API tokens or an OpenID Connect "
            "issuer: anyone reaching it would be an administrator; set PROCFLOW_API_TOKENS (or "
            "_FILE) or PROCFLOW_OIDC_ISSUER, use a loopback address, or pass --insecure",
            setting="PROCFLOW_API_TOKENS",
        )
    note(
        f"WARNING: serving on [{options.host}] without API tokens or an OpenID Connect issuer "
        "(--insecure): every caller is the administrator 'local'"
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: one the system picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP by name: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets
    # that say they are TCP. With it on, a response written in two parts (headers, body) on a
    # kept-alive connection waits for the client's delayed ACK: 40 ms a request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _start_worker(
    options: ServeOptions, environ: Mapping[str, str], stop: threading.Event, observer: Observer
) -> threading.Thread:
    def work() -> None:
        try:
            engine = Engine(options.url, project_dir=options.project_dir, environ=environ)
        except Exception:  # the HTTP face stays up; the error is the operator's to see
            log.exception("the in-process worker could not start")
            return
        # Metrics, and the run logs.
        engine.loop.advancer.observer = with_run_logs(observer, engine.lease_owner)
        beat = engine.heartbeat(stop)
        try:
            engine.work(until_idle=False, stop=stop)
        except Exception:
            log.exception("the in-process worker stopped")
        finally:
            beat.join(timeout=1)
            engine.close()

    thread = threading.Thread(target=work, name="procflow-serve-worker", daemon=True)
    thread.start()
    return thread
