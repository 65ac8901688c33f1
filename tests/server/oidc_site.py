"""A procflow server taking the test identity provider's JWTs, for the OpenID Connect tests.

``make_oidc(**settings)`` builds a TestClient on ``create_app`` over a SQLite store (these tests
are about the HTTP face: one backend is enough) with the provider's issuer and audience, the
token table of ``serving.py`` unless ``PROCFLOW_API_TOKENS=""``, and ``settings`` on top. The
key cache runs on a :class:`Clock` of the test's own, so the once-a-minute rule needs no
sleeping. A side engine on the same store works runs, as the server's worker would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from oidc_provider import Provider
from serving import TOKENS
from starlette.testclient import TestClient

from procflow.config import Config
from procflow.runtime.data.identity import TokenTable
from procflow.runtime.engine import Engine
from procflow.server.app import create_app
from procflow.server.oidc import OidcVerifier
from procflow.server.state import Engines, ServerState

# Claims are reviewed by the role `reviewer`; `greet` waits a day (a run to cancel).
REVIEWS = """\
name: reviews
entities:
  - name: Claim
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
      - { name: note, type: string, length: 50 }
forms:
  - { name: Review, forEntity: Claim, fields: [note], actions: [approve, reject] }
processes:
  - name: Review
    trigger: { onCreate: Claim }
    steps:
      - { name: review, kind: userTask, args: { assignee: reviewer, form: Review } }
"""

GREET = """\
flow: greet
steps:
  - later:
      wait: { for: 1d }
"""


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class OidcSite:
    client: TestClient
    state: ServerState
    engine: Engine
    clock: Clock

    @property
    def verifier(self) -> OidcVerifier:
        assert self.state.oidc is not None
        return self.state.oidc

    def get(self, path: str, token: str, **kw: Any) -> Any:
        return self.client.get(path, headers={"Authorization": f"Bearer {token}"}, **kw)

    def post(self, path: str, token: str, **kw: Any) -> Any:
        return self.client.post(path, headers={"Authorization": f"Bearer {token}"}, **kw)

    def review_task(self) -> int:
        """A new Claim's review task (for the role `reviewer`), open: its id."""
        record = self.engine.create_record("Claim", {"title": "roof"})
        self.engine.work(until_idle=True)
        [task] = [t for t in self.engine.list_tasks() if t["record"]["id"] == record["id"]]
        return int(task["id"])


MakeOidc = Callable[..., OidcSite]


@pytest.fixture
def make_oidc(tmp_path: Path, provider: Provider) -> Iterator[MakeOidc]:
    with ExitStack() as stack:
        url = f"sqlite:///{tmp_path / 'oidc.db'}"
        engine = Engine.virtual(url)
        stack.callback(engine.close)
        for name, text in {"reviews.intent": REVIEWS, "greet.flow.yaml": GREET}.items():
            (tmp_path / name).write_text(text)
            engine.deploy(str(tmp_path / name))

        def make(**settings: str) -> OidcSite:
            environ = {"PROCFLOW_API_TOKENS": TOKENS, **provider.settings(), **settings}
            clock = Clock()
            # ServerState.of, with the test's clock given to the key cache.
            config = Config.from_environ(environ)
            oidc = OidcVerifier.from_config(config, clock)
            engines = Engines(url, None, environ)
            state = ServerState(config, engines, TokenTable.from_config(config), environ, oidc)
            client = stack.enter_context(TestClient(create_app(state)))
            return OidcSite(client, state, engine, clock)

        yield make
