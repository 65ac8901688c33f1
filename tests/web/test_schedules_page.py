"""The schedules page and a scheduled run's page, on both store backends: every schedule with its
spec, state and note, next slots, last run (linked) and counts; pause (with a note), resume and
trigger by their forms, behind the CSRF token; refusals shown as pages that change nothing; paging
with the API's cursor; a run started by a schedule names it and its slot."""

from __future__ import annotations

import re

from store_dump import dump_store
from web_site import Web, h1, title

SLOW = """\
flow: slow
trigger:
  schedule: { every: 1h, overlap: skip }
steps:
  - hold: { wait: { for: 90m } }
"""

NIGHTLY = """\
flow: nightly
trigger:
  - schedule: { name: early, every: 1h }
  - schedule: { name: late, cron: "0 18 * * *", timezone: Europe/Berlin }
  - schedule: { name: noon, cron: "0 12 * * *" }
steps:
  - hold: { wait: { for: 90m } }
"""


def row(html: str, name: str) -> str:
    """The table row of the schedule ``name``."""
    found = re.search(rf'<tr id="schedule-{re.escape(name)}">(.*?)</tr>', html, re.S)
    assert found is not None, name
    return found.group(1)


def names(html: str) -> list[str]:
    return re.findall(r'<tr id="schedule-([^"]+)">', html)


def button(html: str, button_id: str) -> str:
    found = re.search(rf'<button id="{button_id}"[^>]*>', html)
    assert found is not None, button_id
    return found.group(0)


def status(html: str) -> str:
    found = re.search(r'<p class="note" role="status">(.*?)</p>', html, re.S)
    assert found is not None, "a status line says what the form did"
    return found.group(1)


def test_the_page_lists_each_schedule_with_its_state_next_slots_last_run_and_counts(
    web: Web,
) -> None:
    web.flow("slow", SLOW)
    web.flow("nightly", NIGHTLY)
    web.engine.advance("PT2H")  # slow: 01:00 starts a run (it holds 90 minutes), 02:00 skipped
    html = web.page("/ui/schedules")
    assert h1(html) == "Schedules" and title(html) == "Schedules · procflow"
    assert '<li><a href="/ui/schedules">Schedules</a></li>' in html  # in the navigation
    shown = names(html)
    assert shown.index("nightly/early") < shown.index("nightly/late") < shown.index("slow")
    slow = row(html, "slow")
    (run,) = [r.id for r in web.engine.list_runs(name="slow")]
    assert '<a href="/ui/definitions/slow">slow</a>' in slow
    assert "every 1h" in slow and "overlap skip, missed latest" in slow
    assert '<span class="status status-active">active</span>' in slow
    assert re.findall(r"<li>([^<]+)</li>", slow) == [
        "2027-01-01 03:00:00Z", "2027-01-01 04:00:00Z", "2027-01-01 05:00:00Z",
    ]  # fmt: skip
    assert f'<a href="/ui/runs/{run}">{run}</a>' in slow and "slot 2027-01-01 01:00:00Z" in slow
    assert "started 1, skipped 1, missed 0, buffered 0" in slow
    late = row(html, "nightly/late")
    assert "0 18 * * * Europe/Berlin" in late and "2027-01-01 17:00:00Z" in late
    assert '<td data-label="Last run">—</td>' in late
    assert "disabled" not in button(html, f"pause-{shown.index('slow') + 1}")


