"""Fuzzing every route of ``/openapi.json`` through a TestClient, on both store backends.

Each operation the document lists gets generated requests: path values (known names and ids,
and anything), query parameters (declared and not), headers (content types, tokens good and bad,
Idempotency-Key, CloudEvents and webhook headers) and bodies (random JSON, bodies shaped like the
operation's schema with random values, random bytes, nesting thousands deep, one byte over the
limit). Whatever comes in:

- never a 5xx (the store is up throughout; 503 is for a store that is down, not tested here);
- every 4xx is an ``application/problem+json`` document whose ``status`` is the status;
- a request answered with an error, or any GET, leaves every table of the store as it was.

``PROCFLOW_FUZZ_EXAMPLES`` (default 300) is the number of requests per backend, spread over the
operations (at least 5 each); the number sent is printed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fuzz_project import INTENT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serving import ADMIN_TOKEN, OPS_TOKEN, PLAIN_TOKEN, TOKENS, MakeClient
from starlette.testclient import TestClient
from store_dump import dump

from procflow.runtime.engine import Engine
from procflow.server.problems import PROBLEM_TYPE
from procflow.server.routing import MAX_BODY

EXAMPLES = int(os.environ.get("PROCFLOW_FUZZ_EXAMPLES", "300"))
MIN_PER_OPERATION = 5

FLOW = """\
flow: greet
inputs:
  who: { type: string, required: true }
  extra: { type: object }
steps:
  - answer:
      wait_for: slack.approval
      match: { message: "{{ who }}" }
      timeout: 24h
"""

TICK = """\
flow: tick
trigger:
  schedule: { every: 1h }
steps:
  - hold: { wait: { for: 1d } }
"""

Dump = dict[str, list[tuple[Any, ...]]]


def changes(before: Dump, after: Dump) -> list[str]:
    return [t for t in sorted(set(before) | set(after)) if before.get(t) != after.get(t)]


def seed(url: str, folder: Path) -> list[str]:
    """Deploy a flow, a scheduled flow and an intent, start runs, open tasks, create a record:
    so that known names and ids lead the fuzzer past 404 into the routes' real work. Returns
    those values."""
    (folder / "shop.intent").write_text(INTENT, encoding="utf-8")
    (folder / "greet.flow.yaml").write_text(FLOW, encoding="utf-8")
    (folder / "tick.flow.yaml").write_text(TICK, encoding="utf-8")
    engine = Engine(url, create=False)
    try:
        engine.deploy(str(folder / "shop.intent"))
        engine.deploy(str(folder / "greet.flow.yaml"))
        engine.deploy(str(folder / "tick.flow.yaml"))
        runs = [engine.start_flow("greet", {"who": w}) for w in ("ada", "bob")]
        record = engine.create_record("Order", {"title": "first", "total": 3})
        engine.work(until_idle=True)
        tasks = [str(t["id"]) for t in engine.list_tasks()]
    finally:
        engine.close()
    return [*runs, *tasks, str(record["id"]), "greet", "shop", "Approve", "Manual", "Order", "tick"]


# --- the strategies ---------------------------------------------------------------------------

_PRINTABLE = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
header_text = st.text(_PRINTABLE, max_size=40)
leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_value = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
depths = st.sampled_from([100, 500, 900, 990, 2_000, 100_000])


def deep(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"d": value}
    return value


def dumps(value: Any) -> bytes:
    try:
        return json.dumps(value).encode()
    except (RecursionError, ValueError):  # deeper than json.dumps goes: write it by hand
        return b"[" * 100_000 + b"]" * 100_000


def shaped(operation: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Objects with the keys the operation's JSON body declares (nested one level), each with a
    random, or very deep, value; or the declared keys' values from the seeds."""
    content = operation.get("requestBody", {}).get("content", {})
    schemas = [media["schema"] for media in content.values() if "schema" in media]
    keys = sorted({k for s in schemas for k in s.get("properties", {})}) or ["type", "data"]
    value = json_value | depths.map(deep) | st.sampled_from(["ada", "greet", "Order", 1])
    return st.fixed_dictionaries({}, optional={k: value for k in keys})


def bodies(operation: dict[str, Any]) -> st.SearchStrategy[bytes | None]:
    return st.one_of(
        st.none(),
        json_value.map(dumps),
        shaped(operation).map(dumps),
        shaped(operation).map(dumps),
        st.binary(max_size=300),
        depths.map(lambda d: b"[" * d + b"]" * d),
        depths.map(lambda d: dumps({"type": "slack.approval", "data": deep(d)})),
        st.just(b"x" * (MAX_BODY + 1)),
        st.text(max_size=200).map(str.encode),  # e.g. YAML-ish text for POST /definitions
    )


def content_types(operation: dict[str, Any]) -> st.SearchStrategy[str | None]:
    """Mostly what the operation takes (so bodies reach its own checks), else anything."""
    declared = list(operation.get("requestBody", {}).get("content", {})) or ["application/json"]
    others = st.sampled_from(
        [
            "application/json",
            "application/json; charset=latin-1",
            "application/cloudevents+json",
            "application/cloudevents-batch+json",
            "application/x-www-form-urlencoded",
            "application/yaml",
            "text/plain",
            "multipart/form-data; boundary=x",
            "image/png",
            "nonsense",
            None,
        ]
    )
    return st.sampled_from(declared) | st.sampled_from(declared) | others | header_text


