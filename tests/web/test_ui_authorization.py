"""The role table in the web UI, on both store backends: a button whose action the signed-in user
may not take is disabled and says which role it needs; the same POST made anyway is a 403 that
changes nothing (the engine refuses it, as on every face)."""

from __future__ import annotations

import re

import web_site
from store_dump import dump_store
from test_forms import order_task, signed_in
from test_schedules_page import SLOW, names, row
from web_site import BREAKER, MakeWeb, Web

# The token table of these tests: olga an operator, dora a deployer, pat no role.
OPERATOR = "operator-token-0123456789ab"
DEPLOYER = "deployer-token-0123456789ab"
PLAIN = "plain-token-0123456789abcdef"
TOKENS = f"{OPERATOR}=olga:operator;{DEPLOYER}=dora:deployer;{PLAIN}=pat:"


def _button(html: str, button_id_or_label: str) -> str:
    """The ``<button …>`` tag with that id (or that label)."""
    by_id = re.search(rf'<button id="{button_id_or_label}"[^>]*>', html)
    found = by_id or re.search(rf"<button[^>]*>{button_id_or_label}</button>", html)
    assert found is not None, button_id_or_label
    return found.group(0)


def _failed_run(web: Web) -> str:
    web.flow("breaker", BREAKER)
    run_id = web.engine.start_flow("breaker", {})
    web.work()
    return run_id


def test_a_user_without_a_role_sees_disabled_buttons_naming_the_role(make_web: MakeWeb) -> None:
    web = make_web({"PROCFLOW_API_TOKENS": TOKENS})
    run_id = _failed_run(web)
    signed_in(web, PLAIN)
    run_page = web.page(f"/ui/runs/{run_id}")
    assert "disabled" in _button(run_page, "retry-button")
    assert "Needs the role operator (pat has no role)" in run_page
    definitions = web.page("/ui/definitions")
    assert "disabled" in _button(definitions, "Upload")
    assert "Needs the role deployer (pat has no role)" in definitions
    event = web.page("/ui/events/new")
    assert "disabled" in _button(event, "Send")
    assert "Needs the role operator" in event


def test_the_post_made_anyway_is_refused_and_changes_nothing(make_web: MakeWeb) -> None:
    web = make_web({"PROCFLOW_API_TOKENS": TOKENS})
    run_id = _failed_run(web)
    signed_in(web, PLAIN)
    before = dump_store(web.engine.store)
    retried = web.post(f"/ui/runs/{run_id}/retry", {"confirm": "yes"})
    assert retried.status_code == 403
    assert "may not retry runs: that needs the role [operator]" in retried.text
    sent = web.post("/ui/events/new", {"type": "slack.approval", "data": "{}"})
    assert sent.status_code == 403
    assert "may not send events" in sent.text
    token = web.csrf("/ui/definitions")
    uploaded = web.client.post(
        "/ui/definitions", data={"csrf": token},
        files={"file": ("hello.flow.yaml", b"flow: hello\nsteps:\n  - hi: { set: { a: 1 } }\n")},
    )  # fmt: skip
    assert uploaded.status_code == 403
    assert "may not deploy definitions" in uploaded.text
    assert dump_store(web.engine.store) == before


def test_each_role_gets_its_buttons(make_web: MakeWeb) -> None:
    web = make_web({"PROCFLOW_API_TOKENS": TOKENS})
    run_id = _failed_run(web)
    signed_in(web, OPERATOR)
    assert "disabled" not in _button(web.page(f"/ui/runs/{run_id}"), "retry-button")
    assert "disabled" not in _button(web.page("/ui/events/new"), "Send")
    assert "disabled" in _button(web.page("/ui/definitions"), "Upload")
    signed_in(web, DEPLOYER)
    assert "disabled" not in _button(web.page("/ui/definitions"), "Upload")
    assert "disabled" not in _button(web.page(f"/ui/runs/{run_id}"), "retry-button")


def test_a_task_for_another_role_shows_its_buttons_disabled_saying_why(make_web: MakeWeb) -> None:
    web = make_web({"PROCFLOW_API_TOKENS": web_site.TOKENS})
    task_id = order_task(web)  # for the role manager
    signed_in(web, web_site.OPS_TOKEN)
    page = web.page(f"/ui/tasks/{task_id}")
    assert "disabled" in _button(page, "approve")
    assert (
        f"You may not complete this task: task [{task_id}] is assigned to role [manager]; "
        "[olga] is not a member of it (their roles: operator, ops), so cannot complete it"
    ) in page
    signed_in(web, web_site.MANAGER_TOKEN)
    assert "disabled" not in _button(web.page(f"/ui/tasks/{task_id}"), "approve")


def test_the_schedule_buttons_follow_the_role_table(make_web: MakeWeb) -> None:
    web = make_web({"PROCFLOW_API_TOKENS": TOKENS})
    web.flow("slow", SLOW)
    signed_in(web, PLAIN)
    html = web.page("/ui/schedules")
    n = names(html).index("slow") + 1  # the row's number: its buttons' ids end with it
    for action in ("pause", "trigger"):
        assert "disabled" in _button(html, f"{action}-{n}")
    assert "Needs the role deployer (pat has no role)" in row(html, "slow")
    assert "Needs the role operator (pat has no role)" in row(html, "slow")
    signed_in(web, OPERATOR)
    html = web.page("/ui/schedules")
    assert "disabled" in _button(html, f"pause-{n}")
    assert "disabled" not in _button(html, f"trigger-{n}")
    signed_in(web, DEPLOYER)
    html = web.page("/ui/schedules")
    assert "disabled" not in _button(html, f"pause-{n}")
    assert "disabled" not in _button(html, f"trigger-{n}")


def test_a_schedule_post_made_anyway_is_refused_and_changes_nothing(make_web: MakeWeb) -> None:
    web = make_web({"PROCFLOW_API_TOKENS": TOKENS})
    web.flow("slow", SLOW)
    web.engine.schedules.pause("slow")  # so that resume would change it
    signed_in(web, OPERATOR)
    before = dump_store(web.engine.store)
    for action in ("pause", "resume"):
        refused = web.post(f"/ui/schedules/slow/{action}", {})
        assert refused.status_code == 403
        assert "may not pause or resume schedules: that needs the role [deployer]" in refused.text
    signed_in(web, PLAIN)
    refused = web.post("/ui/schedules/slow/trigger", {})
    assert refused.status_code == 403
    assert "may not trigger schedules: that needs the role [operator]" in refused.text
    assert dump_store(web.engine.store) == before
