"""The views of calls on every face (docs/reference/calls.md, "Views"), on both store backends:
``parent`` and ``children`` in ``runs show``, why-waiting down a chain of calls, the runs a run
called (``runs list --parent``, ``GET /runs?parent=``), the run page's links both ways, the diagram
of a call step, and ``procflow_calls_total``.

The chain: ``top`` starts ``grand`` detached at step ``side``, then calls ``child`` at ``sub``
(timeout 2h); ``child`` calls ``grand`` at ``deeper``; ``grand`` waits an hour at ``pause``.
Time is the virtual clock (2027-01-01T00:00:00Z at the start).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

import procflow
from procflow.cli import _run
from procflow.errors import UsageError
from procflow.graph import render, to_svg
from procflow.model.ir import Flow
from procflow.runtime.engine import Engine
from procflow.runtime.operations import views
from procflow.runtime.operations.views import why_line
from procflow.server.app import create_app
from procflow.server.diagrams import DiagramCache
from procflow.server.metrics import ProcessMetrics
from procflow.server.state import ServerState

FLOWS = {
    "grand": """\
flow: grand
steps:
  - pause:
      wait: { for: 1h }
output: "{{ pause.until }}"
""",
    "child": """\
flow: child
steps:
  - deeper: { call: grand }
output: "{{ deeper.output }}"
""",
    "top": """\
flow: top
steps:
  - side: { call: grand, detach: true }
  - sub: { call: child, timeout: 2h }
""",
    "breaker": """\
flow: breaker
steps:
  - boom: { fail: "broken on purpose" }
""",
    # Each call ends another way: completed, failed, timed out, cancelled by hand.
    "metered": """\
flow: metered
steps:
  - ok: { call: grand }
  - bad: { call: breaker, optional: true }
  - slow: { call: grand, timeout: 30m, optional: true }
  - cut: { call: grand, optional: true }
