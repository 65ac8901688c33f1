"""Connector action calls: config, loading, arg checks, sync/async calls, timeouts, results."""

from __future__ import annotations

import asyncio
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from procflow.connectors.builtin import log as log_connector
from procflow.errors import (
    ActionResultError,
    ActionTimeout,
    ConnectorConfigError,
    ConnectorError,
    ConnectorLoadError,
    NonRetryableError,
)
from procflow.model.connectors.registry import ConnectorRegistry
from procflow.model.ir import ActionSpec, ConfigItem, ConnectorManifest, SchemaField, SchemaType
from procflow.runtime.interpret.actions import call_action, check_args, load_action, resolve_config
from procflow.runtime.interpret.context import StepContext, StepLog, step_logger


def make_ctx(step: str = "notify", timeout: float | None = None) -> tuple[StepContext, StepLog]:
    log, lines = step_logger("run-1", step)
    ctx = StepContext(
        run_id="run-1",
        step=step,
        attempt=1,
        idempotency_key="run-1:notify:1",
        project_dir=".",
        log=log,
        timeout=timeout,
    )
    return ctx, lines


def manifest(
    *,
    config: dict[str, ConfigItem] | None = None,
    args: dict[str, tuple[SchemaType, bool]] | None = None,
    source: Any = "builtin",
    module: str | None = None,
) -> ConnectorManifest:
    fields = {n: SchemaField(n, t, r) for n, (t, r) in (args or {}).items()}
    return ConnectorManifest(
        name="crm",
        source=source,
        config=config or {},
        actions={"post": ActionSpec("post", fields)},
        module=module,
    )


# --- config ----------------------------------------------------------------------------------


def test_config_env_default_and_secret_values() -> None:
    m = manifest(
        config={
            "token": ConfigItem("token", env="CRM_TOKEN", secret=True, required=True),
            "base_url": ConfigItem("base_url", env="CRM_URL", default="https://crm.example"),
            "region": ConfigItem("region", env="CRM_REGION"),
            "fixed": ConfigItem("fixed", default=3),
        }
    )
    config = resolve_config(m, {"CRM_TOKEN": "s3cret-token"})
    assert config == {"token": "s3cret-token", "base_url": "https://crm.example", "fixed": 3}
    config = resolve_config(m, {"CRM_TOKEN": "t0ken", "CRM_URL": "http://local", "CRM_REGION": ""})
    assert config == {"token": "t0ken", "base_url": "http://local", "fixed": 3}


def test_config_missing_required_names_the_env_variable() -> None:
    m = manifest(config={"token": ConfigItem("token", env="CRM_TOKEN", required=True)})
    with pytest.raises(ConnectorConfigError, match=r"config \[token\].*CRM_TOKEN") as info:
        resolve_config(m, {})
    assert (info.value.connector, info.value.item, info.value.env) == ("crm", "token", "CRM_TOKEN")
    assert isinstance(info.value, ConnectorError)
    with pytest.raises(ConnectorConfigError, match="CRM_TOKEN"):
        resolve_config(m, {"CRM_TOKEN": ""})


def test_config_of_builtin_slack_has_outbox_defaults() -> None:
    slack = ConnectorRegistry(".").get("slack")
    assert slack is not None
    assert resolve_config(slack, {}) == {"base_url": "https://slack.com/api"}


# --- args ------------------------------------------------------------------------------------

ARGS: dict[str, tuple[SchemaType, bool]] = {
    "s": ("string", True),
    "i": ("integer", False),
    "n": ("number", False),
    "b": ("boolean", False),
    "o": ("object", False),
    "a": ("array", False),
    "t": ("timestamp", False),
    "x": ("any", False),
}


