"""Every page answers 200 with its title and one h1; unknown things are an HTML 404; the vendored
htmx is the one whose checksum is recorded; the package data is where the build takes it from."""

from __future__ import annotations

import hashlib
from pathlib import Path

from web_site import Web, h1, title

import procflow.server.web as web_package

HTMX_SHA256 = "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717"  # htmx.org 2.0.11
STATIC = Path(web_package.__file__).parent / "static"


def test_every_page_has_its_title_h1_and_navigation(web: Web) -> None:
    order = web.engine.create_record("Order", {"total": 10})
    web.work()
    run_id = web.engine.runs_for_record("Order", order["id"])[0].id
    task_id = web.engine.tasks_page().items[0]["id"]
    pages = {
        "/ui/runs": "Runs",
        f"/ui/runs/{run_id}": f"Run {run_id}",
        "/ui/tasks": "Tasks",
        f"/ui/tasks/{task_id}": f"Task {task_id}",
        "/ui/definitions": "Definitions",
        "/ui/definitions/OrderApproval": "Definition OrderApproval",
        "/ui/entities/Order": "Order records",
        "/ui/outbox": "Outbox",
        "/ui/events/new": "Send event",
    }
    for path, heading in pages.items():
        html = web.page(path)
        assert h1(html) == heading, path
        assert title(html) == f"{heading} · procflow", path
        for link in ("Runs", "Tasks", "Definitions", "Outbox", "Send event"):
            assert f">{link}</a>" in html, (path, link)
        assert "<nav" in html


def test_root_redirects_to_the_runs_page(web: Web) -> None:
    answer = web.client.get("/", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/runs"


def test_unknown_things_are_an_html_not_found_page(web: Web) -> None:
    for path in (
        "/ui/runs/no-such-run", "/ui/tasks/999999", "/ui/tasks/abc", "/ui/definitions/nothing",
        "/ui/entities/Nothing", "/ui/no-such-page",
    ):  # fmt: skip
        answer = web.client.get(path)
        assert answer.status_code == 404, path
        assert answer.headers["content-type"].startswith("text/html")
        assert h1(answer.text) == "Not found"
        assert "Traceback" not in answer.text


def test_a_bad_filter_is_a_400_page_naming_it(web: Web) -> None:
    answer = web.client.get("/ui/runs?status=sleepy")
    assert answer.status_code == 400
    assert "status must be one of" in answer.text
    assert web.client.get("/ui/runs?cursor=%%%").status_code == 400


def test_htmx_is_vendored_with_its_licence_and_checksum(web: Web) -> None:
    body = (STATIC / "htmx.min.js").read_bytes()
    assert hashlib.sha256(body).hexdigest() == HTMX_SHA256
    assert "Zero-Clause BSD" in (STATIC / "htmx.LICENSE.txt").read_text()
    served = web.client.get("/ui/static/htmx.min.js")
    assert served.status_code == 200 and served.content == body
    css = web.client.get("/ui/static/procflow.css")
    assert css.status_code == 200 and "prefers-color-scheme: dark" in css.text


def test_the_build_carries_templates_and_static_files() -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert "server/web/templates/*.html" in pyproject
    assert "server/web/static/*" in pyproject
