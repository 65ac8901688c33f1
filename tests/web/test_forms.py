"""Forms of the web UI: completing a task (success, a field the engine refuses, another role's
task), uploading a definition (deployed, or its problems with line and column), sending an event
(the runs it resumed and started), and signing in with a token (cookie flags, CSRF per session)."""

from __future__ import annotations

import re

from projects import TOO_DEEP_LEVELS, nested_json
from store_dump import dump_store
from web_site import ADMIN_TOKEN, KEYED, OPS_TOKEN, TOKENS, MakeWeb, Web, h1

from procflow.server.web.session import COOKIE


def order_task(web: Web, total: int = 10) -> int:
    web.engine.create_record("Order", {"total": total})
    web.work()
    return int(web.engine.tasks_page().items[0]["id"])


def test_a_task_is_completed_from_its_form(web: Web) -> None:
    task_id = order_task(web)
    html = web.page(f"/ui/tasks/{task_id}")
    for field in ("total", "note"):
        assert f'<label for="f-{field}">{field}</label>' in html
    for action in ("approve", "reject", "askCustomer"):
        assert f'name="action" value="{action}">{action}</button>' in html
    done = web.post(f"/ui/tasks/{task_id}", {"action": "reject", "note": "too dear", "total": "10"})
    assert done.status_code == 303, done.text
    task = web.engine.task(task_id)
    assert task["status"] == "completed" and task["action"] == "reject"
    assert web.engine.task(task_id)["data"]["note"] == "too dear"
    assert f'<a href="/ui/tasks/{task_id}">' not in web.page("/ui/tasks")


def test_a_refused_field_is_shown_next_to_it_with_422(web: Web) -> None:
    task_id = order_task(web)
    answer = web.post(f"/ui/tasks/{task_id}", {"action": "approve", "total": "lots"})
    assert answer.status_code == 422
    error = re.search(r'<p class="field-error" id="e-total" role="alert">([^<]+)</p>', answer.text)
    assert error is not None and "total" in error.group(1)
    assert 'aria-describedby="e-total"' in answer.text
    assert web.engine.task(task_id).get("status") is None  # still open: nothing changed


def test_another_roles_task_is_refused_with_403(make_web: MakeWeb) -> None:
    web = make_web({"PROCFLOW_API_TOKENS": TOKENS})
    task_id = order_task(web)  # for the role manager
    signed_in(web, OPS_TOKEN)
    answer = web.post(f"/ui/tasks/{task_id}", {"action": "approve"})
    assert answer.status_code == 403
    assert "You may not complete this task:" in answer.text
    assert web.engine.task(task_id).get("status") is None


def test_upload_deploys_a_good_file_and_lists_a_bad_ones_problems(web: Web) -> None:
    good = "flow: hello\nsteps:\n  - hi: { set: { said: true } }\n"
    token = web.csrf("/ui/definitions")
    answer = web.client.post(
        "/ui/definitions", data={"csrf": token},
        files={"file": ("hello.flow.yaml", good.encode(), "application/yaml")},
    )  # fmt: skip
    assert answer.status_code == 200 and "Deployed: hello=1" in answer.text
    assert web.engine.definition("hello")["latest"] == 1
    bad = "flow: broken\nsteps:\n  - hi: { nonsense: 1 }\n"
    answer = web.client.post(
        "/ui/definitions", data={"csrf": token},
        files={"file": ("broken.flow.yaml", bad.encode(), "application/yaml")},
    )  # fmt: skip
    assert answer.status_code == 422
    assert "<h3>Problems</h3>" in answer.text
    assert re.search(r"<code>broken\.flow\.yaml:3:\d+: [^<]+</code>", answer.text), answer.text
    unsent = web.client.post(
        "/ui/definitions", files={"file": ("x.flow.yaml", good.encode(), "text/plain")}
    )
    assert unsent.status_code == 403


