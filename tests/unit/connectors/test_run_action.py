"""One attempt of an action (``run_action``) and procflow's own mail (``send_email``): every
failure becomes the outcome, everything kept is masked, kept messages carry their step."""

from __future__ import annotations

import socket
import textwrap
import time
from pathlib import Path
from typing import Any

from procflow.errors import NonRetryableError
from procflow.model.ir import ActionSpec, ConfigItem, ConnectorManifest, SchemaField
from procflow.runtime.interpret.actions import Caller, run_action, send_email
from procflow.runtime.interpret.context import KeptMessage, StepContext
from procflow.runtime.transition import OutboxMessage
from procflow.testing import fake_action

TOKEN = "crm-token-5e1d9a"
CALLER = Caller("run-1", "post", 2, "run-1/post", ".")


def crm() -> ConnectorManifest:
    return ConnectorManifest(
        name="crm",
        source="entrypoint",
        config={"token": ConfigItem("token", env="CRM_TOKEN", secret=True, required=True)},
        actions={"post": ActionSpec("post", {"text": SchemaField("text", "string", True)})},
        module="crm_connector_not_installed",  # every test fakes crm.post
    )


def run_fake(fn: Any, args: dict[str, Any] | None = None, **kw: Any) -> Any:
    with fake_action("crm.post", fn):
        return run_action(
            crm(), "post", args or {"text": "hi"}, CALLER, environ={"CRM_TOKEN": TOKEN}, **kw
        )


def test_the_action_sees_the_attempt_and_its_result_is_kept() -> None:
    seen: dict[str, Any] = {}

    def post(ctx: StepContext, text: str) -> dict[str, Any]:
        seen.update(
            ids=(ctx.run_id, ctx.step, ctx.attempt, ctx.idempotency_key, ctx.project_dir),
            config=dict(ctx.config), timeout=ctx.timeout, args=dict(ctx.args),
        )  # fmt: skip
        ctx.log.info("posting %s", text)
        ctx.sent.append("#crm")
        return {"echo": text}

    out = run_fake(post, timeout=5.0)
    assert (out.result, out.error, out.final) == ({"echo": "hi"}, None, False)
    assert seen == {
        "ids": ("run-1", "post", 2, "run-1/post", "."),
        "config": {"token": TOKEN},
        "timeout": 5.0,
        "args": {"text": "hi"},
    }
    assert out.logs == [("info", "posting hi")]
    assert out.sent == ["#crm"]


def test_secret_config_and_hidden_values_are_masked_everywhere() -> None:
    def post(ctx: StepContext, text: str) -> dict[str, Any]:
        ctx.log.warning("token %s, password %s", ctx.config["token"], "hunter2-pw")
        ctx.outbox.append(KeptMessage("crm", "ops", f"about {TOKEN}", "hunter2-pw"))
        return {"token": ctx.config["token"], "nested": ["hunter2-pw"]}

    out = run_fake(post, hide=["hunter2-pw"])
    assert out.result == {"token": "***", "nested": ["***"]}
    assert out.logs == [("warning", "token ***, password ***")]
    assert out.outbox == [OutboxMessage("crm", "ops", "about ***", "***", "post")]
    assert out.masker.mask(TOKEN) == "***"

    def fails(ctx: StepContext, text: str) -> None:
        raise RuntimeError(f"refused {ctx.config['token']}")

    assert run_fake(fails).error == "refused ***"


def test_failures_become_the_outcome() -> None:
    def final(ctx: StepContext, text: str) -> None:
        raise NonRetryableError("account closed")

    def boom(ctx: StepContext, text: str) -> None:
        raise ValueError

    def slow(ctx: StepContext, text: str) -> None:
        time.sleep(1)

    out = run_fake(final)
    assert (out.error, out.final, out.kind) == ("account closed", True, "action")
    out = run_fake(boom)
    assert (out.error, out.final, out.kind) == ("ValueError", False, "action")
    out = run_fake(slow, timeout=0.05)
    assert (out.error, out.final, out.kind) == (
        "the attempt ran longer than 0.05s",
        False,
        "timeout",
    )
    out = run_fake(boom, args={"text": 5})  # never called: the arg's type is wrong
    assert out.final and out.error is not None and "arg [text]" in out.error


def test_a_missing_required_config_fails_the_attempt_naming_the_variable() -> None:
    out = run_action(crm(), "post", {"text": "hi"}, CALLER, environ={})
    assert out.error is not None and "CRM_TOKEN" in out.error
    assert not out.final  # the environment may be fixed before the next attempt


def test_a_kept_message_that_is_not_a_kept_message_fails_the_attempt() -> None:
    def post(ctx: StepContext, text: str) -> None:
        ctx.outbox.append({"to": "ops"})  # type: ignore[arg-type]

    out = run_fake(post)
    assert out.error == (
        "step [post]: ctx.outbox holds a value of type dict; "
        "a connector keeps a message with ctx.outbox.append(KeptMessage(...))"
    )
    assert out.outbox == []


# --- procflow's own mail (notify) -------------------------------------------------------------

MAIL = ("ada@acme.test", "Welcome", "Hello Ada")


def test_send_email_without_a_url_keeps_the_message_in_the_outbox() -> None:
    for environ in ({}, {"PROCFLOW_SMTP_URL": ""}):
        out = send_email(CALLER, MAIL, environ=environ)
        assert out.error is None
        assert out.outbox == [OutboxMessage("email", *MAIL, "post")]
        assert out.sent == []
        assert out.result is not None and out.result["id"].startswith("<outbox-")


def test_send_email_masks_hidden_values_in_what_it_keeps() -> None:
    out = send_email(
        CALLER, ("a@b.test", "s3cret-var-value", "x"), environ={}, hide=["s3cret-var-value"]
    )
    assert [m.subject for m in out.outbox] == ["***"]


def test_send_email_failure_is_retryable_and_hides_the_password() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    environ = {"PROCFLOW_SMTP_URL": f"smtp://bot:pw-9f3a1c@127.0.0.1:{port}"}
    out = send_email(CALLER, MAIL, environ=environ)
    assert out.error is not None and "cannot connect" in out.error
    assert "pw-9f3a1c" not in out.error
    assert not out.final
    assert out.outbox == []  # a failure never falls back to the outbox


def test_send_email_uses_the_built_in_even_if_the_project_declares_email(tmp_path: Path) -> None:
    folder = tmp_path / "connectors" / "email"
    folder.mkdir(parents=True)
    (folder / "manifest.yaml").write_text(
        textwrap.dedent(
            """\
            connector: email
            actions:
              send: { args: { to: { type: string } } }
            """
        )
    )
    (folder / "__init__.py").write_text("def send(ctx, **args):\n    raise RuntimeError('no')\n")
    caller = Caller("run-1", "tell", 1, "run-1/tell#1", str(tmp_path))
    out = send_email(caller, MAIL, environ={})
    assert out.error is None
    assert out.outbox == [OutboxMessage("email", *MAIL, "tell")]


def test_a_faked_email_send_receives_procflows_own_mail() -> None:
    got: list[tuple[str, str, str]] = []

    def fake(ctx: StepContext, to: str, subject: str, body: str) -> dict[str, Any]:
        got.append((to, subject, body))
        return {"id": "<fake@test>"}

    with fake_action("email.send", fake):
        out = send_email(CALLER, MAIL, environ={})
    assert got == [MAIL]
    assert out.result == {"id": "<fake@test>"}