def test_pause_with_a_note_resume_and_trigger_by_their_forms(web: Web) -> None:
    web.flow("slow", SLOW)
    paused = web.post("/ui/schedules/slow/pause", {"note": "database upgrade"})
    assert paused.status_code == 303
    assert paused.headers["location"] == ("/ui/schedules?done=paused&schedule=slow#schedule-slow")
    html = web.page(paused.headers["location"])
    assert status(html) == "Paused slow."
    assert '<span class="status status-paused">paused</span>: database upgrade' in row(html, "slow")
    assert (web.engine.schedules.show("slow")["state"], row(html, "slow").count("—")) == (
        "paused", 2,  # no next slot, no last run
    )  # fmt: skip
    n = names(html).index("slow") + 1
    assert "disabled" in button(html, f"pause-{n}") and "It is paused already" in html
    assert "disabled" not in button(html, f"resume-{n}")

    resumed = web.post("/ui/schedules/slow/resume", {})
    html = web.page(resumed.headers["location"])
    assert status(html) == "Resumed slow."
    assert web.engine.schedules.show("slow")["state"] == "active"
    assert "It is not paused" in row(html, "slow")

    triggered = web.post("/ui/schedules/slow/trigger", {})
    (run,) = [r.id for r in web.engine.list_runs(name="slow")]
    html = web.page(triggered.headers["location"])
    assert status(html) == f'Triggered slow: started run <a href="/ui/runs/{run}">{run}</a>.'
    run_page = web.page(f"/ui/runs/{run}")
    assert (
        '<div><dt>Schedule</dt><dd><a href="/ui/schedules#schedule-slow">slow</a>, '
        "slot 2027-01-01 00:00:00Z</dd></div>"
    ) in run_page
    web.engine.advance("1m")
    again = web.post("/ui/schedules/slow/trigger", {})
    assert "started nothing, as its run is still open (overlap: skip)" in status(
        web.page(again.headers["location"])
    )


def test_a_run_started_by_hand_names_no_schedule(web: Web) -> None:
    web.flow("slow", SLOW)
    run = web.engine.start_flow("slow", {})
    assert "<dt>Schedule</dt>" not in web.page(f"/ui/runs/{run}")


def test_a_form_without_its_csrf_token_is_refused_and_changes_nothing(web: Web) -> None:
    web.flow("slow", SLOW)
    before = dump_store(web.engine.store)
    for action in ("pause", "resume", "trigger"):
        answer = web.post(f"/ui/schedules/slow/{action}", {}, csrf=False)
        assert answer.status_code == 403 and "CSRF token" in answer.text
    assert dump_store(web.engine.store) == before


def test_an_unknown_schedule_a_bad_note_and_a_disabled_flow_are_refused(web: Web) -> None:
    web.flow("slow", SLOW)
    before = dump_store(web.engine.store)
    unknown = web.post("/ui/schedules/slow/hourly/pause", {})
    assert unknown.status_code == 404
    assert "no schedule [slow/hourly]; [slow] has slow" in unknown.text
    bad = web.post("/ui/schedules/slow/pause", {"note": "tab\there"})
    assert bad.status_code == 422 and "one line of text" in bad.text
    assert dump_store(web.engine.store) == before
    web.engine.set_enabled("slow", False)
    html = web.page("/ui/schedules")
    n = names(html).index("slow") + 1
    assert "disabled" in button(html, f"trigger-{n}")
    assert "Its flow is disabled: enable it to start runs" in row(html, "slow")
    before = dump_store(web.engine.store)
    refused = web.post("/ui/schedules/slow/trigger", {})
    assert refused.status_code == 422 and "[slow] is disabled" in refused.text
    assert dump_store(web.engine.store) == before


def test_the_page_pages_with_the_api_cursor(web: Web) -> None:
    web.flow("nightly", NIGHTLY)
    every = names(web.page("/ui/schedules"))
    html = web.page("/ui/schedules?limit=2")
    shown = names(html)
    assert len(shown) == 2
    while (found := re.search(r'<a href="([^"]+)">Next page</a>', html)) is not None:
        html = web.page(found.group(1).replace("&amp;", "&"))
        shown += names(html)
    assert shown == every and len(every) >= 3
    web.page("/ui/schedules?cursor=nope", status=400)


def test_the_state_says_what_slot_waits_and_why_the_last_one_started_no_run(web: Web) -> None:
    web.flow("slow", SLOW.replace("overlap: skip", "overlap: buffer_one"))
    web.engine.schedules.trigger("slow")  # a run, open for 90 minutes
    web.engine.advance("1m")
    assert web.engine.schedules.trigger("slow")["buffered"] == 1
    state = row(web.page("/ui/schedules"), "slow")
    assert "a slot of 2027-01-01 00:01:00Z waits for the open run to end" in state
    with web.engine.store.tx() as tx:  # as a slot records it when its run cannot start
        found = tx.schedule("slow", lock=True)
        assert found is not None
        found.error = "flow [slow] has no version that compiles"
        tx.save_schedule(found)
    state = row(web.page("/ui/schedules"), "slow")
    assert (
        '<span class="problem">The last due slot started no run: '
        "flow [slow] has no version that compiles</span>"
    ) in state
