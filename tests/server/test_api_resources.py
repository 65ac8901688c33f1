"""The resource routes of the HTTP API — definitions and runs here; tasks, records and the outbox
in ``test_api_records.py`` — through the real ASGI app on both store backends.

Every success is compared with the ``procflow ... --json`` output of the same thing (run
in-process on the same store): the two faces share one serializer. Every refusal is an RFC 9457
problem with the right status, naming the bad field where there is one, and is checked to
have changed nothing (every table dumped before and after).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from api_site import GREET, INTENT, YAML, MakeSite, Site
from click.testing import CliRunner

from procflow.cli import _run, cli
from procflow.server.api import ENDPOINTS, definitions
from procflow.server.openapi import document, openapi_endpoint

LONELY = """\
name: lonely
entities:
  - name: Memo
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
processes:
  - name: Lonely
    steps:
      - { name: first, kind: userTask, args: { assignee: ann, next: end } }
      - { name: never, kind: userTask, args: { assignee: ann } }
"""
BROKEN = "flow: broken\nsteps: 3\n"


# --- definitions -----------------------------------------------------------------------------


def test_deploying_a_file_answers_201_then_200_when_unchanged(make_site: MakeSite) -> None:
    site = make_site(deploy=False)
    first = site.deploy("shop.intent", INTENT)
    assert first.status_code == 201
    assert first.json() == {
        "deployed": [
            {"name": p, "dialect": "intent", "version": 1, "unchanged": False}
            for p in ("Approve", "Announce", "Manual")
        ],
        "warnings": [],
    }
    again = site.deploy("shop.intent", INTENT.replace("\n", "\r\n"))  # as a file read would be
    assert again.status_code == 200
    assert [d["unchanged"] for d in again.json()["deployed"]] == [True, True, True]
    changed = site.deploy("shop.intent", INTENT + "\n# a comment\n")
    assert changed.status_code == 201
    assert {d["version"] for d in changed.json()["deployed"]} == {2}


def test_a_deploy_reports_its_definitions_as_deploy_json_does(site: Site, tmp_path: Path) -> None:
    (tmp_path / "hello.flow.yaml").write_text(GREET.replace("greet", "hello"))
    printed = site.cli("deploy", str(tmp_path / "hello.flow.yaml"))["deployed"]
    assert printed == [{"name": "hello", "dialect": "flow", "version": 1, "unchanged": False}]
    sent = site.deploy("hello.flow.yaml", GREET.replace("greet", "hello"))
    assert sent.status_code == 200  # the same text: the same version, from disk or over HTTP
    assert sent.json()["deployed"] == [{**printed[0], "unchanged": True}]


def validate_json(folder: Path, name: str, text: str) -> tuple[int, list[dict[str, Any]]]:
    """``procflow validate NAME --json`` of ``text`` saved as ``folder/NAME``, run in ``folder``
    (so the file is named as the HTTP deploy names it): its exit code and items."""
    (folder / name).write_text(text)
    runner = CliRunner()
    cwd = Path.cwd()
    os.chdir(folder)
    try:
        with runner.isolation() as (out, _, _):
            code = _run(["validate", name, "--json"])
    finally:
        os.chdir(cwd)
    return code, json.loads(out.getvalue().decode())


def test_a_deploy_reports_the_files_warnings_as_validate_json_items(
    site: Site, tmp_path: Path
) -> None:
    done = site.deploy("lonely.intent", LONELY)
    assert done.status_code == 201
    code, items = validate_json(tmp_path, "lonely.intent", LONELY)
    assert code == 0 and len(items) == 1
    assert done.json()["warnings"] == items


def test_a_deploy_of_a_file_with_errors_is_a_422_with_the_validate_items(
    site: Site, tmp_path: Path
) -> None:
    url = "/definitions?filename=broken.flow.yaml"
    body = site.refused("POST", url, 422, field="steps", content=BROKEN, headers=YAML)
    code, items = validate_json(tmp_path, "broken.flow.yaml", BROKEN)
    assert code == 1
    assert [{k: v for k, v in e.items() if k != "field"} for e in body["errors"]] == items


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "give the file's name"),
        ("?filename=", "the query parameter [filename] is empty: give it a value"),
        ("?filename=notes.txt", "[notes.txt]"),
        ("?filename=../x.intent", "[../x.intent]"),
        ("?filename=a/b.flow.yaml", "no folder"),
        ("?filename=a%5Cb.flow.yaml", "no folder"),
        ("?filename=a%1Bb.intent", "no control character"),
        ("?filename=a%C2%85b.intent", "no control character"),  # U+0085, a C1 control
        ("?filename=a%E2%80%A8b.intent", "[a\\u2028b.intent]"),  # a line separator, shown
        (f"?filename={'x' * 249}.intent", "of at most 255 characters"),
    ],
)
def test_a_deploy_without_a_usable_filename_is_a_400_naming_it(
    site: Site, query: str, message: str
) -> None:
    url = f"/definitions{query}"
    site.refused("POST", url, 400, field="filename", detail=message, content=INTENT, headers=YAML)


def test_the_filename_the_document_allows_is_the_one_the_server_takes(make_site: MakeSite) -> None:
    """The document's pattern is the server's check (a name of 255 characters, any text but a
    folder or a control character, before the dialect's suffix)."""
    pattern = re.compile(definitions.FILENAME_PATTERN)
    site = make_site(deploy=False)
    for name in ("café.intent", ".intent", f"{'x' * 248}.intent", "a b.intent"):
        assert pattern.fullmatch(name), name
        answer = site.deploy(quote(name), INTENT)
        assert answer.status_code in (200, 201), (name, answer.text)
    for name in ("a/b.intent", "a\\b.intent", "a\x7fb.intent", "a.yaml", "a.intent.txt"):
        assert not pattern.fullmatch(name), name
        assert site.deploy(quote(name), INTENT).status_code == 400, name


def test_a_deploy_body_that_is_not_utf8_text_is_a_400(site: Site) -> None:
    url = "/definitions?filename=x.flow.yaml"
    site.refused("POST", url, 400, detail="not [application/json]", json={"flow": "x"})
    site.refused("POST", url, 400, detail="not UTF-8", content=b"flow: caf\xe9\n", headers=YAML)


def test_a_file_larger_than_the_servers_limit_is_a_422(make_site: MakeSite) -> None:
    site = make_site({"PROCFLOW_MAX_FILE_SIZE": "100"}, deploy=False)
    url = "/definitions?filename=shop.intent"
    detail = "larger than the limit of 100 bytes (PROCFLOW_MAX_FILE_SIZE)"
    site.refused("POST", url, 422, detail=detail, content=INTENT, headers=YAML)


def test_definitions_list_and_show_are_the_cli_items(site: Site) -> None:
    site.start()
    listed = site.client.get("/definitions").json()
    assert listed["next_cursor"] is None
    by_name = {d["name"]: d for d in site.cli("definitions", "list")}
    assert sorted(listed["items"], key=lambda d: d["name"]) == sorted(
        by_name.values(), key=lambda d: d["name"]
    )
    greet = site.client.get("/definitions/greet").json()
    assert greet == by_name["greet"]
    [version] = greet["versions"]
    assert version == {
        "version": 1, "deployed_at": "2027-01-01T00:00:00Z", "active_runs": 1, "disabled": False
    }  # fmt: skip
    site.cli("definitions", "disable", "greet")
    assert site.client.get("/definitions/greet").json()["versions"][0]["disabled"] is True


def test_an_unknown_definition_is_a_404(site: Site) -> None:
    site.refused("GET", "/definitions/nope", 404, detail="[nope]")


def test_the_diagram_is_svg_drawn_by_graphviz_with_each_step_marked(site: Site) -> None:
    drawn = site.client.get("/definitions/greet/diagram.svg")
    assert drawn.status_code == 200
    assert drawn.headers["content-type"].startswith("image/svg+xml")
    assert drawn.text.startswith("<svg")
    assert 'class="node step" data-step="later"' in drawn.text
    assert site.deploy("greet.flow.yaml", GREET + "# version 2\n").status_code == 201
    for version in (1, 2):
        got = site.client.get(f"/definitions/greet/diagram.svg?version={version}")
        assert got.status_code == 200
    assert site.client.get("/definitions/Manual/diagram.svg").status_code == 200


def test_the_bpmn_diagram_is_what_procflow_graph_writes_for_the_same_file(
    site: Site, tmp_path: Path
) -> None:
    """Both faces call one function: the served document is the CLI's, byte for byte."""
    served = site.client.get("/definitions/greet/diagram.bpmn")
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("application/bpmn+xml")
    source = tmp_path / "greet.flow.yaml"
    source.write_text(GREET)
    written = CliRunner().invoke(cli, ["graph", str(source), "--format", "bpmn"])
    assert written.exit_code == 0, written.output
    assert written.output == served.text + "\n"
    assert '<bpmn:process id="greet" name="greet"' in served.text
    assert 'id="later"' in served.text  # a step's id is its name
    intent = site.client.get("/definitions/Manual/diagram.bpmn")
    assert intent.status_code == 200
    assert '<bpmn:userTask id="' in intent.text


@pytest.mark.parametrize("diagram", ["diagram.svg", "diagram.bpmn"])
def test_without_graphviz_the_diagram_is_a_503_saying_so(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, diagram: str
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot there
    site.refused("GET", f"/definitions/greet/{diagram}", 503, detail="dot")


@pytest.mark.parametrize("diagram", ["diagram.svg", "diagram.bpmn"])
def test_a_diagram_of_an_unknown_definition_or_version_is_a_404_a_bad_version_a_400(
    site: Site, diagram: str
) -> None:
    site.refused("GET", f"/definitions/nope/{diagram}", 404, detail="[nope]")
    site.refused("GET", f"/definitions/greet/{diagram}?version=7", 404, detail="1 to 1")
    site.refused("GET", f"/definitions/greet/{diagram}?version=x", 400, field="version")
    # As large as the document's maximum (the largest id a store holds): a version, not there;
    # past it, not a version (it was a 400 from 19 digits on, inside the document's range).
    largest = 2**63 - 1
    site.refused("GET", f"/definitions/greet/{diagram}?version={largest}", 404, detail="1 to 1")
    site.refused("GET", f"/definitions/greet/{diagram}?version={largest + 1}", 400,
                 field="version")  # fmt: skip


# --- runs ------------------------------------------------------------------------------------


def test_starting_a_flow_answers_201_the_run_as_runs_show_prints_it(site: Site) -> None:
    done = site.client.post("/flows/greet/runs", json={"inputs": {"who": "ann", "times": 2}})
    assert done.status_code == 201
    run = done.json()
    assert done.headers["location"] == f"/runs/{run['id']}"
    assert (run["name"], run["status"]) == ("greet", "running")
    assert run == site.cli("runs", "show", run["id"])
    history = site.engine.store.read().history(run["id"])
    assert history[0].data is not None and history[0].data.get("by") == "local"


def test_showing_a_run_is_runs_show_with_its_history_kept_to_n(site: Site) -> None:
    run_id = site.start()
    site.work()
    assert site.client.get(f"/runs/{run_id}").json() == site.cli("runs", "show", run_id)
    last = site.client.get(f"/runs/{run_id}?history=1").json()
    assert last == site.cli("runs", "show", run_id, "--history", "1")
    assert len(last["history"]) == 1
    assert site.client.get(f"/runs/{run_id}?history=0").json()["history"] == []


def test_a_bad_history_count_is_a_400_an_unknown_run_a_404(site: Site) -> None:
    run_id = site.start()
    site.refused("GET", f"/runs/{run_id}?history=-1", 400, field="history")
    site.refused("GET", "/runs/nope", 404, detail="[nope]")


def test_runs_list_items_are_the_cli_items_newest_first_filtered(site: Site) -> None:
    greet = [site.start() for _ in range(2)]
    doomed = site.start("doomed")
    site.work()
    listed = site.client.get("/runs").json()
    # Newest first: a run id begins with its creation time (in ms), so ids descend.
    assert [r["id"] for r in listed["items"]] == sorted([doomed, *greet], reverse=True)
    assert listed["items"] == site.cli("runs", "list")  # the same page, newest first
    failed = site.client.get("/runs?status=failed").json()["items"]
    assert failed == site.cli("runs", "list", "--status", "failed")
    assert [r["id"] for r in failed] == [doomed]
    named = site.client.get("/runs?name=greet&status=waiting").json()["items"]
    assert [r["id"] for r in named] == sorted(greet, reverse=True)


def test_an_unknown_status_filter_is_a_400_naming_it(site: Site) -> None:
    site.refused("GET", "/runs?status=asleep", 400, field="status")


def query_params() -> list[tuple[str, str, str, bool]]:
    """(METHOD, a path with known values, name, required) of every query parameter of the
    document's operations."""
    spec = document([*ENDPOINTS, openapi_endpoint(ENDPOINTS)])
    values = {"{name}": "greet", "{entity}": "Order", "{id}": "1"}
    found = []
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            for param in operation.get("parameters", []):
                if param["in"] == "query":
                    filled = path
                    for key, value in values.items():
                        filled = filled.replace(key, value)
                    found.append((method.upper(), filled, param["name"], param["required"]))
    return found


@pytest.mark.parametrize(("method", "path", "name", "required"), query_params())
def test_an_empty_query_value_is_a_400_naming_it(
    site: Site, method: str, path: str, name: str, required: bool
) -> None:
    """``?limit=`` was taken as absent while the document says an integer (likewise ``status``,
    ``history``, ``version``, ``name``, ``assignee``, ``cursor``): every empty value is refused."""
    detail = f"the query parameter [{name}] is empty: give it a value"
    body = site.refused(method, f"{path}?{name}=", 400, field=name, detail=detail)
    assert body["detail"].endswith("value" if required else "or leave it out"), body


def test_cancel_answers_the_cancelled_run_and_records_the_caller(site: Site) -> None:
    run_id = site.start()
    done = site.client.post(f"/runs/{run_id}/cancel")
    assert done.status_code == 200
    assert done.json()["status"] == "cancelled"
    assert done.json() == site.cli("runs", "show", run_id)
    assert done.json()["history"][-1]["by"] == "local"


def test_cancelling_an_ended_run_is_a_409_an_unknown_one_a_404(site: Site) -> None:
    run_id = site.start()
    site.client.post(f"/runs/{run_id}/cancel")
    site.refused("POST", f"/runs/{run_id}/cancel", 409, detail="cancelled")
    site.refused("POST", "/runs/nope/cancel", 404)


def test_retry_answers_the_run_with_its_failed_step_running_again(site: Site) -> None:
    run_id = site.start("doomed")
    site.work()
    done = site.client.post(f"/runs/{run_id}/retry")
    assert done.status_code == 200
    assert done.json()["status"] == "running"
    assert done.json() == site.cli("runs", "show", run_id)
    assert done.json()["history"][-1]["type"] == "run.retried"


def test_retrying_a_run_that_has_not_failed_is_a_409_an_unknown_one_a_404(site: Site) -> None:
    run_id = site.start()
    site.refused("POST", f"/runs/{run_id}/retry", 409)
    site.refused("POST", "/runs/nope/retry", 404)


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("/flows/nope/runs", {"inputs": {}}, 404, None),
        ("/flows/greet/runs", {"inputs": {}}, 422, "who"),
        ("/flows/greet/runs", {"inputs": {"who": "x", "times": "many"}}, 422, "times"),
        ("/flows/greet/runs", {"inputs": []}, 422, "inputs"),
        ("/flows/greet/runs", {"input": {"who": "x"}}, 422, "input"),
        ("/flows/greet/runs", ["who"], 422, ""),
        ("/flows/Manual/runs", {"inputs": {}}, 422, None),
        ("/processes/nope/runs", {"record": {"entity": "Ticket", "id": 1}}, 404, None),
        ("/processes/Manual/runs", {"record": {"entity": "Ticket", "id": 99}}, 404, None),
        ("/processes/Manual/runs", {}, 422, "record"),
        ("/processes/Manual/runs", {"record": {"entity": "Ticket"}}, 422, "record.id"),
        ("/processes/Manual/runs", {"record": {"entity": "Ticket", "id": 1.5}}, 422, "record.id"),
        ("/processes/Manual/runs", {"record": {"entity": "Ticket", "id": 2**63}}, 422,
         "record.id"),
        ("/processes/Manual/runs", {"record": {"id": 1}}, 422, "record.entity"),
        ("/processes/Manual/runs", {"record": {"entity": "Ticket", "id": 1, "x": 1}}, 422,
         "record"),
        ("/processes/Manual/runs", {"record": {"entity": "Ticket", "id": 1}, "again": "yes"},
         422, "again"),
        ("/processes/greet/runs", {"record": {"entity": "Ticket", "id": 1}}, 422, None),
    ],
)  # fmt: skip
def test_a_refused_start_is_a_problem_naming_the_field(
    site: Site, path: str, body: Any, status: int, field: str | None
) -> None:
    site.client.post("/entities/Ticket", json={"subject": "s"})
    site.refused("POST", path, status, field=field, json=body)


