"""What the `procflow test` tests share: paths, the probe flow, a project folder to write into."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

PROBE_FLOW = """\
flow: probe
inputs:
  who: { type: string, default: "@ada" }
steps:
  - post:
      slack.post: { channel: "{{ who }}", text: "hi" }
      timeout: 10s
      retry: { count: 1, every: 30s }
  - answer:
      wait_for: slack.approval
      match: { message: "{{ post.ts }}" }
      timeout: 1h
output:
  ts: "{{ post.ts }}"
  approved: "{{ answer.event.approved | default(false) }}"
"""


@dataclass
class Project:
    root: Path

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path


@dataclass
class Ran:
    code: int
    out: str
    err: str


def by_name(results: list[Any]) -> dict[str, Any]:
    """Results by scenario name; each failure shown when a test expects a pass."""
    return {r.name: r for r in results}


def assert_all_pass(results: list[Any]) -> None:
    failed = {r.name: r.failure for r in results if not r.passed}
    assert not failed, failed
