"""The built-in ``http.request`` against a real local HTTP server (no mocks)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from procflow.errors import ActionTimeout, HttpRequestError, HttpStatusError, NonRetryableError
from procflow.model.connectors.registry import ConnectorRegistry
from procflow.runtime.interpret.actions import call_action, check_args, load_action
from procflow.runtime.interpret.context import StepContext, step_logger


class Handler(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        Handler.seen.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
            }
        )
        path = self.path.split("?")[0]
        if path == "/json":
            self._send(200, "application/json", json.dumps({"method": self.command, "got": body}))
        elif path == "/text":
            self._send(200, "text/plain", "plain text, not json")
        elif path == "/created":
            self._send(201, "application/json", json.dumps({"id": 7}))
        elif path == "/missing":
            self._send(404, "text/plain", "no such thing here\n" + "x" * 1000)
        elif path == "/slow":
            threading.Event().wait(2)
            self._send(200, "text/plain", "late")
        elif path == "/empty":
            self._send(204, "text/plain", "")
        else:
            self._send(500, "text/plain", "unexpected path")

    def _send(self, status: int, content_type: str, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("X-Server-Tag", "Procflow-Test")
        if status != 204:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if status != 204:
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client gave up on /slow: its late write fails, which is expected


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = QuietServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def request(args: dict[str, Any], timeout: float | None = 10.0) -> dict[str, Any]:
    manifest = ConnectorRegistry(".").get("http")
    assert manifest is not None
    check_args(manifest, "request", args)
    fn = load_action(manifest, "request", ".")
    log, _ = step_logger("run-h", "call")
    ctx = StepContext(
        run_id="run-h",
        step="call",
        attempt=1,
        idempotency_key="k",
        project_dir=".",
        log=log,
        timeout=timeout,
    )
    return call_action(fn, ctx, args)


def test_get_json(server: str) -> None:
    result = request({"url": f"{server}/json?q=1"})
    assert result["status"] == 200
    assert result["json"] == {"method": "GET", "got": ""}
    assert json.loads(result["text"]) == result["json"]
    assert result["headers"]["content-type"] == "application/json"
    assert result["headers"]["x-server-tag"] == "Procflow-Test"
    assert all(name == name.lower() for name in result["headers"])
    assert Handler.seen[-1]["path"] == "/json?q=1"


def test_post_json_with_headers(server: str) -> None:
    result = request(
        {
            "method": "post",
            "url": f"{server}/json",
            "headers": {"Authorization": "Bearer abc", "X-Count": 3},
            "json": {"name": "Ada", "tags": ["a", "b"]},
        }
    )
    assert result["status"] == 200
    assert json.loads(result["json"]["got"]) == {"name": "Ada", "tags": ["a", "b"]}
    sent = Handler.seen[-1]
    assert sent["method"] == "POST"
    assert sent["headers"]["authorization"] == "Bearer abc"
    assert sent["headers"]["x-count"] == "3"
    assert sent["headers"]["content-type"] == "application/json"


def test_put_raw_body(server: str) -> None:
    result = request({"method": "PUT", "url": f"{server}/json", "body": "raw=1&x=ü"})
    assert result["json"] == {"method": "PUT", "got": "raw=1&x=ü"}


def test_non_json_text(server: str) -> None:
    result = request({"url": f"{server}/text"})
    assert result["status"] == 200
    assert result["json"] is None
    assert result["text"] == "plain text, not json"


def test_default_expect_accepts_any_2xx(server: str) -> None:
    assert request({"method": "POST", "url": f"{server}/created"})["json"] == {"id": 7}
    empty = request({"method": "DELETE", "url": f"{server}/empty"})
    assert (empty["status"], empty["json"], empty["text"]) == (204, None, "")


def test_status_outside_default_expect_fails_with_excerpt(server: str) -> None:
    with pytest.raises(HttpStatusError) as info:
        request({"url": f"{server}/missing?token=hidden"})
    message = str(info.value)
    assert (info.value.status, info.value.connector, info.value.action) == (404, "http", "request")
    assert "404" in message and "expected 2xx" in message
    assert "no such thing here" in message
    assert "hidden" not in message
    assert len(message) < 400
    assert not isinstance(info.value, NonRetryableError)  # retry applies


def test_expect_list(server: str) -> None:
    assert request({"url": f"{server}/missing", "expect": [404]})["status"] == 404
    with pytest.raises(HttpStatusError, match=r"answered 201 \(expected 200, 202\)"):
        request({"method": "POST", "url": f"{server}/created", "expect": [202, 200]})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"json": {"a": 1}, "body": "x"}, "not both"),
        ({"method": "FETCH"}, r"method \[FETCH\]"),
        ({"expect": ["200"]}, "expect"),
        ({"url": "ftp://example.com/x"}, "absolute http"),
    ],
)
def test_unusable_args_are_non_retryable(server: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(NonRetryableError, match=message):
        request({"url": f"{server}/json", **args})


def test_connection_refused_is_a_retryable_failure() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(HttpRequestError, match="ConnectError"):
        request({"url": f"http://127.0.0.1:{port}/"})


def test_step_timeout_bounds_the_request(server: str) -> None:
    with pytest.raises((ActionTimeout, HttpRequestError)):
        request({"url": f"{server}/slow"}, timeout=0.3)
