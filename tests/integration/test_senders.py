"""``slack.post`` against a real local HTTP server and ``email.send`` against a real local SMTP
server (aiosmtpd), both directly and through a flow run on each store backend (no mocks)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SMTPServer
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session

from procflow.connectors.builtin.email import message_id
from procflow.errors import (
    NonRetryableError,
    SlackError,
    SlackFatalError,
    SmtpError,
    SmtpFatalError,
)
from procflow.model.connectors.registry import ConnectorRegistry
from procflow.runtime.engine import Engine
from procflow.runtime.interpret.actions import call_action, check_args, load_action, resolve_config
from procflow.runtime.interpret.context import StepContext, step_logger

TOKEN = "xoxb-test-token-4f9a"
SMTP_USER, SMTP_PASSWORD = "bot@acme.test", "smtp-pass-7c1e"

# --- a fake Slack Web API ---------------------------------------------------------------------


class SlackHandler(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode() if length else ""
        body = json.loads(raw) if raw else {}
        SlackHandler.seen.append(
            {
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "json": body,
            }
        )
        if self.path != "/api/chat.postMessage":
            self._send(404, {"ok": False, "error": "unknown_method"})
            return
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._send(200, {"ok": False, "error": "invalid_auth"})
            return
        channel = body.get("channel")
        if channel == "#missing":
            self._send(200, {"ok": False, "error": "channel_not_found"})
        elif channel == "#flaky":
            self._send(200, {"ok": False, "error": "internal_error"})
        elif channel == "#busy":
            self._send(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "7"})
        elif channel == "#broken":
            self._send(503, {"ok": False}, {}, text=f"upstream down (got {TOKEN})")
        else:
            answer = {"ok": True, "channel": "C024BE91L", "ts": f"1700000000.{len(self.seen):06d}"}
            if channel == "#warn":
                answer["warning"] = "missing_charset"
            self._send(200, answer)

    def _send(
        self,
        status: int,
        data: dict[str, Any],
        headers: dict[str, str] | None = None,
        text: str | None = None,
    ) -> None:
        payload = (json.dumps(data) if text is None else text).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture(scope="module")
def slack_api() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), SlackHandler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/api"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


# --- a local SMTP server ---------------------------------------------------------------------


@dataclass
class Mailbox:
    """What the SMTP server received; recipients under ``@refused.test`` get a 550, under
    ``@later.test`` a 450."""

    messages: list[tuple[str, list[str], EmailMessage]] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)

    async def handle_RCPT(
        self, server: SMTPServer, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        if address.endswith("@refused.test"):
            return "550 5.1.1 no such user here"
        if address.endswith("@later.test"):
            return "450 4.2.1 mailbox busy, try later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTPServer, session: Session, envelope: Envelope) -> str:
        content = envelope.content
        assert isinstance(content, bytes)
        mail_from = envelope.mail_from or ""
        msg = message_from_bytes(content, policy=default_policy)
        assert isinstance(msg, EmailMessage)
        self.messages.append((mail_from, list(envelope.rcpt_tos), msg))
        return "250 Message accepted for delivery"

    def authenticate(
        self, server: SMTPServer, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        assert isinstance(data, LoginPassword)
        login, password = data.login.decode(), data.password.decode()
        self.logins.append((login, password))
        ok = (login, password) == (SMTP_USER, SMTP_PASSWORD)
        return AuthResult(success=ok, handled=False)  # not handled: the server answers 535


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SmtpServer:
    url: str  # without credentials
    port: int
    mailbox: Mailbox

    def with_login(self, user: str = SMTP_USER, password: str = SMTP_PASSWORD) -> str:
        return f"smtp://{user.replace('@', '%40')}:{password}@127.0.0.1:{self.port}"


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(
        mailbox,
        hostname="127.0.0.1",
        port=port,
        authenticator=mailbox.authenticate,
        auth_require_tls=False,  # a loopback test server without a certificate
    )
    controller.start()
    try:
        yield SmtpServer(f"smtp://127.0.0.1:{port}", port, mailbox)
    finally:
        controller.stop()


# --- calling the actions ---------------------------------------------------------------------


def call(connector: str, action: str, args: dict[str, Any], environ: dict[str, str]) -> Any:
    """``connector.action`` as the runtime calls it; returns ``(result, ctx)``."""
    manifest = ConnectorRegistry(".").get(connector)
    assert manifest is not None
    check_args(manifest, action, args)
    fn = load_action(manifest, action, ".")
    log, lines = step_logger("run-s", "send")
    ctx = StepContext(
        run_id="run-s",
        step="send",
        attempt=1,
        idempotency_key="run-s/send",
        project_dir=".",
        log=log,
        config=resolve_config(manifest, environ),
        timeout=10.0,
    )
    return call_action(fn, ctx, args), ctx, lines


def slack_env(slack_api: str, token: str = TOKEN) -> dict[str, str]:
    return {"SLACK_TOKEN": token, "SLACK_BASE_URL": slack_api}


# --- slack.post ------------------------------------------------------------------------------


def test_slack_post_sends_the_request_and_returns_ts_and_channel(slack_api: str) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*Approve?*"}}]
    result, ctx, _ = call(
        "slack",
        "post",
        {"channel": "#sales-ops", "text": "Approve Acme?", "blocks": blocks, "thread_ts": "1.5"},
        slack_env(slack_api),
    )
    assert result["channel"] == "C024BE91L"
    assert result["ts"].startswith("1700000000.")
    assert ctx.outbox == []
    assert ctx.sent == ["#sales-ops"]
    request = SlackHandler.seen[-1]
    assert request["path"] == "/api/chat.postMessage"
    assert request["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert request["headers"]["content-type"].startswith("application/json")
    assert request["json"] == {
        "channel": "#sales-ops",
        "text": "Approve Acme?",
        "blocks": blocks,
        "thread_ts": "1.5",
    }


def test_slack_post_leaves_out_absent_optional_args(slack_api: str) -> None:
    call("slack", "post", {"channel": "C1", "text": "hi"}, slack_env(slack_api + "/"))
    assert SlackHandler.seen[-1]["path"] == "/api/chat.postMessage"
    assert SlackHandler.seen[-1]["json"] == {"channel": "C1", "text": "hi"}


def test_slack_warning_goes_to_the_step_log(slack_api: str) -> None:
    _, _, lines = call("slack", "post", {"channel": "#warn", "text": "x"}, slack_env(slack_api))
    assert ("warning", "slack.post: Slack warned: missing_charset") in lines.lines


@pytest.mark.parametrize(
    ("channel", "token", "error"),
    [("#missing", TOKEN, "channel_not_found"), ("#sales-ops", "xoxb-wrong-9d2e", "invalid_auth")],
)
def test_slack_errors_no_retry_can_fix_are_non_retryable(
    slack_api: str, channel: str, token: str, error: str
) -> None:
    with pytest.raises(SlackFatalError) as info:
        call("slack", "post", {"channel": channel, "text": "x"}, slack_env(slack_api, token))
    assert isinstance(info.value, NonRetryableError)
    assert isinstance(info.value, SlackError)  # one family, whether retried or not
    assert (info.value.error, info.value.connector, info.value.action) == (error, "slack", "post")
    assert f"[{error}]" in str(info.value)
    assert token not in str(info.value)


@pytest.mark.parametrize(
    ("channel", "words"),
    [
        ("#flaky", ["[internal_error]"]),
        ("#busy", ["429", "retry after 7s"]),
        ("#broken", ["HTTP 503", "upstream down"]),
    ],
)
def test_slack_transient_errors_are_retryable(
    slack_api: str, channel: str, words: list[str]
) -> None:
    with pytest.raises(SlackError) as info:
        call("slack", "post", {"channel": channel, "text": "x"}, slack_env(slack_api))
    message = str(info.value)
    assert not isinstance(info.value, NonRetryableError)
    assert all(word in message for word in words), message
    assert TOKEN not in message  # the 503 body echoes the token: scrubbed


def test_slack_unreachable_is_retryable() -> None:
    env = slack_env(f"http://127.0.0.1:{free_port()}/api")
    with pytest.raises(SlackError, match="ConnectError") as info:
        call("slack", "post", {"channel": "#a", "text": "x"}, env)
    assert not isinstance(info.value, NonRetryableError)


# --- email.send ------------------------------------------------------------------------------


def test_email_send_delivers_a_plain_text_message(smtp_server: SmtpServer) -> None:
    env = {"PROCFLOW_SMTP_URL": smtp_server.url, "PROCFLOW_SMTP_FROM": "Procflow <ops@acme.test>"}
    args = {"to": "ada@acme.test", "subject": "Welcome, Ada — día 1", "body": "Hello Ada\nçà va?"}
    result, ctx, _ = call("email", "send", args, env)
    assert result == {"id": message_id("run-s/send", domain="acme.test")}
    assert ctx.sent == ["ada@acme.test"]
    assert ctx.outbox == []
    ((mail_from, rcpt_tos, msg),) = smtp_server.mailbox.messages
    assert (mail_from, rcpt_tos) == ("ops@acme.test", ["ada@acme.test"])
    assert msg["Message-ID"] == result["id"]
    assert msg["From"] == "Procflow <ops@acme.test>"
    assert msg["To"] == "ada@acme.test"
    assert msg["Date"]
    assert msg.get_content_type() == "text/plain"
    assert msg["Subject"] == "Welcome, Ada — día 1"
    body = msg.get_content().replace("\r\n", "\n")  # CRLF on the wire
    assert body.rstrip("\n") == "Hello Ada\nçà va?"
    assert smtp_server.mailbox.logins == []


def test_email_send_logs_in_with_the_url_credentials(smtp_server: SmtpServer) -> None:
    env = {"PROCFLOW_SMTP_URL": smtp_server.with_login()}
    result, ctx, _ = call("email", "send", {"to": "a@acme.test", "subject": "s", "body": "b"}, env)
    assert smtp_server.mailbox.logins == [(SMTP_USER, SMTP_PASSWORD)]
    assert ctx.sent == ["a@acme.test"]
    assert result["id"] == message_id("run-s/send", domain="localhost")  # From: the default


def test_email_bad_credentials_are_non_retryable_and_not_echoed(smtp_server: SmtpServer) -> None:
    env = {"PROCFLOW_SMTP_URL": smtp_server.with_login(password="wrong-pass-3b8f")}
    with pytest.raises(SmtpFatalError) as info:
        call("email", "send", {"to": "a@acme.test", "subject": "s", "body": "b"}, env)
    assert "535" in str(info.value)
    assert (info.value.code, info.value.connector, info.value.action) == (535, "email", "send")
    assert "wrong-pass-3b8f" not in str(info.value)
    assert smtp_server.mailbox.messages == []


def test_email_several_recipients_and_a_partly_refused_list(smtp_server: SmtpServer) -> None:
    env = {"PROCFLOW_SMTP_URL": smtp_server.url}
    args = {
        "to": "Ada <ada@acme.test>, bob@refused.test, cy@acme.test",
        "subject": "s",
        "body": "b",
    }
    _, ctx, lines = call("email", "send", args, env)
    assert ctx.sent == ["ada@acme.test", "cy@acme.test"]  # sent: not retried (no duplicates)
    ((_, rcpt_tos, _),) = smtp_server.mailbox.messages
    assert rcpt_tos == ["ada@acme.test", "cy@acme.test"]
    assert any("bob@refused.test" in line and "550" in line for _, line in lines.lines)


@pytest.mark.parametrize(
    ("to", "error", "final"),
    [("x@refused.test", SmtpFatalError, True), ("x@later.test", SmtpError, False)],
)
def test_email_refused_recipient(
    smtp_server: SmtpServer, to: str, error: type[Exception], final: bool
) -> None:
    with pytest.raises(error, match="every recipient was refused") as info:
        call(
            "email",
            "send",
            {"to": to, "subject": "s", "body": "b"},
            {"PROCFLOW_SMTP_URL": smtp_server.url},
        )
    assert isinstance(info.value, NonRetryableError) is final
    assert isinstance(info.value, SmtpError) and info.value.code == (550 if final else 450)
    assert smtp_server.mailbox.messages == []


def test_email_unreachable_server_is_retryable() -> None:
    env = {"PROCFLOW_SMTP_URL": f"smtp://u:hidden-pw-1@127.0.0.1:{free_port()}"}
    with pytest.raises(SmtpError, match="cannot connect") as info:
        call("email", "send", {"to": "a@acme.test", "subject": "s", "body": "b"}, env)
    assert not isinstance(info.value, NonRetryableError)
    assert "hidden-pw-1" not in str(info.value)


# --- through a flow run ----------------------------------------------------------------------

FLOW = """\
flow: notify-hire
steps:
  - ask: { slack.post: { channel: "#sales-ops", text: "Approve Ada?" } }
  - mail: { email.send: { to: "ada@acme.test", subject: "Welcome", body: "Hello Ada" } }
