"""A store with something in it, served through the real ASGI app, for the resource route tests
(``test_api_resources.py``, ``test_api_paging.py``, ``test_api_idempotency.py``).

:class:`Site` holds a TestClient on a virtual-clock store with the shop intent and three flows
deployed over HTTP, a side engine that works runs as a worker would (the TestClient app has no
worker), the ``procflow`` command run in-process on the same store (to compare JSON shapes), and
a dump of every table (to show a refused request changed nothing).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from serving import ADMIN_TOKEN, bearer
from starlette.testclient import TestClient
from store_dump import dump

from procflow.cli import _run
from procflow.runtime.engine import Engine

PROBLEM = "application/problem+json"
YAML = {"content-type": "application/yaml"}

# Orders are reviewed by the role `sales` through a form (approve | reject, may write `note`);
# a done order tells ops by mail (kept in the outbox: no SMTP). `Manual` starts by hand.
INTENT = """\
name: shop
entities:
  - name: Status
    function: Setting
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, required: true, length: 50 }
  - name: Order
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 200 }
      - { name: total, type: integer }
      - { name: note, type: string, length: 200 }
    relations:
      - { name: Progress, kind: manyToOne, to: Status, function: EntityStatus, init: New }
  - name: Ticket
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: subject, type: string, required: true, length: 200 }
seeds:
  - name: statuses
    entity: Status
    rows: [ { id: 1, name: New }, { id: 2, name: Done }, { id: 3, name: Rejected } ]
forms:
  - name: Review
    forEntity: Order
    fields: [note]
    actions: [approve, reject]
processes:
  - name: Approve
    trigger: { onCreate: Order }
    steps:
      - { name: check, kind: userTask, args: { assignee: sales, form: Review } }
      - name: outcome
        kind: decision
        args: { if: "action == 'approve'", then: finish, else: refuse }
      - name: finish
        kind: serviceTask
        args: { setRelationField: Progress, value: Done, next: end }
      - name: refuse
        kind: serviceTask
        args: { setRelationField: Progress, value: Rejected, next: end }
  - name: Announce
    trigger: { onCreate: Ticket }
    steps:
      - name: tell
        kind: serviceTask
        args:
          notify: { to: ops@example.com, subject: "Ticket {id}", body: "{subject}" }
          next: end
  - name: Manual
    steps:
      - { name: ask, kind: userTask, args: { assignee: ann } }
"""

GREET = """\
flow: greet
inputs:
  who: { type: string, required: true }
  times: { type: integer }
steps:
  - later:
      wait: { for: 1d }
"""

DOOMED = """\
flow: doomed
steps:
  - boom:
      fail: "it always fails"
"""

QUICK = """\
flow: quick
steps:
  - done:
      set: { ok: true }
"""

DEFINITIONS = {"shop.intent": INTENT, "greet.flow.yaml": GREET, "doomed.flow.yaml": DOOMED,
               "quick.flow.yaml": QUICK}  # fmt: skip

Dump = dict[str, list[tuple[Any, ...]]]


@dataclass
class Site:
    url: str
    client: TestClient
    engine: Engine  # works runs, as the server's worker would
    project: Path

    def deploy(self, filename: str, text: str) -> httpx.Response:
        return self.client.post(f"/definitions?filename={filename}", content=text, headers=YAML)

    def work(self) -> None:
        self.engine.work(until_idle=True)

    def start(self, flow: str = "greet", inputs: dict[str, Any] | None = None) -> str:
        """A new run of ``flow`` (greet: for ``who`` x unless ``inputs``); its id."""
        given = inputs if inputs is not None else {"who": "x"} if flow == "greet" else {}
        done = self.client.post(f"/flows/{flow}/runs", json={"inputs": given})
        assert done.status_code == 201, done.text
        return str(done.json()["id"])

    def order(self, title: str = "desk", **fields: Any) -> dict[str, Any]:
        """A new Order (whose Approve run opens a task for `sales` once worked)."""
        done = self.client.post("/entities/Order", json={"title": title, **fields})
        assert done.status_code == 201, done.text
        return dict(done.json())

    def cli(self, *args: str) -> Any:
        """``procflow ARGS --db URL --json`` in this process: its JSON output."""
        runner = CliRunner()
        with runner.isolation() as (out, err, _):
            code = _run([*args, "--db", self.url, "--json"])
        assert code == 0, err.getvalue().decode()
        return json.loads(out.getvalue().decode())

    def dump(self) -> Dump:
        return dump(self.url)

    def refused(
        self,
        method: str,
        path: str,
        status: int,
        *,
        field: str | None = None,
        detail: str = "",
        **request: Any,
    ) -> dict[str, Any]:
        """``METHOD path`` (``request``: the client's keyword arguments) is refused with
        ``status`` (see :func:`assert_problem`), and changes nothing in the store."""
        before = self.dump()
        answer = self.client.request(method, path, **request)
        body = assert_problem(answer, status, field=field, detail=detail)
        assert self.dump() == before
        return body


def assert_problem(
    response: httpx.Response, status: int, *, field: str | None = None, detail: str = ""
) -> dict[str, Any]:
    """``response`` is an RFC 9457 problem with ``status``, naming ``field`` when given, its
    detail containing ``detail``; returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = dict(response.json())
    assert set(body) - {"errors"} == {"type", "title", "status", "detail"}
    assert body["status"] == status and detail in body["detail"], body
    assert "Traceback" not in response.text
    if field is not None:
        assert field in [e["field"] for e in body["errors"]], body
    return body


MakeSite = Callable[..., Site]


@pytest.fixture
def make_site(
    db_url: str, db_env: dict[str, str], make_client: Any, tmp_path: Path
) -> Iterator[MakeSite]:
    """``make_site(environ=None, deploy=True)``: a :class:`Site` on the test's store (a virtual
    clock), the definitions deployed over HTTP when ``deploy``."""
    engines: list[Engine] = []

    def make(environ: dict[str, str] | None = None, deploy: bool = True) -> Site:
        if not engines:
            engines.append(Engine.virtual(db_url, project_dir=str(tmp_path), environ=db_env))
        client = make_client(environ=environ, project=str(tmp_path))
        site = Site(db_url, client, engines[0], tmp_path)
        headers = _admin(environ)
        for name, text in DEFINITIONS.items() if deploy else ():
            done = client.post(
                f"/definitions?filename={name}", content=text, headers={**YAML, **headers}
            )
            assert done.status_code in (200, 201), done.text
        return site

    yield make
    for engine in engines:
        engine.close()


def _admin(environ: dict[str, str] | None) -> dict[str, str]:
    return bearer(ADMIN_TOKEN) if environ and "PROCFLOW_API_TOKENS" in environ else {}


@pytest.fixture
def site(make_site: MakeSite) -> Site:
    """A :class:`Site` without a token table: every caller is ``local``, an administrator."""
    return make_site()
