"""A small flow project for the operations tests: runs that complete, fail, wait on a timer, an
event or a retry, on a virtual-clock engine over the test's store."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from procflow.runtime.engine import Engine

SECRET = "s3cr3t-Ops-Zq9-value"  # what the secret() of the flows reads: never in a log

FLOWS = {
    "done": """
        flow: done
        steps:
          - one: { log.write: { message: "key {{ secret('PF_OPS_SECRET') }}" } }
          - two: { log.write: { message: "two" } }
    """,
    "broken": """
        flow: broken
        steps:
          - boom: { fail: "refused" }
    """,
    "sleepy": """
        flow: sleepy
        steps:
          - nap: { wait: { for: 1h } }
          - after: { log.write: { message: "awake" } }
    """,
    "eventful": """
        flow: eventful
        inputs:
          order: { type: string, required: true }
        steps:
          - approval:
              wait_for: slack.approval
              match: { message: "{{ order }}" }
              timeout: 1d
    """,
    "flaky": """
        flow: flaky
        steps:
          - ping:
              log.write: { message: "{{ secret('PF_OPS_ABSENT') }}" }
              retry: { count: 2, every: 10m }
    """,
}


@dataclass
class Site:
    """The flows deployed on a virtual-clock store, and the runs started on it."""

    engine: Engine
    dir: Path
    runs: dict[str, list[str]] = field(default_factory=dict)

    def start(self, name: str, count: int = 1, **inputs: str) -> list[str]:
        started = [self.engine.start_flow(name, dict(inputs)) for _ in range(count)]
        self.runs.setdefault(name, []).extend(started)
        return started

    def all_runs(self) -> list[str]:
        return [run for runs in self.runs.values() for run in runs]


def make_site(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Site:
    project = tmp_path / "project"
    project.mkdir()
    for name, text in FLOWS.items():
        (project / f"{name}.flow.yaml").write_text(textwrap.dedent(text))
    engine = Engine.virtual(db_url, environ={**db_env, "PF_OPS_SECRET": SECRET})
    for name in FLOWS:
        engine.deploy(str(project / f"{name}.flow.yaml"))
    return Site(engine, project)