AUTHORIZATIONS = [  # mostly the administrator, so most requests reach the route's own work
    *[f"Bearer {ADMIN_TOKEN}"] * 20,
    f"Bearer {OPS_TOKEN}",
    f"Bearer {PLAIN_TOKEN}",
    None,
    "Bearer",
    "Bearer " + "x" * 30,
    "Basic YWRhOmFkbWlu",
    "Bearer " + ADMIN_TOKEN[:-1],
    "Bearer " + "y" * 5_000,
]
EXTRA_HEADERS = [
    "Idempotency-Key",
    "ce-type",
    "ce-id",
    "ce-specversion",
    "ce-source",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "X-Slack-Request-Timestamp",
    "X-Slack-Signature",
    "traceparent",
    "Accept",
]


@st.composite
def headers(draw: st.DrawFn, operation: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    authorization = draw(st.sampled_from(AUTHORIZATIONS))
    if authorization is not None:
        out["Authorization"] = authorization
    content_type = draw(content_types(operation))
    if content_type is not None:
        out["Content-Type"] = content_type
    value = header_text | st.sampled_from(["1.0", "slack.approval", "v1,AAAA", "0", "9" * 30])
    extra = draw(st.dictionaries(st.sampled_from(EXTRA_HEADERS), value, max_size=4))
    return {**out, **extra}


def path_values(known: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(known),
        st.sampled_from(known),
        st.text(max_size=30),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.sampled_from(["..", ".", "%00", "0", "-1", "x" * 2_000, "a/b", "\u0000", " "]),
    )


def query_values() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=20),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.sampled_from(["", "0", "-1", "1", "50", "500", "501", "waiting", "zz", "\u0000"]),
    )


@st.composite
def requests(
    draw: st.DrawFn, path: str, operation: dict[str, Any], known: list[str]
) -> tuple[str, dict[str, str], dict[str, str], bytes | None]:
    url = path
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "path":
            value = draw(path_values(known))
            url = url.replace("{" + parameter["name"] + "}", quote(value, safe=""))
    declared = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
    names = st.sampled_from(declared) | st.text(max_size=10) if declared else st.text(max_size=10)
    query = draw(st.dictionaries(names, query_values(), max_size=4))
    return url, query, draw(headers(operation)), draw(bodies(operation))


# --- the test ---------------------------------------------------------------------------------


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, item in document["paths"].items()
        for method, op in item.items()
    ]


class Fuzzer:
    """Sends requests and checks each answer and the store after it."""

    def __init__(self, client: TestClient, url: str) -> None:
        self.client = client
        self.url = url
        self.sent = 0
        self.statuses: dict[int, int] = {}
        self.store = dump(url)

    def send(
        self,
        method: str,
        target: str,
        query: dict[str, str],
        head: dict[str, str],
        body: bytes | None,
    ) -> None:
        # Not following redirects: a path that collapses to "/" (``/definitions/..``) is
        # answered by the redirect to the web UI, whose pages are HTML, not the API's problems.
        answer = self.client.request(
            method, target, params=query, headers=head, content=body, follow_redirects=False
        )
        self.sent += 1
        status = answer.status_code
        self.statuses[status] = self.statuses.get(status, 0) + 1
        where = f"{method} {target} {query} {head} body={(body or b'')[:200]!r}"
        assert status < 500, f"{where}: {status} {answer.text[:500]}"
        assert "Traceback" not in answer.text, where
        if status >= 400:
            self.check_problem(answer.headers.get("content-type"), answer.content, status, where)
        after = dump(self.url)
        if status >= 400 or method == "GET":
            changed = changes(self.store, after)
            assert not changed, f"{where}: answered {status}, yet changed {changed}"
        self.store = after

    @staticmethod
    def check_problem(media: str | None, content: bytes, status: int, where: str) -> None:
        assert media == PROBLEM_TYPE, f"{where}: {status} as {media}: {content[:300]!r}"
        problem = json.loads(content)
        assert problem["status"] == status, where
        assert {"type", "title", "detail"} <= problem.keys(), where


def test_every_route_survives_generated_requests(
    make_client: MakeClient,
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    known = seed(db_url, tmp_path)
    client = make_client(
        environ={
            "PROCFLOW_API_TOKENS": TOKENS,
            "PROCFLOW_WEBHOOK_SECRET": "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQ=",
            "SLACK_SIGNING_SECRET": "slack-signing-secret",
        }
    )
    document = client.get("/openapi.json", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    found = operations(document.json())
    fuzzer = Fuzzer(client, db_url)
    per_operation = max(MIN_PER_OPERATION, EXAMPLES // len(found))
    for method, path, operation in found:
        fuzz_one(fuzzer, method, path, operation, known, per_operation)
    fuzz_methods(fuzzer, [path for _, path, _ in found], per_operation)
    with capsys.disabled():
        shown = ", ".join(f"{s}: {n}" for s, n in sorted(fuzzer.statuses.items()))
        print(f"\nfuzz: {fuzzer.sent} requests over {len(found)} operations ({shown})")
    assert fuzzer.sent >= len(found) * MIN_PER_OPERATION


def fuzz_one(
    fuzzer: Fuzzer, method: str, path: str, operation: dict[str, Any], known: list[str], n: int
) -> None:
    @settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(request=requests(path, operation, known))
    def check(request: tuple[str, dict[str, str], dict[str, str], bytes | None]) -> None:
        target, query, head, body = request
        fuzzer.send(method, target, query, head, body)

    check()


def fuzz_methods(fuzzer: Fuzzer, paths: list[str], n: int) -> None:
    """Methods a path does not take (and odd ones): a problem document, nothing changed."""

    @settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]),
        path=st.sampled_from(sorted(set(paths)))
        | st.text(max_size=20).map(lambda t: "/" + quote(t)),
    )
    def check(method: str, path: str) -> None:
        target = path.replace("{", "%7B").replace("}", "%7D")
        head = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
        fuzzer.send(method, target, {}, head, b"{}" if method in ("POST", "PUT", "PATCH") else None)

    check()
