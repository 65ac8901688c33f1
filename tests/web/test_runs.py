"""The runs list and a run's page: filters and counts, keyset paging, the timeline's filter and
paging over a long history, the diagram's step classes, retry and cancel behind a confirmation and
a CSRF token, and the plain message when Graphviz is missing."""

from __future__ import annotations

import html as html_module
import re

import pytest
from web_site import BREAKER, Web, h1

from procflow.store.rows import HistoryRow


def tenant(web: Web, title: str) -> str:
    record = web.engine.create_record("TenantApplication", {"title": title})
    web.work()
    return web.engine.runs_for_record("TenantApplication", record["id"])[0].id


def run_links(html: str) -> list[str]:
    return re.findall(r'<td data-label="Id"><a href="/ui/runs/([^"]+)">', html)


def step_group(html: str, step: str) -> list[str]:
    """The classes of the diagram's group for ``step`` (exactly one group)."""
    found = re.findall(rf'<g id="[^"]*" class="([^"]*)" data-step="{re.escape(step)}"', html)
    assert len(found) == 1, (step, found)
    return found[0].split()


def test_runs_filters_counts_and_waiting_kind(web: Web) -> None:
    flaky = tenant(web, "globex flaky-2")  # waits on a retry of createSchema
    fine = tenant(web, "acme")  # completes
    web.flow("breaker", BREAKER)
    broken = web.engine.start_flow("breaker", {})
    web.work()
    html = web.page("/ui/runs")
    assert {flaky, fine, broken} <= set(run_links(html))
    assert "waiting (1)" in html and "completed (1)" in html and "failed (1)" in html
    assert set(run_links(web.page("/ui/runs?status=failed"))) == {broken}
    assert set(run_links(web.page("/ui/runs?name=breaker"))) == {broken}
    assert set(run_links(web.page("/ui/runs?waiting=retry"))) == {flaky}
    assert run_links(web.page("/ui/runs?waiting=task")) == []
    assert "selected>retry</option>" in web.page("/ui/runs?waiting=retry")


def test_runs_page_with_the_api_cursor(web: Web) -> None:
    made = {tenant(web, f"t{i}") for i in range(5)}
    first = web.page("/ui/runs?limit=2")
    shown = run_links(first)
    assert len(shown) == 2
    while (found := re.search(r'<a href="([^"]+)">Next page</a>', first)) is not None:
        first = web.page(found.group(1).replace("&amp;", "&"))
        shown += run_links(first)
    assert sorted(shown) == sorted(made) and len(shown) == len(set(shown))


def test_run_page_shows_why_it_waits_vars_masked_and_live_polling(web: Web) -> None:
    run_id = tenant(web, "globex flaky-2")
    html = web.page(f"/ui/runs/{run_id}")
    assert h1(html) == f"Run {run_id}"
    for section in ("Diagram", "Why it waits", "Timeline", "Bindings", "Vars"):
        assert f"<h2>{section}</h2>" in html
    assert "createSchema: retry 2 of 4 due 2027-01-01T00:00:30Z" in html
    assert "schema service unavailable (attempt 1)" in html
    assert "dbPassword" in html
    assert 'hx-trigger="every 2s"' in html  # not ended: the page refreshes itself
    assert "Only a failed run can be retried" in html
    live = web.page(f"/ui/runs/{run_id}/live")
    assert 'id="run-live"' in live and "<html" not in live
    web.engine.advance("2m")
    web.work()
    done = web.page(f"/ui/runs/{run_id}")
    assert "hx-trigger" not in done  # ended: no more polling
    assert step_group(done, "createSchema") == ["node", "step", "is-done"]
    shown = web.client.get(f"/ui/runs/{run_id}.json").json()
    assert shown == web.engine.show(run_id)


def test_diagram_marks_done_active_and_failed_steps(web: Web) -> None:
    failing = tenant(web, "initech refused")  # the app step always fails: markFailed... ends
    waiting = tenant(web, "globex flaky-2")
    html = web.page(f"/ui/runs/{waiting}")
    assert step_group(html, "createSchema") == ["node", "step", "is-active"]
    assert step_group(html, "provisionApp") == ["node", "step"]
    web.flow("breaker", BREAKER)
    broken = web.engine.start_flow("breaker", {})
    web.work()
    assert step_group(web.page(f"/ui/runs/{broken}"), "boom") == ["node", "step", "is-failed"]
    web.engine.advance("1h")
    web.work()
    ended = web.page(f"/ui/runs/{failing}")
    assert step_group(ended, "createSchema")[-1] == "is-done"
    assert step_group(ended, "provisionApp")[-1] == "is-failed"
    for step in ("recordFailure", "markFailed"):
        assert step_group(ended, step)[-1] == "is-done"
    for html in (ended, web.page("/ui/definitions/TenantProvisioning")):
        states = re.findall(r'class="node step( is-[a-z]+)*"', html)
        assert all(s.count(" is-") <= 1 for s in states)


