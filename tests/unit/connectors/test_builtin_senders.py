"""``slack.post`` and ``email.send`` in outbox mode (unconfigured), and the SMTP URL parser."""

from __future__ import annotations

from typing import Any

import pytest

from procflow.connectors.builtin import email as email_connector
from procflow.connectors.builtin import slack as slack_connector
from procflow.connectors.builtin.email import SmtpTarget, parse_smtp_url
from procflow.errors import NonRetryableError
from procflow.model.connectors.registry import ConnectorRegistry
from procflow.runtime.interpret.actions import call_action, load_action, resolve_config
from procflow.runtime.interpret.context import KeptMessage, StepContext, step_logger


def make_ctx(key: str = "run-1/notify", config: dict[str, Any] | None = None) -> StepContext:
    log, _ = step_logger("run-1", "notify")
    return StepContext(
        run_id="run-1",
        step="notify",
        attempt=1,
        idempotency_key=key,
        project_dir=".",
        log=log,
        config=config or {},
    )


def builtin_config(name: str, environ: dict[str, str]) -> dict[str, Any]:
    manifest = ConnectorRegistry(".").get(name)
    assert manifest is not None
    return resolve_config(manifest, environ)


# --- slack.post ------------------------------------------------------------------------------


def test_slack_outbox_mode_keeps_the_message_and_mints_ids() -> None:
    ctx = make_ctx(config=builtin_config("slack", {}))
    result = slack_connector.post(ctx, channel="#sales-ops", text="Approve Acme?")
    assert result["channel"] == "#sales-ops"
    assert result["ts"].startswith("outbox-")
    assert len(result["ts"]) == len("outbox-") + 16
    assert ctx.outbox == [KeptMessage("slack", "#sales-ops", None, "Approve Acme?")]
    assert ctx.sent == []


def test_slack_outbox_ids_are_stable_per_step_execution() -> None:
    first = slack_connector.post(make_ctx("run-1/ask"), channel="#a", text="x")
    retried = slack_connector.post(make_ctx("run-1/ask"), channel="#a", text="x")
    other_step = slack_connector.post(make_ctx("run-1/nudge"), channel="#a", text="x")
    other_run = slack_connector.post(make_ctx("run-2/ask"), channel="#a", text="x")
    assert first == retried
    assert len({first["ts"], other_step["ts"], other_run["ts"]}) == 3


def test_slack_outbox_mode_through_the_action_loader() -> None:
    manifest = ConnectorRegistry(".").get("slack")
    assert manifest is not None
    fn = load_action(manifest, "post", ".")
    ctx = make_ctx(config=resolve_config(manifest, {"SLACK_BASE_URL": "http://127.0.0.1:9"}))
    args = {"channel": "C123", "text": "hi", "blocks": [{"type": "divider"}], "thread_ts": "1.2"}
    result = call_action(fn, ctx, args)
    assert result == {"ts": slack_connector.outbox_ts("run-1/notify"), "channel": "C123"}
    assert [(m.channel, m.recipient, m.body) for m in ctx.outbox] == [("slack", "C123", "hi")]


# --- email.send ------------------------------------------------------------------------------


def test_email_config_has_a_from_default() -> None:
    assert builtin_config("email", {}) == {"from": "procflow@localhost"}
    assert builtin_config(
        "email", {"PROCFLOW_SMTP_URL": "smtp://h:25", "PROCFLOW_SMTP_FROM": "ops@acme.test"}
    ) == {"smtp_url": "smtp://h:25", "from": "ops@acme.test"}


def test_email_outbox_mode_keeps_the_message_and_mints_an_id() -> None:
    ctx = make_ctx(config=builtin_config("email", {}))
    result = email_connector.send(ctx, to="ada@acme.test", subject="Welcome", body="Hello Ada")
    assert result["id"].startswith("<outbox-")
    assert result["id"].endswith("@procflow>")
    assert ctx.outbox == [KeptMessage("email", "ada@acme.test", "Welcome", "Hello Ada")]
    assert ctx.sent == []


def test_email_outbox_ids_are_stable_per_step_execution() -> None:
    def send(key: str) -> str:
        return str(email_connector.send(make_ctx(key), to="a@b.test", subject="s", body="b")["id"])

    assert send("run-1/mail") == send("run-1/mail")
    assert len({send("run-1/mail"), send("run-1/mail2"), send("run-2/mail")}) == 3


def test_slack_and_email_ids_differ_in_form() -> None:
    ctx = make_ctx("run-1/x")
    ts = slack_connector.post(ctx, channel="#a", text="t")["ts"]
    mid = email_connector.send(ctx, to="a@b.test", subject="s", body="b")["id"]
    assert ts != mid and ts[len("outbox-") :] in mid
    assert [m.channel for m in ctx.outbox] == ["slack", "email"]


# --- the SMTP URL ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("smtp://mail.acme.test:2525", SmtpTarget(False, "mail.acme.test", 2525)),
        ("smtp://mail.acme.test", SmtpTarget(False, "mail.acme.test", 25)),
        ("smtps://mail.acme.test", SmtpTarget(True, "mail.acme.test", 465)),
        (
            "smtp://bot%40acme.test:p%3Ass@127.0.0.1:587",
            SmtpTarget(False, "127.0.0.1", 587, "bot@acme.test", "p:ss"),
        ),
        ("SMTPS://u:@[::1]:465", SmtpTarget(True, "::1", 465, "u", "")),
    ],
)
def test_parse_smtp_url(url: str, target: SmtpTarget) -> None:
    assert parse_smtp_url(url) == target


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://u:hunter2@host:25", r"scheme is \[http\]"),
        ("mail.acme.test:25", "scheme"),
        ("smtp://u:hunter2@host:notaport", "port"),
        ("smtp://u:hunter2@:25", "no host"),
    ],
)
def test_parse_smtp_url_rejects_without_echoing_the_password(url: str, message: str) -> None:
    with pytest.raises(NonRetryableError, match=message) as info:
        parse_smtp_url(url)
    assert "hunter2" not in str(info.value)


def test_smtp_target_repr_hides_the_password() -> None:
    target = parse_smtp_url("smtp://bot:hunter2@mail.acme.test:587")
    assert "hunter2" not in repr(target)
    assert "bot:***@mail.acme.test:587" in repr(target)


@pytest.mark.parametrize(
    ("to", "subject"),
    [("not-an-address", "s"), ("", "s"), ("a@b.test", "two\nlines"), ("a@b.test\nBcc: x@y", "s")],
)
def test_email_unusable_args_are_non_retryable(to: str, subject: str) -> None:
    ctx = make_ctx(config={"smtp_url": "smtp://127.0.0.1:9", "from": "p@acme.test"})
    with pytest.raises(NonRetryableError):
        email_connector.send(ctx, to=to, subject=subject, body="b")
    assert ctx.sent == []
