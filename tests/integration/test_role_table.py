"""The role table and record permissions through the Python API (``user=``), on both store
backends: every action for every kind of user, allowed or refused, and a refusal changes
nothing. The other faces make the same engine calls; their tests (``tests/server``,
``tests/acceptance``, ``tests/web``) check that each passes its caller along.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from authz_site import (
    BACKFILL_WINDOW,
    TOKENS,
    USERS,
    allowed,
    deploy_all,
    failed_run,
    refusal,
    waiting_run,
    write_project,
)
from store_dump import dump_store

import procflow
from procflow.errors import NotPermittedError, ProcflowError
from procflow.runtime.data.identity import Actor


class Site:
    """A virtual-clock engine on the test's store, the project deployed, the token table set."""

    def __init__(self, root: Path, db_url: str) -> None:
        self.project = write_project(root)
        environ = {**os.environ, "PROCFLOW_API_TOKENS": TOKENS}
        self.api = procflow.Engine.virtual(db_url, environ=environ, project_dir=str(self.project))
        self.engine = self.api._e
        deploy_all(self.engine, self.project)

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        return dump_store(self.engine.store)


@pytest.fixture
def site(tmp_path: Path, db_url: str) -> Iterator[Site]:
    made = Site(tmp_path, db_url)
    yield made
    made.api.close()


# Each action: (its wording in a refusal, a function making what it acts on, as the
# administrator, then returning the call to make as ``user``).
Prepared = Callable[[str], object]
ACTIONS: dict[str, tuple[str, Callable[[Site], Prepared]]] = {
    "deploy": (
        "deploy definitions",
        lambda s: lambda u: s.api.deploy(str(s.project / "hold.flow.yaml"), user=u),
    ),
    "enable": ("enable or disable definitions", lambda s: lambda u: s.api.enable("boom", user=u)),
    "start": ("start runs", lambda s: lambda u: s.api.runs.start("hold", user=u)),
    "send_event": (
        "send events",
        lambda s: lambda u: s.api.events.send("crm.paid", {"invoice": 7}, user=u),
    ),
    "cancel": (
        "cancel runs",
        lambda s: (lambda run_id: lambda u: s.api.runs.cancel(run_id, user=u))(
            waiting_run(s.engine)
        ),
    ),
    "retry": (
        "retry runs",
        lambda s: (lambda run_id: lambda u: s.api.runs.retry(run_id, user=u))(failed_run(s.engine)),
    ),
    "purge": ("purge runs", lambda s: lambda u: s.api.runs.purge(ended_before="0s", user=u)),
    "trigger_schedule": (
        "trigger schedules",
        lambda s: lambda u: s.api.schedules.trigger("tick", overlap="allow", user=u),
    ),
    "pause_schedule": (
        "pause or resume schedules",
        lambda s: lambda u: s.api.schedules.pause("tick", "maintenance", user=u),
    ),
    "resume_schedule": (
        "pause or resume schedules",
        lambda s: (s.api.schedules.pause("tick"), lambda u: s.api.schedules.resume("tick", user=u))[
            1
        ],
    ),
    "backfill_schedule": (
        "backfill schedules",
        lambda s: lambda u: s.api.schedules.backfill("tick", *BACKFILL_WINDOW, user=u),
    ),
}


def _paused(site: Site, call: Prepared) -> Prepared:
    """``call``, once the schedule ``tick`` is paused (by the administrator)."""
    site.api.schedules.pause("tick")
    return call


@pytest.mark.parametrize("action", list(ACTIONS))
def test_each_action_is_allowed_by_its_role_and_refused_below_it(site: Site, action: str) -> None:
    wording, prepare = ACTIONS[action]
    for user in USERS:
        call = prepare(site)
        before = site.dump()
        if allowed(user, action):
            call(user)
            continue
        with pytest.raises(NotPermittedError) as refused:
            call(user)
        assert str(refused.value) == refusal(user, action, wording)
        assert refused.value.exit_code == 1
        assert site.dump() == before, f"{user}'s refused {action} changed the store"


def test_starting_a_process_for_a_record_needs_the_operator_role(site: Site) -> None:
    note = site.api.records.create("Note", {"text": "call back"})
    before = site.dump()
    with pytest.raises(NotPermittedError, match=r"^user \[cleo\] may not start runs"):
        site.api.runs.start_for_record("Remind", "Note", note["id"], user="cleo")
    assert site.dump() == before
    assert site.api.runs.start_for_record("Remind", "Note", note["id"], user="otto")