""",
}

UNKNOWN = "0" * 32  # a run id no run has
BAD_PARENT = "parent must be a run's id (32 hexadecimal digits), not [nope]"


@dataclass
class Chain:
    engine: Engine
    db_url: str
    top: str
    side: str  # top's detached grand
    child: str
    grand: str  # child's grand

    def show(self, run_id: str) -> dict[str, Any]:
        return self.engine.show(run_id, 0)


def deploy(engine: Engine, folder: Path, *names: str) -> None:
    folder.mkdir(exist_ok=True)
    for name in names:
        path = folder / f"{name}.flow.yaml"
        path.write_text(FLOWS[name])
        engine.deploy(str(path))


@pytest.fixture
def chain(db_url: str, db_env: dict[str, str], tmp_path: Path) -> Iterator[Chain]:
    engine = Engine.virtual(db_url, environ=db_env)
    try:
        deploy(engine, tmp_path / "flows", "grand", "child", "top")
        top = engine.start_flow("top", {})
        engine.work()
        side, child = (c["run_id"] for c in engine.show(top, 0)["children"])
        grand = engine.show(child, 0)["children"][0]["run_id"]
        yield Chain(engine, db_url, top, side, child, grand)
    finally:
        engine.close()


def why_lines(shown: dict[str, Any]) -> list[str]:
    return [
        why_line(t.get("path") or t["step"], t["waiting_for"])
        for t in shown["tokens"]
        if t.get("waiting_for")
    ]


def chain_why(c: Chain) -> str:
    return (
        f"sub: waiting for run {c.child} (flow child) to end (timeout 2027-01-01T02:00:00Z); "
        f"deeper: waiting for run {c.grand} (flow grand) to end; "
        "pause: timer due 2027-01-01T01:00:00Z"
    )


# --- runs show, from each level ---------------------------------------------------------------


def test_show_names_the_parent_and_the_children_at_each_level(chain: Chain) -> None:
    c = chain
    top = c.show(c.top)
    assert top["parent"] is None
    assert top["children"] == [  # oldest first: the detached one started first
        {"run_id": c.side, "flow": "grand", "status": "waiting", "step": "side", "detached": True},
        {"run_id": c.child, "flow": "child", "status": "waiting", "step": "sub"},
    ]
    child = c.show(c.child)
    assert child["parent"] == {"run_id": c.top, "step": "sub"}
    assert child["children"] == [
        {"run_id": c.grand, "flow": "grand", "status": "waiting", "step": "deeper"}
    ]
    grand = c.show(c.grand)
    assert grand["parent"] == {"run_id": c.child, "step": "deeper"}
    assert grand["children"] == []
    side = c.show(c.side)
    assert side["parent"] == {"run_id": c.top, "step": "side", "detached": True}
    assert side["children"] == []


def test_why_waiting_follows_the_chain_of_calls(chain: Chain) -> None:
    c = chain
    assert why_lines(c.show(c.top)) == [chain_why(c)]
    assert why_lines(c.show(c.child)) == [
        f"deeper: waiting for run {c.grand} (flow grand) to end; "
        "pause: timer due 2027-01-01T01:00:00Z"
    ]
    assert why_lines(c.show(c.grand)) == ["pause: timer due 2027-01-01T01:00:00Z"]
    wait = c.show(c.top)["tokens"][0]["waiting_for"]
    assert wait["child"]["status"] == "waiting"
    assert wait["child"]["waiting"][0]["waiting_for"]["child"] == {
        "status": "waiting",
        "waiting": [
            {"step": "pause", "waiting_for": {"kind": "timer", "due": "2027-01-01T01:00:00Z"}}
        ],
    }


def test_why_waiting_stops_at_the_chain_bound(
    chain: Chain, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = chain
    monkeypatch.setattr(views, "MAX_CHAIN", 1)
    wait = c.show(c.top)["tokens"][0]["waiting_for"]
    deeper = wait["child"]["waiting"][0]["waiting_for"]
    assert deeper == {"kind": "call", "run_id": c.grand, "flow": "grand"}  # not followed
    assert why_lines(c.show(c.top)) == [
        f"sub: waiting for run {c.child} (flow child) to end (timeout 2027-01-01T02:00:00Z); "
        f"deeper: waiting for run {c.grand} (flow grand) to end"
    ]


def test_when_the_chain_ends_each_level_shows_its_children_completed(chain: Chain) -> None:
    c = chain
    c.engine.advance("1h")
    c.engine.work()
    top = c.show(c.top)
    assert top["status"] == "completed" and why_lines(top) == []
    assert [(k["run_id"], k["status"]) for k in top["children"]] == [
        (c.side, "completed"), (c.child, "completed"),
    ]  # fmt: skip
    assert c.show(c.child)["children"][0]["status"] == "completed"
    assert top["bindings"]["sub"]["output"] == "2027-01-01T01:00:00Z"
    ended = c.engine.history_page(c.top, types=("call.started", "call.ended")).items
    assert [(h["type"], h["step"], h["run_id"]) for h in ended] == [
        ("call.ended", "sub", c.child), ("call.started", "sub", c.child),
        ("call.started", "side", c.side),
    ]  # fmt: skip


# --- the runs a run called ----------------------------------------------------------------------


def test_runs_page_of_a_parent_lists_its_children_newest_first_and_pages(chain: Chain) -> None:
    c = chain
    page = c.engine.runs_page(parent=c.top)
    assert [r["id"] for r in page.items] == [c.child, c.side] and page.next_key is None
    first = c.engine.runs_page(parent=c.top, limit=1)
    assert [r["id"] for r in first.items] == [c.child] and first.next_key == c.child
    second = c.engine.runs_page(parent=c.top, limit=1, before=first.next_key)
    assert [r["id"] for r in second.items] == [c.side] and second.next_key is None
    assert [r["id"] for r in c.engine.runs_page(parent=c.child).items] == [c.grand]
    assert c.engine.runs_page(parent=c.grand).items == []
    assert c.engine.runs_page(parent=UNKNOWN).items == []
    assert c.engine.runs_page("waiting", "grand", parent=c.top).items[0]["id"] == c.side
    with pytest.raises(UsageError) as refused:
        c.engine.runs_page(parent="nope")
    assert str(refused.value) == BAD_PARENT


def test_the_python_api_lists_and_shows_the_calls(chain: Chain) -> None:
    c = chain
    with procflow.Engine(c.db_url) as api:
        assert [r["id"] for r in api.runs.list(parent=c.top)] == [c.child, c.side]
        page = api.runs.page(parent=c.top, limit=1)
        assert [r["id"] for r in page.items] == [c.child]
        more = api.runs.page(parent=c.top, limit=1, cursor=page.next_cursor)
        assert [r["id"] for r in more.items] == [c.side]
        assert api.runs.show(c.grand)["parent"] == {"run_id": c.child, "step": "deeper"}


# --- the command line ---------------------------------------------------------------------------


def cli(*args: str) -> tuple[int, str, str]:
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        code = _run(list(args))
    return code, out.getvalue().decode(), err.getvalue().decode()


def test_cli_runs_show_and_list_parent(chain: Chain) -> None:
    c = chain
    code, out, _ = cli("runs", "show", c.child, "--json", "--db", c.db_url)
    assert code == 0
    shown = json.loads(out)
    assert shown["parent"] == {"run_id": c.top, "step": "sub"}
    assert shown["children"] == c.show(c.child)["children"]
    code, out, _ = cli("runs", "show", c.top, "--history", "0", "--db", c.db_url)
    assert code == 0
    lines = out.splitlines()
    assert f"  child    {c.side}  grand waiting (step side, detached)" in lines
    assert f"  child    {c.child}  child waiting (step sub)" in lines
    assert f"  waiting  {chain_why(c)}" in lines
    assert not any(line.startswith("  parent") for line in lines)
    _, out, _ = cli("runs", "show", c.grand, "--history", "0", "--db", c.db_url)
    assert f"  parent   {c.child} (step deeper)" in out.splitlines()
    code, out, _ = cli("runs", "list", "--parent", c.top, "--json", "--db", c.db_url)
    assert code == 0 and [r["id"] for r in json.loads(out)] == [c.child, c.side]
    code, out, _ = cli("runs", "list", "--parent", c.top, "--limit", "1", "--db", c.db_url)
    assert code == 0 and out.splitlines()[0].startswith(f"{c.child}  child ")
    code, out, _ = cli("runs", "list", "--parent", UNKNOWN, "--json", "--db", c.db_url)
    assert code == 0 and json.loads(out) == []
    code, _, err = cli("runs", "list", "--parent", "nope", "--db", c.db_url)
    assert code == 2 and err == f"error: {BAD_PARENT}\n"


# --- HTTP and the web UI ------------------------------------------------------------------------


@pytest.fixture
def client(chain: Chain, db_env: dict[str, str]) -> Iterator[TestClient]:
    with TestClient(create_app(ServerState.of(chain.db_url, None, db_env))) as served:
        yield served


def test_http_shows_calls_and_lists_by_parent(chain: Chain, client: TestClient) -> None:
    c = chain
    shown = client.get(f"/runs/{c.grand}").json()
    assert shown["parent"] == {"run_id": c.child, "step": "deeper"}
    assert client.get(f"/runs/{c.top}").json()["children"] == c.show(c.top)["children"]
    found = client.get("/runs", params={"parent": c.top}).json()
    assert [r["id"] for r in found["items"]] == [c.child, c.side] and found["next_cursor"] is None
    first = client.get("/runs", params={"parent": c.top, "limit": 1}).json()
    assert [r["id"] for r in first["items"]] == [c.child]
    second = client.get(
        "/runs", params={"parent": c.top, "limit": 1, "cursor": first["next_cursor"]}
    ).json()
    assert [r["id"] for r in second["items"]] == [c.side] and second["next_cursor"] is None
    assert client.get("/runs", params={"parent": UNKNOWN}).json()["items"] == []
    refused = client.get("/runs", params={"parent": "nope"})
    assert refused.status_code == 400
    assert refused.json()["errors"] == [{"field": "parent", "message": BAD_PARENT}]
    declared = client.get("/openapi.json").json()["paths"]["/runs"]["get"]["parameters"]
    parent = next(p for p in declared if p["name"] == "parent")
    assert parent["schema"] == {"type": "string", "pattern": "^[0-9a-f]{32}$"}


def test_run_pages_link_parent_and_children(chain: Chain, client: TestClient) -> None:
    c = chain
    page = client.get(f"/ui/runs/{c.child}").text
    assert f'<a id="parent-run" href="/ui/runs/{c.top}">{c.top}</a>, step sub' in page
    called = page.split('id="called-runs"')[1].split("</table>")[0]
    assert re.findall(r'href="/ui/runs/([0-9a-f]+)"', called) == [c.grand]
    assert '<span class="status status-waiting">waiting</span>' in called
    assert (
        f"<li>deeper: waiting for run {c.grand} (flow grand) to end; "
        "pause: timer due 2027-01-01T01:00:00Z</li>"
    ) in page
    top = client.get(f"/ui/runs/{c.top}").text
    assert 'id="parent-run"' not in top
    called = top.split('id="called-runs"')[1].split("</table>")[0]
    assert re.findall(r'href="/ui/runs/([0-9a-f]+)"', called) == [c.side, c.child]
    assert "side (detached)" in called
    listed = client.get("/ui/runs", params={"parent": c.top}).text
    assert re.findall(r'<td data-label="Id"><a href="/ui/runs/([^"]+)">', listed) == [
        c.child, c.side,
    ]  # fmt: skip
    assert "started by call" in listed and f'name="parent" value="{c.top}"' in listed
    timeline = client.get(f"/ui/runs/{c.top}", params={"type": "call.started"}).text
    assert timeline.count('<td data-label="Type">call.started</td>') == 2
    refused = client.get("/ui/runs", params={"parent": "nope"})
    assert refused.status_code == 400 and "parent must be a run" in refused.text


def test_run_page_lists_the_first_children_and_links_the_rest(
    chain: Chain, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from procflow.server.web import pages_runs

    monkeypatch.setattr(pages_runs, "CHILDREN_SHOWN", 1)
    page = client.get(f"/ui/runs/{chain.top}").text
    called = page.split('id="called-runs"')[1].split("</table>")[0]
    assert re.findall(r'href="/ui/runs/([0-9a-f]+)"', called) == [chain.side]
    assert f'<a href="/ui/runs?parent={chain.top}">All runs this run called</a>' in page


# --- the diagram ---------------------------------------------------------------------------------


def test_the_diagram_marks_a_call_step(chain: Chain) -> None:
    flow = chain.engine.definition_version("top")
    assert isinstance(flow, Flow)
    mermaid = render(flow, "mermaid")
    assert '  s_side[["side<br/>call → grand<br/>detached"]]' in mermaid
    assert '  s_sub[["sub<br/>call → child<br/>timeout 2h"]]' in mermaid
    dot = render(flow, "dot")
    assert '"s_sub" [shape=box, peripheries=2, label="sub\\ncall → child\\ntimeout 2h"];' in dot
    assert DiagramCache.can_draw(), "Graphviz (dot) is needed: make system installs it"
    svg = to_svg(dot)
    assert "call → child" in svg


# --- metrics -------------------------------------------------------------------------------------


def test_calls_are_counted_by_outcome(db_url: str, db_env: dict[str, str], tmp_path: Path) -> None:
    engine = Engine.virtual(db_url, environ=db_env)
    try:
        deploy(engine, tmp_path / "flows", "grand", "breaker", "metered")
        metrics = ProcessMetrics(db_url)
        engine.loop.advancer.observer = metrics.observer
        run = engine.start_flow("metered", {})
        engine.work()
        assert calls(metrics) == {("grand", "started"): 1}
        exposed = metrics.exposition().decode().splitlines()
        assert 'procflow_runs_waiting{kind="call"} 1.0' in exposed  # the run waits on ok's child
        engine.advance("1h")  # ok's child completes; bad's fails at once; slow's is started
        engine.work()
        assert calls(metrics) == {
            ("grand", "started"): 2, ("grand", "completed"): 1,
            ("breaker", "started"): 1, ("breaker", "failed"): 1,
        }  # fmt: skip
        engine.advance("30m")  # slow times out; cut's child starts
        engine.work()
        cut = engine.show(run, 0)["children"][-1]
        assert cut["step"] == "cut"
        engine.cancel(cut["run_id"])
        engine.work()
        assert engine.show(run, 0)["status"] == "completed"
        assert calls(metrics) == {
            ("grand", "started"): 3, ("grand", "completed"): 1, ("grand", "timed_out"): 1,
            ("grand", "cancelled"): 1, ("breaker", "started"): 1, ("breaker", "failed"): 1,
        }  # fmt: skip
    finally:
        engine.close()


def calls(metrics: ProcessMetrics) -> dict[tuple[str, str], float]:
    found = {}
    for line in metrics.exposition().decode().splitlines():
        matched = re.fullmatch(
            r'procflow_calls_total\{flow="([^"]+)",outcome="([^"]+)"\} (\S+)', line
        )
        if matched:
            found[(matched.group(1), matched.group(2))] = float(matched.group(3))
    return found
