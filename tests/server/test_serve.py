"""``procflow serve`` as a process: a real subprocess on 127.0.0.1, on both store backends.

The serving line and ``--port 0``, health and readiness, loopback only without a token table,
tokens required with one, a graceful stop on SIGTERM/SIGINT (exit 0, requests in flight and the
worker's attempt finished), and the in-process worker (``--no-worker`` advances nothing).
Waits are bounded deadlines, never assertions on speed.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from serving import ADMIN_TOKEN, TOKENS, StartServer, bearer

from procflow.errors import ConfigError
from procflow.runtime.engine import Engine
from procflow.server.serve import ServeOptions, bind, check_exposure, is_loopback

DEADLINE = 60.0  # seconds: the bound on waiting for something that must happen

FLOW = """\
flow: hello
inputs:
  who: { type: string, required: true }
steps:
  - greet: { set: { text: "hello {{ who }}" } }
output:
  text: "{{ greet.text }}"
"""

# A project connector whose call says it started, then waits until the test lets it go.
MANIFEST = """\
connector: gate
description: Waits at a gate the test opens.
actions:
  through:
    args: { marker: { type: string } }
    result: { passed: { type: boolean } }
"""
PACKAGE = """\
import time
from pathlib import Path


def through(ctx, marker):
    Path(marker + ".started").write_text("started")
    deadline = time.monotonic() + 120
    while not Path(marker + ".open").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"passed": True}
"""
GATED_FLOW = """\
flow: gated
inputs:
  marker: { type: string, required: true }
steps:
  - wait_at_gate: { gate.through: { marker: "{{ marker }}" } }
output:
  passed: "{{ wait_at_gate.passed }}"
