"""Connector manifests: every key checked, problems positioned in the manifest file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from procflow.model.connectors.manifest import load_manifest
from procflow.model.connectors.registry import ConnectorRegistry
from procflow.model.ir import ConnectorManifest
from procflow.model.source import Diagnostics

BUILTINS = ["email", "http", "log", "slack"]


def load(text: str, name: str | None = "crm") -> tuple[ConnectorManifest | None, list[str]]:
    diags = Diagnostics()
    manifest = load_manifest(
        "m.yaml", "project", diags, text=textwrap.dedent(text), expected_name=name
    )
    return manifest, [
        f"{d.pos.line}:{d.pos.col}: {d.severity}: {d.message}" for d in diags.sorted()
    ]


def case(id_: str, text: str, *expected: str) -> object:
    return pytest.param(text, list(expected), id=id_)


CASES = [
    case("not a mapping", "[1]\n", "1:1: error: manifest: a connector manifest must be a mapping"),
    case("no name", "actions: {}\n", "1:1: error: manifest: missing required key [connector]"),
    case(
        "name mismatch",
        "connector: crn\n",
        "1:12: error: manifest: connector [crn] is found as [crm]; the two names must be equal",
    ),
    case(
        "name not an identifier",
        "connector: my-crm\n",
        "1:12: error: manifest: connector [my-crm] is not an identifier",
    ),
    case(
        "unknown top key",
        "connector: crm\ndescripton: x\n",
        "2:1: error: manifest: unknown key [descripton]; did you mean [description]?",
    ),
    case(
        "config item keys and values",
        """\
        connector: crm
        config:
          key: { env: CRM KEY, secrt: true, required: maybe }
        """,
        "3:15: error: connector [crm] config [key]: env [CRM KEY] is not an environment variable",
        "3:24: error: connector [crm] config [key]: unknown key [secrt]; did you mean [secret]?",
        "3:47: error: connector [crm] config [key]: required must be true or false, got a string",
    ),
    case(
        "config default not a scalar",
        "connector: crm\nconfig:\n  url: { default: [a] }\n",
        "3:19: error: connector [crm] config [url]: default must be a single value, got a list",
    ),
    case(
        "config item not a mapping",
        "connector: crm\nconfig:\n  url: x\n",
        "3:8: error: connector [crm] config item [url]: its declaration must be a mapping",
    ),
    case(
        "action keys",
        "connector: crm\nactions:\n  put:\n    args: {}\n    reslt: {}\n",
        "5:5: error: connector [crm] action [put]: unknown key [reslt]; did you mean [result]?",
    ),
    case(
        "action name not an identifier",
        "connector: crm\nactions:\n  put-it: {}\n",
        "3:3: error: connector [crm]: a name in actions [put-it] is not an identifier",
    ),
    case(
        "schema field type unknown",
        "connector: crm\nactions:\n  get:\n    args: { id: { type: strin, required: true } }\n",
        "4:25: error: connector [crm] action [get] args [id]: unknown type [strin]; did you mean "
        "[string]? (one of string, integer, number, boolean, object, array, timestamp, any)",
    ),
    case(
        "schema field without type, unknown field key",
        "connector: crm\nactions:\n  get:\n    result: { id: { requird: true } }\n",
        "4:19: error: connector [crm] action [get] result [id]: missing required key [type]",
        "4:21: error: connector [crm] action [get] result [id]: unknown key [requird]; did you "
        "mean [required]?",
    ),
    case(
        "schema not a mapping",
        "connector: crm\nactions:\n  get:\n    args: [id]\n",
        "4:11: error: connector [crm] action [get]: args fields must be a mapping, got a list",
    ),
    case(
        "event keys",
        "connector: crm\nevents:\n  won:\n    payload: {}\n    corelate_on: [a]\n",
        "5:5: error: connector [crm] event [won]: unknown key [corelate_on]; did you mean "
        "[correlate_on]?",
    ),
    case(
        "correlate_on names no payload field",
        "connector: crm\nevents:\n  won:\n    payload: { deal: { type: object } }\n"
        "    correlate_on: [dael]\n",
        "5:20: error: connector [crm] event [won]: correlate_on [dael] does not name a payload "
        "field; did you mean [deal]?",
    ),
    case(
        "correlate_on path into a scalar",
        "connector: crm\nevents:\n  won:\n    payload: { owner: { type: string } }\n"
        "    correlate_on: [owner.id]\n",
        "5:20: error: connector [crm] event [won]: correlate_on [owner.id] is a path into [owner], "
        "which is a string, not an object",
    ),
    case(
        "correlate_on twice",
        "connector: crm\nevents:\n  won:\n    payload: { id: { type: string } }\n"
        "    correlate_on: [id, id]\n",
        "5:24: error: connector [crm] event [won]: correlate_on lists [id] twice",
    ),
    case(
        "correlate_on not a list of strings",
        "connector: crm\nevents:\n  won:\n    payload: { id: { type: string } }\n"
        "    correlate_on: [1]\n",
        "5:20: error: connector [crm] event [won]: each entry of correlate_on must be a string",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_manifest_errors(text: str, expected: list[str]) -> None:
    _, shown = load(text)
    missing = [e for e in expected if not any(e in s for s in shown)]
    extra = [s for s in shown if not any(e in s for e in expected)]
    assert not missing and not extra, f"missing: {missing}\nextra: {extra}\nall: {shown}"


def test_a_valid_manifest_becomes_ir() -> None:
    manifest, shown = load(
        """\
        connector: crm
        description: the CRM
        config:
          token: { env: CRM_TOKEN, secret: true, required: true }
          base:  { env: CRM_BASE, default: "https://crm", description: where }
        actions:
          get:
            args: { id: { type: string, required: true } }
            result: { name: { type: string }, tags: { type: array } }
          ping: {}
        events:
          won:
            payload: { deal: { type: object }, amount: { type: number, required: true } }
            correlate_on: [deal.id]
        """
    )
    assert shown == []
    assert manifest is not None and manifest.name == "crm" and manifest.source == "project"
    assert manifest.config["token"].secret and manifest.config["token"].required
    assert manifest.config["base"].default == "https://crm"
    get = manifest.actions["get"]
    assert get.args["id"].required and get.result is not None
    assert get.result["tags"].type == "array"
    assert manifest.actions["ping"].result is None  # not declared: paths into it are unchecked
    won = manifest.events["won"]
    assert won.correlate_on == ("deal.id",)
    assert won.payload["deal"].required  # a correlated field is required in every event


def test_unreadable_manifest_is_reported(tmp_path: Path) -> None:
    diags = Diagnostics()
    assert load_manifest(str(tmp_path / "missing.yaml"), "project", diags) is None
    assert "cannot read the connector manifest" in diags.items[0].message


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_manifests_load_clean(tmp_path: Path, name: str) -> None:
    registry = ConnectorRegistry(str(tmp_path))
    manifest = registry.get(name)
    assert manifest is not None and manifest.source == "builtin"
    assert registry.diagnostics == []


def test_builtin_manifests_match_the_spec(tmp_path: Path) -> None:
    registry = ConnectorRegistry(str(tmp_path))
    http, slack, email, log = (registry.get(n) for n in ("http", "slack", "email", "log"))
    assert http is not None and slack is not None and email is not None and log is not None
    request = http.actions["request"]
    assert list(request.args) == ["method", "url", "headers", "json", "body", "expect"]
    assert [n for n, f in request.args.items() if f.required] == ["url"]
    assert request.result is not None and list(request.result) == [
        "status",
        "headers",
        "json",
        "text",
    ]
    post = slack.actions["post"]
    assert [n for n, f in post.args.items() if f.required] == ["channel", "text"]
    assert set(post.args) == {"channel", "text", "blocks", "thread_ts"}
    assert post.result is not None and list(post.result) == ["ts", "channel"]
    approval = slack.events["approval"]
    assert list(approval.payload) == ["message", "approved", "user"]
    assert approval.correlate_on == ("message",)
    token = slack.config["token"]
    assert (token.env, token.secret, token.required) == ("SLACK_TOKEN", True, False)
    base = slack.config["base_url"]
    assert (base.env, base.default) == ("SLACK_BASE_URL", "https://slack.com/api")
    send = email.actions["send"]
    assert list(send.args) == ["to", "subject", "body"]
    assert send.result is not None and list(send.result) == ["id"]
    assert email.config["smtp_url"].env == "PROCFLOW_SMTP_URL"
    write = log.actions["write"]
    assert list(write.args) == ["message"] and write.result == {}
