"""Keyset paging of every list route, on both store backends: ``?limit=`` (default 50, at most
500) and ``?cursor=``, answered as ``{items, next_cursor}``, newest first, with no item skipped
or repeated while items are added between pages; a bad limit or cursor is a 400 naming it.
Each page is one index range (checked on the query plans), and a store from before paging
(schema version 3) is migrated to it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from api_site import GREET, Site

from procflow.errors import UsageError
from procflow.store.store import SCHEMA_VERSION, Store


def add_run(site: Site, n: int) -> None:
    site.start()


def add_task(site: Site, n: int) -> None:
    site.order(f"order {n}")
    site.work()


def add_record(site: Site, n: int) -> None:
    site.order(f"order {n}")


def add_message(site: Site, n: int) -> None:
    site.client.post("/entities/Ticket", json={"subject": f"ticket {n}"})
    site.work()


def add_definition(site: Site, n: int) -> None:
    assert site.deploy(f"f{n}.flow.yaml", GREET.replace("greet", f"f{n}")).status_code == 201


# (route, how to add one item, the item's key, how keys sort newest first)
LISTS: dict[str, tuple[str, Callable[[Site, int], None], str]] = {
    "runs": ("/runs", add_run, "id"),
    "tasks": ("/tasks", add_task, "id"),
    "records": ("/entities/Order", add_record, "id"),
    "outbox": ("/outbox", add_message, "id"),
    "definitions": ("/definitions", add_definition, "name"),
}


def walk(site: Site, path: str, limit: int, between: Callable[[], None]) -> list[dict[str, Any]]:
    """Every item of ``path``, ``limit`` a page, calling ``between()`` after each page."""
    items: list[dict[str, Any]] = []
    url = f"{path}?limit={limit}"
    while True:
        page = site.client.get(url).json()
        assert set(page) == {"items", "next_cursor"}
        assert len(page["items"]) <= limit
        items += page["items"]
        if page["next_cursor"] is None:
            return items
        between()
        url = f"{path}?limit={limit}&cursor={page['next_cursor']}"


@pytest.mark.parametrize("name", list(LISTS))
def test_paging_newest_first_skips_and_repeats_nothing_while_items_are_added(
    site: Site, name: str
) -> None:
    path, add, key = LISTS[name]
    for n in range(5):
        add(site, n)
    everything = site.client.get(f"{path}?limit=500").json()["items"]
    assert len(everything) >= 5
    added = iter(range(100, 200))
    paged = walk(site, path, 2, lambda: add(site, next(added)))
    assert [i[key] for i in paged] == [i[key] for i in everything]  # none skipped, none twice
    assert site.client.get(f"{path}?limit=500").json()["items"][-len(everything) :] == everything
    if key == "id":  # ids grow with age: newest first is descending
        assert [i["id"] for i in paged] == sorted((i["id"] for i in paged), reverse=True)


def test_definitions_are_newest_first_by_their_first_deploy(site: Site) -> None:
    names = [d["name"] for d in site.client.get("/definitions").json()["items"]]
    assert names == ["quick", "doomed", "greet", "Manual", "Announce", "Approve"]
    site.deploy("greet.flow.yaml", GREET + "# version 2\n")  # a redeploy does not move it
    again = [d["name"] for d in site.client.get("/definitions").json()["items"]]
    assert again == names


def test_a_filtered_list_pages_through_its_matches_only(site: Site) -> None:
    waiting = [site.start() for _ in range(3)]
    failed = [site.start("doomed") for _ in range(2)]
    site.work()
    paged = walk(site, "/runs", 1, lambda: None)
    assert len(paged) == 5
    first = site.client.get("/runs?status=waiting&limit=2").json()
    second = site.client.get(f"/runs?status=waiting&limit=2&cursor={first['next_cursor']}")
    ids = [r["id"] for r in first["items"] + second.json()["items"]]
    assert ids == sorted(waiting, reverse=True) and second.json()["next_cursor"] is None
    doomed = site.client.get("/runs?name=doomed&limit=1").json()
    assert [r["id"] for r in doomed["items"]] == [max(failed)]


def test_a_page_holds_50_items_by_default_and_at_most_500(site: Site) -> None:
    for _ in range(55):
        site.engine.start_flow("greet", {"who": "x"})
    first = site.client.get("/runs").json()
    assert len(first["items"]) == 50 and first["next_cursor"] is not None
    rest = site.client.get(f"/runs?cursor={first['next_cursor']}").json()
    assert len(rest["items"]) == 5 and rest["next_cursor"] is None
    assert len(site.client.get("/runs?limit=500").json()["items"]) == 55
    assert site.client.get("/runs?limit=55").json()["next_cursor"] is None
    assert site.client.get("/runs?limit=54").json()["next_cursor"] is not None


@pytest.mark.parametrize("path", [route for route, _, _ in LISTS.values()])
@pytest.mark.parametrize("limit", ["0", "501", "-1", "1.5", "ten", "０１"])
def test_a_bad_limit_is_a_400_naming_it(site: Site, path: str, limit: str) -> None:
    site.refused("GET", f"{path}?limit={limit}", 400, field="limit", detail="from 1 to 500")


def cursor_of(value: Any) -> str:
    raw = json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def bad_cursors(list_name: str, text_key: bool) -> dict[str, str]:
    """Cursors the list ``list_name`` never gave out, by what is wrong with them."""
    return {
        "not base64": "!!!",
        "not JSON": base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        "no list name": cursor_of(5),
        "another list's": cursor_of(["elsewhere", 5]),
        "a key of the wrong type": cursor_of([list_name, 7 if text_key else "7"]),
        "an array key": cursor_of([list_name, [1]]),
        "a boolean key": cursor_of([list_name, True]),
        "a number past 64 bits": cursor_of([list_name, 2**64]),
        "text with a NUL": cursor_of([list_name, "01a2\x00"]),
        "text with a lone surrogate": cursor_of([list_name, "01a2\ud800"]),
        "too long": "A" * 600,
    }


@pytest.mark.parametrize("name", list(LISTS))
@pytest.mark.parametrize("bad", list(bad_cursors("x", False)))
def test_a_cursor_this_list_did_not_give_out_is_a_400_naming_it(
    site: Site, name: str, bad: str
) -> None:
    path, add, _ = LISTS[name]
    add(site, 0)
    cursor = bad_cursors(name, name == "runs")[bad]
    site.refused("GET", f"{path}?cursor={cursor}", 400, field="cursor", detail="cursor")


def test_a_cursor_of_one_list_is_refused_by_another(site: Site) -> None:
    for _ in range(3):
        site.order()
    cursor = site.client.get("/entities/Order?limit=1").json()["next_cursor"]
    site.refused("GET", f"/outbox?cursor={cursor}", 400, field="cursor")
    site.refused("GET", f"/tasks?cursor={cursor}", 400, field="cursor")
    assert site.client.get(f"/entities/Order?cursor={cursor}").status_code == 200


# --- every page is one index range -------------------------------------------------------------

_RUNS = ("runs_by_status_id", "runs_by_name_id")
_TASKS = ("tasks_open", "tasks_by_status_id")
# A page's query, and the indexes that serve it in key order (the planner picks one).
PAGE_QUERIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "runs of a status": (
        "SELECT id FROM runs WHERE status='waiting' AND id<'z' ORDER BY id DESC LIMIT 3", _RUNS
    ),
    "runs of a definition": (
        "SELECT id FROM runs WHERE name='greet' AND id<'z' ORDER BY id DESC LIMIT 3", _RUNS
    ),
    "open tasks": ("SELECT id FROM tasks WHERE status='open' AND id<9 ORDER BY id DESC LIMIT 3",
                   _TASKS),
    "open tasks of an assignee": (
        "SELECT id FROM tasks WHERE status='open' AND assignee='sales' AND id<9 "
        "ORDER BY id DESC LIMIT 3", _TASKS,
    ),
    "records": ("SELECT id FROM records WHERE entity='Order' AND id<9 ORDER BY id DESC LIMIT 3",
                ("records_pkey", "sqlite_autoindex_records_1")),
    "outbox": ("SELECT id FROM outbox WHERE id<9 ORDER BY id DESC LIMIT 3",
               ("outbox_pkey", "INTEGER PRIMARY KEY")),
    "definitions": (
        "SELECT name FROM definitions WHERE first_version<9 ORDER BY first_version DESC LIMIT 3",
        ("definitions_by_first_version",),
    ),
}  # fmt: skip


def plan(store: Store, sql: str) -> str:
    if store.dialect == "sqlite":
        rows = store.conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
        return "\n".join(str(r[-1]) for r in rows)
    # A test database is reused (tests/conftest.py): statistics an earlier test left (thousands
    # of rows, analysed) would weigh the plans; these are read off the tables as they are now.
    store.conn.execute("ANALYZE")
    store.conn.execute("SET enable_seqscan = off")  # tiny tables: ask what it can do
    # On an empty table an index in key order and another index plus a sort cost alike, and the
    # planner's pick flipped between runs; with sorts priced out it takes the ordered index when
    # there is one (without one, the plan still sorts, and the test fails as it should).
    store.conn.execute("SET enable_sort = off")
    return "\n".join(str(r[0]) for r in store.conn.execute(f"EXPLAIN {sql}").fetchall())


@pytest.mark.parametrize("page", list(PAGE_QUERIES))
def test_each_page_is_a_range_of_an_index_in_key_order_without_a_sort(
    db_url: str, page: str
) -> None:
    sql, indexes = PAGE_QUERIES[page]
    store = Store(db_url, create=False)
    try:
        shown = plan(store, sql)
    finally:
        store.close()
    assert any(index in shown for index in indexes), shown
    assert "Sort" not in shown and "TEMP B-TREE" not in shown and "SCAN" not in shown, shown


# --- a store from before paging ------------------------------------------------------------------


def test_a_version_3_store_is_migrated_with_its_definitions_in_first_deploy_order(
    db_factory: Any,
) -> None:
    url = db_factory("old", empty=True)
    store = Store(url)
    try:
        with store.tx() as tx:
            for version in (1, 2, 3):
                store.backend.run_schema_script(version)
            tx.meta_set("schema_version", "3")
            tx.meta_set("clock", "system")
            for number, name in enumerate(["b", "a", "b"], start=1):
                tx.c.execute(
                    "INSERT INTO versions(name, version, dialect, hash, file, project_dir, "
                    "source, created_at) VALUES (?, ?, 'flow', 'h', 'f', 'p', 's', 0)",
                    (name, number),
                )
                tx.c.execute(
                    "INSERT INTO definitions(name, dialect, enabled, latest) VALUES "
                    "(?, 'flow', 1, ?) ON CONFLICT(name) DO UPDATE SET latest=excluded.latest",
                    (name, number),
                )
        assert store.upgrade() == (3, SCHEMA_VERSION)
        rows = store.read().definitions_before(None, 10)
        assert [(r[0], r[4]) for r in rows] == [("a", 2), ("b", 1)]
        assert store.read().idempotent_response("local", "k") is None  # the table is there
    finally:
        store.close()


def test_the_engines_pages_take_1_to_500_items_and_hand_back_the_next_key(site: Site) -> None:
    ids = sorted((site.start() for _ in range(3)), reverse=True)  # newest first: ids descend
    first = site.engine.runs_page(limit=2)
    assert [r["id"] for r in first.items] == ids[:2] and first.next_key == ids[1]
    rest = site.engine.runs_page(limit=2, before=first.next_key)
    assert [r["id"] for r in rest.items] == ids[2:] and rest.next_key is None
    for limit in (0, 501):
        with pytest.raises(UsageError, match=f"a page holds from 1 to 500 items, not {limit}"):
            site.engine.outbox_page(limit=limit)