"""


def eventually(check: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.05)


def deploy(db_url: str, folder: Path, name: str, text: str) -> None:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    engine = Engine(db_url, create=False)
    try:
        engine.deploy(str(path))
    finally:
        engine.close()


def run_status(db_url: str, run_id: str) -> str:
    engine = Engine(db_url, create=False)
    try:
        status: str = engine.show(run_id)["status"]
        return status
    finally:
        engine.close()


# --- starting, the serving line, health ------------------------------------------------------


def test_it_prints_one_serving_line_on_a_free_port_and_answers_health(
    start_server: StartServer,
) -> None:
    served = start_server()
    url = urlsplit(served.base_url)
    assert url.hostname == "127.0.0.1" and url.port and url.port > 0
    assert served.base_url == f"http://127.0.0.1:{url.port}"
    health = httpx.get(f"{served.base_url}/health")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    ready = httpx.get(f"{served.base_url}/health/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert served.stop() == 0
    assert served.stdout == [f"serving on {served.base_url}"]  # exactly one line, ever
    assert "Traceback" not in served.stderr


def test_without_tokens_it_says_it_is_loopback_only_and_everyone_is_local(
    start_server: StartServer,
) -> None:
    served = start_server()
    # No token needed: a route behind authentication answers the local administrator.
    assert httpx.get(f"{served.base_url}/openapi.json").status_code == 200
    assert served.stop() == 0  # stderr is read by a thread of its own: whole only once ended
    assert (
        "no PROCFLOW_API_TOKENS or PROCFLOW_OIDC_ISSUER: listening on loopback only, every "
        "caller is the administrator 'local'"
    ) in served.stderr


def test_a_non_loopback_host_without_tokens_is_refused(start_server: StartServer) -> None:
    served = start_server("--host", "0.0.0.0", wait=False)
    assert served.wait() == 2
    lines = served.stderr.strip().splitlines()
    assert lines == [
        "error: refusing to serve on [0.0.0.0] without API tokens or an OpenID Connect issuer: "
        "anyone reaching it would be an administrator; set PROCFLOW_API_TOKENS (or _FILE) or "
        "PROCFLOW_OIDC_ISSUER, use a loopback address, or pass --insecure"
    ]
    assert served.stdout == []


def test_a_port_in_use_is_refused_in_one_line(start_server: StartServer) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        served = start_server("--port", str(port), wait=False)
        assert served.wait() == 2
    assert (
        served.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: cannot listen on 127.0.0.1:{port}: ")
    )
    assert "Traceback" not in served.stderr and served.stdout == []


def test_a_token_table_with_a_short_token_is_refused_at_start(start_server: StartServer) -> None:
    served = start_server(environ={"PROCFLOW_API_TOKENS": "qzx7k=ada:admin"}, wait=False)
    assert served.wait() == 2
    [line] = served.stderr.strip().splitlines()
    assert line.startswith("error: PROCFLOW_API_TOKENS, entry 1: the token is shorter than 24")
    assert "qzx7k" not in line  # a token is never shown
    assert served.stdout == []


def test_with_tokens_every_route_but_health_needs_one(start_server: StartServer) -> None:
    served = start_server(environ={"PROCFLOW_API_TOKENS": TOKENS})
    base = served.base_url
    missing = httpx.get(f"{base}/openapi.json")
    assert missing.status_code == 401
    assert missing.headers["content-type"] == "application/problem+json"
    assert missing.headers["www-authenticate"] == 'Bearer realm="procflow"'
    assert missing.json()["detail"] == "a bearer token from PROCFLOW_API_TOKENS is required"
    wrong = httpx.get(f"{base}/openapi.json", headers=bearer("x" * 30))
    assert (wrong.status_code, wrong.json()["detail"]) == (401, "the bearer token is not valid")
    assert httpx.get(f"{base}/openapi.json", headers=bearer(ADMIN_TOKEN)).status_code == 200
    assert httpx.get(f"{base}/health").status_code == 200
    assert httpx.get(f"{base}/health/ready").status_code == 200
    assert served.stop() == 0
    assert "loopback only" not in served.stderr
    assert ADMIN_TOKEN not in served.stderr


# --- stopping --------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_it_with_exit_0(start_server: StartServer, signum: int) -> None:
    served = start_server()
    assert httpx.get(f"{served.base_url}/health").status_code == 200
    assert served.stop(signum) == 0
    assert "Traceback" not in served.stderr


def test_sigterm_finishes_the_request_in_flight(start_server: StartServer) -> None:
    """A request whose body has not all arrived when SIGTERM comes is still answered."""
    served = start_server("--no-worker")
    url = urlsplit(served.base_url)
    body = b'{"ping": true}'
    with socket.create_connection((url.hostname, url.port), timeout=DEADLINE) as conn:
        conn.sendall(
            b"GET /health HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        # 100 Continue: the server has the request and waits for its body.
        assert conn.recv(1024).startswith(b"HTTP/1.1 100 ")
        served.process.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # let the signal land before the body does
        assert served.process.poll() is None  # still serving the request in flight
        conn.sendall(body)
        answer = _read_response(conn)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert answer.endswith(b'{"status":"ok"}')
    assert served.wait() == 0


@pytest.mark.parametrize(
    "raw",
    [
        b'Content-Length: 100\r\n\r\n{"type": "x',  # the caller goes before the body ends
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",  # a chunk size the parser refuses
    ],
    ids=["closed-early", "bad-chunk"],
)
def test_a_body_that_never_ends_is_dropped_without_a_traceback(
    start_server: StartServer, db_url: str, raw: bytes
) -> None:
    served = start_server("--no-worker")
    url = urlsplit(served.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=DEADLINE) as conn:
        conn.sendall(b"POST /events HTTP/1.1\r\nHost: test\r\n" + raw)
        conn.shutdown(socket.SHUT_WR)
        answer = _read_response(conn)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400 "), answer
    assert httpx.get(f"{served.base_url}/health").status_code == 200
    engine = Engine(db_url, create=False)
    try:
        accepted = engine.store.read().c.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        engine.close()
    assert accepted == 0
    assert served.stop(signal.SIGTERM) == 0
    assert "Traceback" not in served.stderr and "ERROR" not in served.stderr, served.stderr


def _read_response(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def test_sigterm_lets_the_workers_attempt_finish(
    start_server: StartServer, db_url: str, tmp_path: Path
) -> None:
    connector = tmp_path / "connectors" / "gate"
    connector.mkdir(parents=True)
    (connector / "manifest.yaml").write_text(MANIFEST)
    (connector / "__init__.py").write_text(PACKAGE)
    deploy(db_url, tmp_path, "gated.flow.yaml", GATED_FLOW)
    marker = tmp_path / "gate"
    engine = Engine(db_url, create=False)
    try:
        run_id = engine.start_flow("gated", {"marker": str(marker)})
    finally:
        engine.close()
    served = start_server(environ={"PROCFLOW_STOP_TIMEOUT": "2m"})
    eventually(lambda: Path(f"{marker}.started").exists(), "the attempt started")
    served.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # let the signal land while the attempt runs
    Path(f"{marker}.open").write_text("open")
    assert served.wait() == 0, served.stderr
    assert run_status(db_url, run_id) == "completed"  # the attempt finished and committed


# --- the in-process worker -------------------------------------------------------------------


def test_no_worker_advances_nothing_and_the_default_worker_does(
    start_server: StartServer, db_url: str, tmp_path: Path
) -> None:
    deploy(db_url, tmp_path, "hello.flow.yaml", FLOW)
    idle = start_server("--no-worker")
    started = httpx.post(
        f"{idle.base_url}/flows/hello/runs", json={"inputs": {"who": "ada"}}, timeout=DEADLINE
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    assert started.headers["location"] == f"/runs/{run_id}"
    time.sleep(1.0)  # a window in which a worker would have finished it many times over
    assert httpx.get(f"{idle.base_url}/runs/{run_id}").json()["status"] == "running"
    assert idle.stop() == 0

    working = start_server()

    def completed() -> bool:
        shown = httpx.get(f"{working.base_url}/runs/{run_id}").json()
        return bool(shown["status"] == "completed")

    eventually(completed, "the server's worker completed the run")
    shown = httpx.get(f"{working.base_url}/runs/{run_id}").json()
    assert shown["output"] == {"text": "hello ada"}


# --- the exposure rule, for hosts a test should not bind -------------------------------------


def _options(host: str, insecure: bool = False) -> ServeOptions:
    return ServeOptions("sqlite:///x.db", None, host=host, insecure=insecure)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "localhost"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "example.org"])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


def test_insecure_serves_a_non_loopback_host_without_tokens_and_warns() -> None:
    said: list[str] = []
    check_exposure(_options("0.0.0.0", insecure=True), tokens=False, note=said.append)
    assert said == [
        "WARNING: serving on [0.0.0.0] without API tokens or an OpenID Connect issuer "
        "(--insecure): every caller is the administrator 'local'"
    ]


def test_tokens_allow_any_host_silently() -> None:
    said: list[str] = []
    check_exposure(_options("0.0.0.0"), tokens=True, note=said.append)
    assert said == []


def test_the_refusal_names_the_setting() -> None:
    with pytest.raises(ConfigError) as refused:
        check_exposure(_options("::"), tokens=False, note=print)
    assert refused.value.setting == "PROCFLOW_API_TOKENS"
    assert str(refused.value).startswith(
        "refusing to serve on [::] without API tokens or an OpenID Connect issuer"
    )


def test_connections_to_the_bound_socket_send_without_delay() -> None:
    """Nagle's algorithm is off on every accepted connection (asyncio does that only for a
    socket that says it is TCP): otherwise a response written in two parts on a kept-alive
    connection waits for the client's delayed ACK, some 40 ms a request."""

    async def accepted_nodelay() -> int:
        sock = bind("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            value = await asyncio.wait_for(seen, DEADLINE)
            writer.close()
            await writer.wait_closed()
        return value

    assert asyncio.run(accepted_nodelay()) != 0