def test_check_args_accepts_matching_types() -> None:
    check_args(
        manifest(args=ARGS),
        "post",
        {
            "s": "hi",
            "i": 3,
            "n": 2.5,
            "b": False,
            "o": {"k": 1},
            "a": [1, 2],
            "t": "2025-01-02T03:04:05Z",
            "x": object(),
        },
    )
    check_args(manifest(args=ARGS), "post", {"s": "hi", "n": 7, "i": None})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("s", 5),
        ("i", "3"),
        ("i", True),
        ("i", 1.5),
        ("n", "1.5"),
        ("b", "true"),
        ("o", [1]),
        ("a", {"k": 1}),
        ("t", "tomorrow"),
    ],
)
def test_check_args_wrong_type_is_non_retryable_naming_the_arg(name: str, value: Any) -> None:
    args = {"s": "ok", name: value}
    with pytest.raises(NonRetryableError, match=rf"arg \[{name}\]"):
        check_args(manifest(args=ARGS), "post", args)


def test_check_args_missing_required_and_unknown() -> None:
    with pytest.raises(NonRetryableError, match=r"arg \[s\] is required"):
        check_args(manifest(args=ARGS), "post", {"i": 1})
    with pytest.raises(NonRetryableError, match=r"no arg \[zz\]"):
        check_args(manifest(args=ARGS), "post", {"s": "x", "zz": 1})


# --- loading ---------------------------------------------------------------------------------


def test_load_builtin_actions() -> None:
    registry = ConnectorRegistry(".")
    log_m, http_m = registry.get("log"), registry.get("http")
    assert log_m is not None and http_m is not None
    assert load_action(log_m, "write", ".") is log_connector.write
    from procflow.connectors.builtin import http as http_connector

    assert load_action(http_m, "request", ".") is http_connector.request


def test_load_project_connector_from_its_namespace(tmp_path: Path) -> None:
    folder = tmp_path / "connectors" / "crm"
    folder.mkdir(parents=True)
    (folder / "manifest.yaml").write_text(
        textwrap.dedent(
            """\
            connector: crm
            actions:
              post: { args: { text: { type: string } } }
              missing: {}
            """
        )
    )
    (folder / "__init__.py").write_text(
        "def post(ctx, text):\n    return {'echo': text, 'key': ctx.idempotency_key}\n"
    )
    m = ConnectorRegistry(str(tmp_path)).get("crm")
    assert m is not None and m.source == "project"
    fn = load_action(m, "post", str(tmp_path))
    assert fn.__module__.startswith("procflow_project_")
    assert fn.__module__.endswith(".connectors.crm")
    ctx, _ = make_ctx()
    assert call_action(fn, ctx, {"text": "hi"}) == {"echo": "hi", "key": "run-1:notify:1"}
    with pytest.raises(ConnectorLoadError, match=r"missing"):
        load_action(m, "missing", str(tmp_path))
    with pytest.raises(ConnectorLoadError, match=r"declares no action \[nope\]") as info:
        load_action(m, "nope", str(tmp_path))
    assert (info.value.connector, info.value.action) == ("crm", "nope")


def test_load_entrypoint_module_and_missing_function() -> None:
    m = manifest(source="entrypoint", module="procflow.connectors.builtin.log")
    with pytest.raises(ConnectorLoadError, match=r"has no function named \[post\]"):
        load_action(m, "post", ".")
    broken = manifest(source="entrypoint", module="procflow_no_such_module_xyz")
    with pytest.raises(ConnectorLoadError, match="cannot import"):
        load_action(broken, "post", ".")
    nameless = manifest(source="entrypoint")
    with pytest.raises(ConnectorLoadError, match=r"^action \[crm\.post\]: the connector names no"):
        load_action(nameless, "post", ".")
    not_callable = ConnectorManifest(
        name="crm",
        source="entrypoint",
        actions={"METHODS": ActionSpec("METHODS", {})},  # a tuple in that module
        module="procflow.connectors.builtin.http",
    )
    with pytest.raises(ConnectorLoadError, match=r"\[METHODS\] is not a function") as info:
        load_action(not_callable, "METHODS", ".")
    assert (info.value.connector, info.value.action) == ("crm", "METHODS")


# --- calling ---------------------------------------------------------------------------------