def test_a_start_body_that_is_not_json_is_a_400(site: Site) -> None:
    as_json = {"content-type": "application/json"}
    site.refused(
        "POST", "/flows/greet/runs", 400, detail="not valid JSON", content=b"{", headers=as_json
    )
    plain = {"content-type": "text/plain"}
    site.refused(
        "POST", "/flows/greet/runs", 400, detail="[text/plain]", content=b"{}", headers=plain
    )


def test_a_record_id_written_as_a_whole_float_is_the_integer_the_document_says_it_is(
    site: Site,
) -> None:
    """JSON Schema counts 1.0 as an integer, so the document takes it as record.id: the server
    does too (Schemathesis sent such ids, and got a 422)."""
    site.client.post("/entities/Ticket", json={"subject": "s"})
    record = {"entity": "Ticket", "id": 1.0}
    done = site.client.post("/processes/Manual/runs", json={"record": record})
    assert done.status_code == 201, done.text
    assert done.json()["record"] == {"entity": "Ticket", "id": 1}


def test_null_members_are_taken_as_absent_as_the_document_says(site: Site) -> None:
    site.client.post("/entities/Ticket", json={"subject": "s"})
    started = site.client.post("/flows/quick/runs", json={"inputs": None})
    assert started.status_code == 201, started.text
    record = {"entity": "Ticket", "id": 1}
    process = site.client.post("/processes/Manual/runs", json={"record": record, "again": None})
    assert process.status_code == 201, process.text
    order = site.order()
    site.work()
    task = site.client.get("/tasks?assignee=sales").json()["items"][0]
    assert task["record"] == {"entity": "Order", "id": order["id"]}
    completion = {"action": "approve", "data": None}
    done = site.client.post(f"/tasks/{task['id']}/complete", json=completion)
    assert done.status_code == 200, done.text
    event = {"type": "slack.approval", "data": {"message": "m"}, "id": None}
    accepted = site.client.post("/events", json=event)
    assert accepted.status_code == 200 and accepted.json()["event_id"].startswith("pf-")


def test_starting_a_process_for_a_record_answers_201_the_run(site: Site) -> None:
    site.client.post("/entities/Ticket", json={"subject": "s"})
    done = site.client.post(
        "/processes/Manual/runs", json={"record": {"entity": "Ticket", "id": 1}}
    )
    assert done.status_code == 201
    run = done.json()
    assert run["record"] == {"entity": "Ticket", "id": 1}
    assert done.headers["location"] == f"/runs/{run['id']}"
    assert run == site.cli("runs", "show", run["id"])