def test_without_a_user_the_program_is_an_administrator(site: Site) -> None:
    site.api.deploy(str(site.project / "boom.flow.yaml"))
    site.api.runs.cancel(waiting_run(site.engine))
    site.api.advance("1s")
    assert site.api.runs.purge(ended_before="0s")["purged"] == 1


def test_an_actor_carries_its_own_roles_whatever_the_table_says(site: Site) -> None:
    """The HTTP face passes the caller it authenticated (a JWT's claims, say) as an Actor."""
    site.api.runs.start("hold", user=Actor("zoe", frozenset({"operator"})))
    with pytest.raises(NotPermittedError, match=r"^user \[ada\] may not deploy definitions"):
        site.api.deploy(str(site.project / "hold.flow.yaml"), user=Actor("ada"))


def test_a_run_started_by_an_operator_names_them(site: Site) -> None:
    run_id = site.api.runs.start("hold", user="otto")
    site.api.runs.cancel(run_id, user="dee")
    history = site.api.runs.show(run_id)["history"]
    by = {h["type"]: h.get("by") for h in history}
    assert (by["run.started"], by["run.cancelled"]) == ("otto", "dee")


# --- records -------------------------------------------------------------------------------------


RECORD_CASES = [
    # (entity, action, users allowed); ada, the administrator, may always.
    ("Order", "read", {"cleo", "ada"}),
    ("Order", "create", {"cleo", "ada"}),
    ("Order", "update", {"ada"}),
    ("Order", "delete", {"ada"}),
    ("Note", "read", set(USERS)),
    ("Note", "create", {"otto", "dee", "ada"}),
    ("Note", "update", {"otto", "dee", "ada"}),
    ("Note", "delete", {"otto", "dee", "ada"}),
]


def _record_call(site: Site, entity: str, action: str) -> Callable[[str], object]:
    field = "title" if entity == "Order" else "text"
    made = site.api.records.create(entity, {field: "x"})
    calls: dict[str, Callable[[str], object]] = {
        "read": lambda u: site.api.records.get(entity, made["id"], user=u),
        "create": lambda u: site.api.records.create(entity, {field: "y"}, user=u),
        "update": lambda u: site.api.records.update(entity, made["id"], {field: "z"}, user=u),
        "delete": lambda u: site.api.records.delete(entity, made["id"], user=u),
    }
    return calls[action]


@pytest.mark.parametrize(("entity", "action", "who"), RECORD_CASES)
def test_records_follow_the_permissions_block(
    site: Site, entity: str, action: str, who: set[str]
) -> None:
    for user in USERS:
        call = _record_call(site, entity, action)
        before = site.dump()
        if user in who:
            call(user)
            continue
        with pytest.raises(NotPermittedError) as refused:
            call(user)
        assert site.dump() == before
        assert refused.value.entity == entity


def test_a_record_refusal_names_the_roles_that_may(site: Site) -> None:
    with pytest.raises(NotPermittedError) as refused:
        site.api.records.list("Order", user="otto")
    assert str(refused.value) == (
        "user [otto] may not read [Order] records: that needs one of the roles "
        "[Clerk, auditor, admin]; [otto] has [operator]"
    )
    with pytest.raises(NotPermittedError) as refused:
        site.api.records.update("Order", 1, {"title": "t"}, user="cleo")
    assert str(refused.value) == (
        "user [cleo] may not update [Order] records: that needs the role [admin]; "
        "[cleo] has [Clerk]"
    )
    with pytest.raises(NotPermittedError) as refused:
        site.api.records.create("Note", {"text": "t"}, user="vic")
    assert str(refused.value) == (
        "user [vic] may not create [Note] records: that needs the role [operator] "
        "(or one above it); [vic] has no role"
    )


def test_records_pages_follow_the_permissions_too(site: Site) -> None:
    site.api.records.create("Order", {"title": "a"}, user="cleo")
    assert [r["title"] for r in site.api.records.page("Order", user="cleo").items] == ["a"]
    with pytest.raises(NotPermittedError):
        site.api.records.page("Order", user="vic")


def test_runs_write_records_as_the_engine(site: Site) -> None:
    """cleo may create orders but not update them; the run her order starts updates it, as the
    engine, not as her."""
    order = site.api.records.create("Order", {"title": "mine"}, user="cleo")
    site.api.work()
    [run] = site.api.runs.for_record("Order", order["id"])
    assert run["status"] == "completed"
    assert site.api.records.get("Order", order["id"], user="cleo")["title"] == "stamped"


def test_an_unknown_entity_is_unknown_before_it_is_refused(site: Site) -> None:
    with pytest.raises(ProcflowError, match="Oder") as refused:
        site.api.records.get("Oder", 1, user="vic")
    assert not isinstance(refused.value, NotPermittedError)