def test_timeline_pages_a_long_history_and_filters_failures(web: Web) -> None:
    run_id = tenant(web, "globex flaky-2")
    last = web.engine.show(run_id)["history"][-1]["seq"]
    extra = [HistoryRow(last + i, 0, "timer.fired", "createSchema", "createSchema", None, None)
             for i in range(1, 10_001)]  # fmt: skip
    with web.engine.store.tx() as tx:
        tx.append_history(run_id, extra)
    html = web.page(f"/ui/runs/{run_id}")
    rows = re.findall(r'<td data-label="#">(\d+)</td>', html)
    assert len(rows) == 100 and int(rows[0]) == last + 10_000
    older = re.search(r'<a href="([^"]+)">Older entries</a>', html)
    assert older is not None
    second = web.page(older.group(1).replace("&amp;", "&"))
    assert re.findall(r'<td data-label="#">(\d+)</td>', second)[0] == str(last + 9_900)
    failed = web.page(f"/ui/runs/{run_id}?failed=1")
    types = re.findall(r'<td data-label="Type">([^<]+)</td>', failed)
    assert types == ["attempt.failed"]
    typed = web.page(f"/ui/runs/{run_id}?type=run.started")
    assert re.findall(r'<td data-label="Type">([^<]+)</td>', typed) == ["run.started"]
    assert web.client.get(f"/ui/runs/{run_id}?type=nonsense").status_code == 400


def test_retry_and_cancel_need_a_confirmation_and_the_csrf_token(web: Web) -> None:
    web.flow("breaker", BREAKER)
    broken = web.engine.start_flow("breaker", {})
    web.work()
    refused = web.post(f"/ui/runs/{broken}/retry", {"confirm": "yes"}, csrf=False)
    assert refused.status_code == 403 and "CSRF" in refused.text
    asked = web.post(f"/ui/runs/{broken}/retry", {})
    assert asked.status_code == 200 and ">Confirm</button>" in asked.text
    assert [e["type"] for e in web.engine.show(broken)["history"]].count("run.retried") == 0
    done = web.post(f"/ui/runs/{broken}/retry", {"confirm": "yes"})
    assert done.status_code == 303 and done.headers["location"].startswith(f"/ui/runs/{broken}")
    assert any(e["type"] == "run.retried" for e in web.engine.show(broken)["history"])

    waiting = tenant(web, "globex flaky-2")
    html = web.page(f"/ui/runs/{waiting}")
    assert re.search(r"<button [^>]*type=\"submit\" disabled[^>]*>Retry</button>", html)
    done = web.post(f"/ui/runs/{waiting}/cancel", {"confirm": "yes"})
    assert done.status_code == 303
    assert web.engine.show(waiting)["status"] == "cancelled"
    again = web.post(f"/ui/runs/{waiting}/cancel", {"confirm": "yes"})
    assert again.status_code == 409 and "Traceback" not in again.text
    ended = web.page(f"/ui/runs/{waiting}")
    assert "This run has ended (cancelled)" in ended


def test_without_graphviz_the_page_says_so_and_shows_the_rest(
    web: Web, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = tenant(web, "globex flaky-2")
    monkeypatch.setenv("PATH", "")
    html = web.page(f"/ui/runs/{run_id}")
    assert "Diagrams need Graphviz (dot), which is not installed on the server" in html
    assert "retry 2 of 4" in html and "<svg" not in html
    assert "Diagrams need Graphviz" in web.page("/ui/definitions/TenantProvisioning")


def test_a_run_page_shows_at_most_20000_characters_of_bindings(web: Web) -> None:
    many = [
        {"name": f"account {i}", "owner": f"@owner{i}", "renews": "2027-02-01"} for i in range(400)
    ]
    run = web.engine.start_flow("renewal-reminders", {"accounts": many})
    web.engine.work()
    html = web.page(f"/ui/runs/{run}")
    bindings = html.split("<h2>Bindings</h2>", 1)[1].split("</section>", 1)[0]
    assert "more characters: Download JSON)" in bindings
    assert len(html_module.unescape(bindings)) < 20_000 + 200


QUEUED = """\
flow: queued
concurrency: { limit: 1 }
steps:
  - nap: { wait: { for: 1h } }
"""

THROTTLED = """\
flow: throttled
steps:
  - tell: { log.write: { message: hi }, throttle: { limit: 1, per: 1m } }
"""


def test_the_waiting_filter_offers_and_applies_queue_and_throttle(web: Web) -> None:
    web.flow("queued", QUEUED)
    web.flow("throttled", THROTTLED)
    queued = [web.engine.start_flow("queued", {}) for _ in range(2)][1]
    throttled = [web.engine.start_flow("throttled", {}) for _ in range(2)][1]
    web.work()
    html = web.page("/ui/runs")
    assert '<option value="queue">queue</option>' in html
    assert '<option value="throttle">throttle</option>' in html
    assert run_links(web.page("/ui/runs?waiting=queue")) == [queued]
    assert run_links(web.page("/ui/runs?waiting=throttle")) == [throttled]
    assert "selected>throttle</option>" in web.page("/ui/runs?waiting=throttle")
    # The timeline filters by flow control's entries too.
    web.engine.advance("1h")
    for run_id, entry in ((queued, "run.dequeued"), (throttled, "step.throttled")):
        typed = web.page(f"/ui/runs/{run_id}?type={entry}")
        assert re.findall(r'<td data-label="Type">([^<]+)</td>', typed) == [entry]