def test_sync_action_gets_ctx_and_args() -> None:
    seen: dict[str, Any] = {}

    def post(ctx: StepContext, text: str, n: int = 0) -> dict[str, Any]:
        seen.update(step=ctx.step, config=dict(ctx.config), thread=threading.current_thread())
        return {"text": text, "n": n, "nested": {"a": [1, 2.5, None, True]}}

    ctx, _ = make_ctx()
    ctx.config = {"token": "secret-value"}
    assert call_action(post, ctx, {"text": "hi", "n": 2}) == {
        "text": "hi",
        "n": 2,
        "nested": {"a": [1, 2.5, None, True]},
    }
    assert seen["config"] == {"token": "secret-value"}
    assert seen["thread"] is threading.current_thread()


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_async_action(timeout: float | None) -> None:
    async def post(ctx: StepContext, text: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"text": text.upper(), "attempt": ctx.attempt, "timeout": ctx.timeout}

    ctx, _ = make_ctx(timeout=timeout)
    assert call_action(post, ctx, {"text": "hi"}) == {
        "text": "HI",
        "attempt": 1,
        "timeout": timeout,
    }


def test_none_result_is_empty_mapping() -> None:
    ctx, _ = make_ctx()
    assert call_action(lambda ctx: None, ctx, {}) == {}
    ctx.timeout = 1.0
    assert call_action(lambda ctx: None, ctx, {}) == {}


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ([1, 2], "type list"),
        ("text", "type str"),
        (42, "type int"),
        ({"when": object()}, r"result\.when is a value of type object"),
        ({1: "x"}, "key that is a value of type int"),
        ({"x": float("nan")}, "nan"),
    ],
)
def test_non_json_results_are_errors_naming_the_type(result: Any, message: str) -> None:
    ctx, _ = make_ctx()
    with pytest.raises(ActionResultError, match=message) as info:
        call_action(lambda ctx: result, ctx, {})
    assert info.value.step == "notify"


def test_timeout_stops_waiting_and_discards_late_result() -> None:
    release = threading.Event()
    finished = threading.Event()

    def slow(ctx: StepContext) -> dict[str, Any]:
        release.wait(5)
        finished.set()
        return {"late": True}

    ctx, _ = make_ctx(timeout=0.2)
    started = time.monotonic()
    with pytest.raises(ActionTimeout, match=r"the attempt ran longer than 0\.2s") as info:
        call_action(slow, ctx, {})
    assert (info.value.seconds, info.value.step) == (0.2, "notify")
    assert time.monotonic() - started < 2
    release.set()
    assert finished.wait(5)


def test_timeout_message_whole_seconds() -> None:
    def slow(ctx: StepContext) -> None:
        time.sleep(0.3)

    ctx, _ = make_ctx(timeout=0.05)
    with pytest.raises(ActionTimeout) as info:
        call_action(slow, ctx, {})
    assert str(info.value) == "the attempt ran longer than 0.05s"
    assert f"{30.0:g}s" == "30s"


def test_async_timeout() -> None:
    async def slow(ctx: StepContext) -> None:
        await asyncio.sleep(2)

    ctx, _ = make_ctx(timeout=0.1)
    with pytest.raises(ActionTimeout):
        call_action(slow, ctx, {})


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_exceptions_pass_through(timeout: float | None) -> None:
    def fails(ctx: StepContext) -> None:
        raise NonRetryableError("account closed")

    def boom(ctx: StepContext) -> None:
        raise ValueError("boom")

    async def afails(ctx: StepContext) -> None:
        raise NonRetryableError("async closed")

    ctx, _ = make_ctx(timeout=timeout)
    with pytest.raises(NonRetryableError, match="account closed"):
        call_action(fails, ctx, {})
    with pytest.raises(ValueError, match="boom"):
        call_action(boom, ctx, {})
    with pytest.raises(NonRetryableError, match="async closed"):
        call_action(afails, ctx, {})


# --- log.write -------------------------------------------------------------------------------


def test_log_write_goes_to_step_log() -> None:
    m = ConnectorRegistry(".").get("log")
    assert m is not None
    fn = load_action(m, "write", ".")
    ctx, lines = make_ctx(timeout=1.0)
    args = {"message": "100% done for %s"}
    check_args(m, "write", args)
    assert call_action(fn, ctx, args) == {}
    assert lines.lines == [("info", "100% done for %s")]
    with pytest.raises(NonRetryableError, match=r"arg \[message\]"):
        check_args(m, "write", {"message": 5})