output: { ts: "{{ ask.ts }}", channel: "{{ ask.channel }}", id: "{{ mail.id }}" }
"""

FAILING = """\
flow: notify-missing
steps:
  - ask:
      slack.post: { channel: "#missing", text: "x" }
      retry: { count: 3, every: 30s }
"""


def run_flow(tmp_path: Path, db_url: str, environ: dict[str, str], text: str) -> dict[str, Any]:
    path = tmp_path / "notify.flow.yaml"
    path.write_text(text)
    engine = Engine.virtual(db_url, environ=environ)
    try:
        (deployed,) = engine.deploy(str(path))
        run_id = engine.start_flow(deployed.name, {})
        engine.work(until_idle=True)
        shown = engine.show(run_id)
        shown["_outbox"] = engine.store.read().outbox()
        return shown
    finally:
        engine.close()


def messages(shown: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (h["type"], h["step"], h["to"])
        for h in shown["history"]
        if h["type"] in ("message.sent", "message.outboxed")
    ]


def test_flow_unconfigured_senders_keep_messages_in_the_outbox(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    shown = run_flow(tmp_path, db_url, dict(db_env), FLOW)
    assert shown["status"] == "completed", shown["error"]
    assert messages(shown) == [
        ("message.outboxed", "ask", "#sales-ops"),
        ("message.outboxed", "mail", "ada@acme.test"),
    ]
    outbox = [(o.channel, o.recipient, o.subject, o.body, o.step) for o in shown["_outbox"]]
    assert outbox == [
        ("slack", "#sales-ops", None, "Approve Ada?", "ask"),
        ("email", "ada@acme.test", "Welcome", "Hello Ada", "mail"),
    ]
    assert all(o.run_id == shown["id"] for o in shown["_outbox"])
    output = shown["output"]
    assert output["channel"] == "#sales-ops"
    assert output["ts"].startswith("outbox-")
    assert output["id"].startswith("<outbox-")


def test_flow_configured_senders_send_and_say_so(
    tmp_path: Path, db_url: str, db_env: dict[str, str], slack_api: str, smtp_server: SmtpServer
) -> None:
    environ = {**db_env, **slack_env(slack_api), "PROCFLOW_SMTP_URL": smtp_server.with_login()}
    shown = run_flow(tmp_path, db_url, environ, FLOW)
    assert shown["status"] == "completed", shown["error"]
    assert messages(shown) == [
        ("message.sent", "ask", "#sales-ops"),
        ("message.sent", "mail", "ada@acme.test"),
    ]
    assert shown["_outbox"] == []
    assert shown["output"]["channel"] == "C024BE91L"
    assert shown["output"]["id"] == smtp_server.mailbox.messages[0][2]["Message-ID"]
    assert SlackHandler.seen[-1]["json"] == {"channel": "#sales-ops", "text": "Approve Ada?"}
    assert TOKEN not in json.dumps(shown, default=str)
    assert SMTP_PASSWORD not in json.dumps(shown, default=str)


def test_flow_non_retryable_slack_error_fails_the_run_at_once(
    tmp_path: Path, db_url: str, db_env: dict[str, str], slack_api: str
) -> None:
    shown = run_flow(tmp_path, db_url, {**db_env, **slack_env(slack_api)}, FAILING)
    assert shown["status"] == "failed"
    assert shown["error"]["step"] == "ask"
    assert "[channel_not_found]" in shown["error"]["message"]
    types = [h["type"] for h in shown["history"]]
    assert "retry.scheduled" not in types
    assert types.count("attempt.failed") == 1
    assert "message.sent" not in types


# --- an intent's notify: the same sender, configured by the engine's environment -------------

CLAIMS = """\
name: claims
entities:
  - name: Claim
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
processes:
  - name: P
    trigger: { onCreate: Claim }
    steps:
      - name: tell
        kind: serviceTask
        args:
          notify: { to: boss@acme.test, subject: "Claim {id}", body: "About {title}." }
