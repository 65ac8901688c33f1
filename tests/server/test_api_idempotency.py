"""``Idempotency-Key`` on the three create routes, on both store backends: a repeat with the same
key and body answers the first response and makes nothing; another body (or route) with the
key is a 422 that changes nothing; keys belong to their caller, last 24 hours, and are not
spent by a request that failed. Two requests sent at once with one key still make one run.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import httpx
import pytest
from api_site import MakeSite, Site
from serving import ADMIN_TOKEN, OPS_TOKEN, TOKENS, bearer

from procflow.runtime.clock import system_now
from procflow.server import idempotency
from procflow.server.api import runs

KEY = "order-4711-attempt"

CREATES = {
    "flow": ("/flows/greet/runs", {"inputs": {"who": "ann"}}, {"inputs": {"who": "bob"}}),
    "process": (
        "/processes/Manual/runs",
        {"record": {"entity": "Ticket", "id": 1}},
        {"record": {"entity": "Ticket", "id": 2}},
    ),
    "record": ("/entities/Order", {"title": "desk"}, {"title": "lamp"}),
}


def with_tickets(site: Site) -> Site:
    for subject in ("printer", "coffee"):
        site.client.post("/entities/Ticket", json={"subject": subject})
    return site


def post(site: Site, path: str, body: Any, key: str = KEY, **headers: str) -> httpx.Response:
    return site.client.post(path, json=body, headers={"Idempotency-Key": key, **headers})


def counts(site: Site) -> tuple[int, int]:
    """(runs, Order records) in the store."""
    return len(site.cli("runs", "list")), len(site.cli("records", "list", "Order"))


@pytest.mark.parametrize("kind", list(CREATES))
def test_a_repeat_with_the_same_key_and_body_answers_the_first_response(
    site: Site, kind: str
) -> None:
    path, body, _ = CREATES[kind]
    with_tickets(site)
    before = counts(site)
    first = post(site, path, body)
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    made = counts(site)
    again = post(site, path, body)
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    assert counts(site) == made != before  # made once, not twice


def test_without_a_key_each_request_makes_its_own_run(site: Site) -> None:
    path, body, _ = CREATES["flow"]
    ids = {site.client.post(path, json=body).json()["id"] for _ in range(2)}
    assert len(ids) == 2


def test_the_same_body_written_differently_is_the_same_body(site: Site) -> None:
    first = post(site, "/entities/Order", {"title": "desk", "total": 2})
    spaced = b'{ "total" : 2,\n  "title": "desk" }'
    again = site.client.post(
        "/entities/Order",
        content=spaced,
        headers={"Idempotency-Key": KEY, "content-type": "application/json"},
    )
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"


@pytest.mark.parametrize("kind", list(CREATES))
def test_the_key_with_another_body_is_a_422_that_changes_nothing(site: Site, kind: str) -> None:
    path, body, other = CREATES[kind]
    with_tickets(site)
    post(site, path, body)
    site.refused(
        "POST", path, 422, field="Idempotency-Key", detail="another body",
        json=other, headers={"Idempotency-Key": KEY},
    )  # fmt: skip


def test_the_key_on_another_route_is_a_422(site: Site) -> None:
    post(site, "/flows/greet/runs", {"inputs": {"who": "ann"}})
    site.refused(
        "POST", "/flows/quick/runs", 422, field="Idempotency-Key",
        detail="another request (POST /flows/greet/runs)",
        json={"inputs": {"who": "ann"}}, headers={"Idempotency-Key": KEY},
    )  # fmt: skip


def test_keys_belong_to_their_caller(make_site: MakeSite) -> None:
    site = make_site({"PROCFLOW_API_TOKENS": TOKENS})
    path, body, _ = CREATES["flow"]
    ada = post(site, path, body, **bearer(ADMIN_TOKEN))
    olga = post(site, path, body, **bearer(OPS_TOKEN))
    assert ada.status_code == olga.status_code == 201
    assert ada.json()["id"] != olga.json()["id"]
    assert "idempotent-replayed" not in olga.headers


def test_a_key_is_kept_24_hours_then_pruned(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    path, body, _ = CREATES["flow"]
    first = post(site, path, body)
    day = 24 * 3600 * 1_000_000
    monkeypatch.setattr(idempotency, "system_now", lambda: system_now() + day - 60_000_000)
    assert post(site, path, body).headers.get("idempotent-replayed") == "true"
    monkeypatch.setattr(idempotency, "system_now", lambda: system_now() + day + 60_000_000)
    later = post(site, path, body)
    assert later.status_code == 201 and "idempotent-replayed" not in later.headers
    assert later.json()["id"] != first.json()["id"]
    rows = site.engine.store.read().c.execute("SELECT count(*) FROM idempotency").fetchone()
    assert rows[0] == 1  # the expired key was pruned, the new one kept


def test_a_request_that_failed_does_not_spend_its_key(site: Site) -> None:
    path = "/flows/greet/runs"
    site.refused("POST", path, 422, field="who", json={"inputs": {}},
                 headers={"Idempotency-Key": KEY})  # fmt: skip
    fixed = post(site, path, {"inputs": {"who": "ann"}})
    assert fixed.status_code == 201 and "idempotent-replayed" not in fixed.headers


@pytest.mark.parametrize("key", ["", "has space", "é", "k" * 256])
def test_a_key_that_is_not_1_to_255_visible_ascii_characters_is_a_400(site: Site, key: str) -> None:
    path, body, _ = CREATES["flow"]
    headers = {"Idempotency-Key": key.encode()}  # bytes: sent as they are
    site.refused("POST", path, 400, field="Idempotency-Key", json=body, headers=headers)


def test_the_key_the_document_allows_is_the_key_the_server_takes(site: Site) -> None:
    """The document's pattern for the header is the server's own check (it said only 1 to 255
    characters, and a key with a space, or not ASCII, was a 400 it did not announce)."""
    pattern = re.compile(idempotency.HEADER_PARAM["schema"]["pattern"])
    path, body, _ = CREATES["flow"]
    for key in ("!", "~" * 255, "a-b_c.d:e/f"):
        assert pattern.fullmatch(key)
        assert post(site, path, body, key).status_code == 201, key
    for key in ("", "has space", "tab\tin", "é", "k" * 256):
        assert not pattern.fullmatch(key), key
        headers = {"Idempotency-Key": key.encode()}
        site.refused("POST", path, 400, field="Idempotency-Key", json=body, headers=headers)


def test_two_requests_sent_at_once_with_one_key_make_one_run(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, body, _ = CREATES["flow"]
    started = runs._started

    def slowly(call: Any, run_id: str) -> Any:
        time.sleep(0.2)  # inside the request's transaction: the others arrive meanwhile
        return started(call, run_id)

    monkeypatch.setattr(runs, "_started", slowly)
    answers: list[httpx.Response] = []
    gate = threading.Barrier(4)

    def send() -> None:
        gate.wait()
        answers.append(post(site, path, body))

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [201] * 4
    assert len({a.json()["id"] for a in answers}) == 1
    assert sum(a.headers.get("idempotent-replayed") == "true" for a in answers) == 3
    assert len(site.cli("runs", "list")) == 1