def test_the_event_form_shows_the_runs_it_resumed(web: Web) -> None:
    web.flow("keyed", KEYED)
    run_id = web.engine.start_flow("keyed", {"msg": "m-1"})
    web.work()
    answer = web.post(
        "/ui/events/new", {"type": "slack.approval", "data": '{"message": "m-1", "approved": true}'}
    )
    assert answer.status_code == 200
    assert "<h2>Delivery</h2>" in answer.text and "<h3>Resumed</h3>" in answer.text
    assert f'<a href="/ui/runs/{run_id}">{run_id}</a>' in answer.text
    bad = web.post("/ui/events/new", {"type": "slack.approval", "data": "{nope"})
    assert bad.status_code == 422 and 'id="eve-data" role="alert"' in bad.text
    unknown = web.post("/ui/events/new", {"type": "no.such", "data": "{}"})
    assert unknown.status_code in (404, 422) and 'role="alert"' in unknown.text


def test_event_data_past_64_levels_is_refused_on_the_form_and_nothing_is_stored(web: Web) -> None:
    """As on every face (the engine's limit, checked here before the text is parsed): 1,000 and
    more levels ended the form in a RecursionError, a 500."""
    before = dump_store(web.engine.store)
    for levels in TOO_DEEP_LEVELS:
        data = '{"message": "m", "x": ' + nested_json(levels - 1) + "}"
        answer = web.post("/ui/events/new", {"type": "slack.approval", "data": data})
        assert answer.status_code == 422, (levels, answer.text[:300])
        assert "nested too deeply: more than 64 levels of objects and arrays" in answer.text
    assert dump_store(web.engine.store) == before
    data = '{"message": "m", "x": ' + nested_json(63) + "}"
    answer = web.post("/ui/events/new", {"type": "slack.approval", "data": data})
    assert answer.status_code == 200 and "<h2>Delivery</h2>" in answer.text


def signed_in(web: Web, token: str) -> None:
    answer = web.client.post("/ui/login", data={"token": token}, follow_redirects=False)
    assert answer.status_code == 303, answer.text


def test_login_sets_a_strict_httponly_cookie_and_pages_need_it(make_web: MakeWeb) -> None:
    web = make_web({"PROCFLOW_API_TOKENS": TOKENS})
    away = web.client.get("/ui/runs?status=waiting", follow_redirects=False)
    assert away.status_code == 303
    assert away.headers["location"] == "/ui/login?next=%2Fui%2Fruns%3Fstatus%3Dwaiting"
    form = web.page("/ui/login")
    assert h1(form) == "Sign in" and 'type="password"' in form
    wrong = web.client.post("/ui/login", data={"token": "x" * 30})
    assert wrong.status_code == 401 and 'role="alert">That token is not valid' in wrong.text
    answer = web.client.post(
        "/ui/login", data={"token": ADMIN_TOKEN, "next": "/ui/runs?status=waiting"},
        follow_redirects=False,
    )  # fmt: skip
    assert answer.headers["location"] == "/ui/runs?status=waiting"
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert ADMIN_TOKEN not in cookie
    html = web.page("/ui/runs")
    assert "<strong>ada</strong>" in html and ">Sign out</button>" in html
    assert web.post("/ui/events/new", {"type": "x"}, csrf=False).status_code == 403
    web.client.cookies.clear()
    web.client.cookies.set(COOKIE, "Zm9yZ2Vk.9999999999.bad")
    assert web.client.get("/ui/runs", follow_redirects=False).status_code == 303


def test_login_never_sends_anyone_to_another_site(make_web: MakeWeb) -> None:
    web = make_web({"PROCFLOW_API_TOKENS": TOKENS})
    for target in ("https://evil.example/", "//evil.example/ui/", "/api"):
        answer = web.client.post(
            "/ui/login", data={"token": ADMIN_TOKEN, "next": target}, follow_redirects=False
        )
        assert answer.headers["location"] == "/ui/runs"