"""


def notify_claim(tmp_path: Path, db_url: str, environ: dict[str, str]) -> dict[str, Any]:
    path = tmp_path / "claims.intent"
    path.write_text(CLAIMS)
    engine = Engine.virtual(db_url, environ=environ)
    try:
        engine.deploy(str(path))
        record = engine.create_record("Claim", {"title": "lamp"})
        engine.work()
        (run,) = engine.runs_for_record("Claim", record["id"])
        shown = engine.show(run.id)
        shown["_outbox"] = engine.store.read().outbox()
        return shown
    finally:
        engine.close()


def test_notify_sends_through_the_url_in_the_engines_environment(
    tmp_path: Path,
    db_url: str,
    db_env: dict[str, str],
    smtp_server: SmtpServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PROCFLOW_SMTP_URL", raising=False)  # only the engine's mapping has it
    shown = notify_claim(tmp_path, db_url, {**db_env, "PROCFLOW_SMTP_URL": smtp_server.url})
    assert shown["status"] == "completed", shown["error"]
    assert messages(shown) == [("message.sent", "tell", "boss@acme.test")]
    assert shown["_outbox"] == []
    ((mail_from, rcpt_tos, msg),) = smtp_server.mailbox.messages
    assert (mail_from, rcpt_tos) == ("procflow@localhost", ["boss@acme.test"])  # email's default
    assert (msg["Subject"], msg.get_content().strip()) == ("Claim 1", "About lamp.")
    assert msg["Message-ID"].startswith("<procflow-") and msg["Message-ID"].endswith("@localhost>")


def test_notify_without_a_url_in_the_engines_environment_keeps_the_message(
    tmp_path: Path, db_url: str, db_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCFLOW_SMTP_URL", f"smtp://127.0.0.1:{free_port()}")  # not the engine's
    shown = notify_claim(tmp_path, db_url, dict(db_env))
    assert shown["status"] == "completed", shown["error"]
    assert messages(shown) == [("message.outboxed", "tell", "boss@acme.test")]
    outbox = [(o.channel, o.recipient, o.subject, o.body, o.step) for o in shown["_outbox"]]
    assert outbox == [("email", "boss@acme.test", "Claim 1", "About lamp.", "tell")]
