"""Fixtures of the web UI tests, on both store backends (``db_url``, ``db_env``).

``web``: a :class:`Web` holding a TestClient on ``create_app`` over a virtual-clock store with the
examples deployed (orders, provisioning, onboarding, reminders) and a side engine that works runs
as the server's worker would. ``make_web(environ=...)`` builds one with settings of the test's own
(a token table, say).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from procflow.runtime.engine import Engine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ORDERS = EXAMPLES / "orders" / "orders.intent"
PROVISIONING = EXAMPLES / "provisioning" / "app.intent"
ONBOARDING = EXAMPLES / "onboarding" / "onboarding.flow.yaml"
REMINDERS = EXAMPLES / "reminders" / "reminders.flow.yaml"

ADMIN_TOKEN = "admin-token-0123456789abcdef"
OPS_TOKEN = "ops-token-0123456789abcdefgh"
MANAGER_TOKEN = "manager-token-0123456789abcd"
TOKENS = f"{ADMIN_TOKEN}=ada:admin;{OPS_TOKEN}=olga:ops,operator;{MANAGER_TOKEN}=max:manager"

BREAKER = """\
flow: breaker
steps:
  - boom: { fail: "broken on purpose" }
"""

KEYED = """\
flow: keyed
inputs:
  msg: { type: string, required: true }
steps:
  - approval:
      wait_for: slack.approval
      match: { message: "{{ msg }}" }
      timeout: 24h
output: "{{ approval.status }}"
"""

_CSRF = re.compile(r'name="csrf" value="([^"]*)"')


@dataclass
class Web:
    client: TestClient
    engine: Engine
    tmp: Path

    def page(self, path: str, status: int = 200) -> str:
        answer = self.client.get(path)
        assert answer.status_code == status, answer.text
        assert "Traceback" not in answer.text
        return answer.text

    def csrf(self, path: str = "/ui/events/new") -> str:
        found = _CSRF.search(self.page(path))
        assert found is not None, "the page has a form with a CSRF token"
        return found.group(1)

    def post(self, path: str, data: dict[str, Any], *, csrf: bool = True, **kw: Any) -> Any:
        form = {**data, "csrf": self.csrf()} if csrf else data
        return self.client.post(path, data=form, follow_redirects=False, **kw)

    def flow(self, name: str, text: str) -> None:
        path = self.tmp / f"{name}.flow.yaml"
        path.write_text(text)
        self.engine.deploy(str(path))

    def work(self) -> None:
        self.engine.work(until_idle=True)


MakeWeb = Callable[..., Web]


def h1(html: str) -> str:
    found = re.findall(r"<h1>(.*?)</h1>", html, re.S)
    assert len(found) == 1, f"one h1: {found}"
    return found[0].strip()


def title(html: str) -> str:
    found = re.search(r"<title>(.*?)</title>", html, re.S)
    assert found is not None
    return found.group(1).strip()
