"""`procflow ...` run in-process, through the same error handling as the installed command
(:func:`procflow.cli._run`), for tests that try hundreds of inputs: a subprocess each would take
seconds. Also a dump of every table of a store, to show a refused command changed nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from click.testing import CliRunner
from store_dump import dump as dump  # the tests take it from here

from procflow.cli import _run

# A store's content for the tests: an intent with a user task and a trigger-less process, and a
# flow with inputs that waits a day.
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
    relations:
      - { name: Progress, kind: manyToOne, to: Status, function: EntityStatus, init: New }
seeds:
  - name: statuses
    entity: Status
    rows: [ { id: 1, name: New }, { id: 2, name: Done } ]
processes:
  - name: Approve
    trigger: { onCreate: Order }
    steps:
      - { name: check, kind: userTask, args: { assignee: bob } }
      - { name: finish, kind: serviceTask, args: { setRelationField: Progress, value: Done } }
  - name: Manual
    steps:
      - { name: ask, kind: userTask, args: { assignee: ann } }
"""

FLOW = """\
flow: greet
inputs:
  who: { type: string, required: true }
  extra: { type: object }
steps:
  - later:
      wait: { for: 1d }
"""


# What a line on stderr may be besides `error: ...`: a definition problem, and validate's summary.
DIAGNOSTIC = re.compile(r"^.+:\d+:\d+: (error|warning): .+$")
SUMMARY = re.compile(r"^checked \d+ files?: \d+ error\(s\), \d+ warning\(s\)$")


@dataclass(frozen=True)
class Outcome:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stderr.splitlines()

    def problems(self, *, diagnostics: bool = False) -> list[str]:
        """Why this is not a clean refusal: exit 1 or 2, no traceback, no bug caught by the
        last line of defence, and one line on stderr (``diagnostics``: one line per definition
        problem, plus validate's summary)."""
        found = []
        if self.code not in (1, 2):
            found.append(f"exit {self.code}, wanted 1 or 2")
        if "Traceback" in self.stderr or "Traceback" in self.stdout:
            found.append("a traceback")
        if "a bug in procflow" in self.stderr:
            found.append("an unexpected exception (caught only by the last line of defence)")
        lines = self.lines
        if diagnostics:
            odd = [
                line
                for line in lines
                if not (line.startswith("error: ") or DIAGNOSTIC.match(line) or SUMMARY.match(line))
            ]
            if odd or not (lines or self.stdout.strip()):
                found.append(f"stderr lines that are not errors or diagnostics: {odd or lines}")
        elif len(lines) != 1 or not lines[0].startswith("error: "):
            found.append(f"{len(lines)} lines on stderr, wanted one `error: ...` line")
        return found

    def report(self, problems: list[str]) -> str:
        shown = " ".join(a if len(a) <= 80 else f"{a[:77]}..." for a in self.args)
        return (
            f"procflow {shown}: {'; '.join(problems)}\n"
            f"    stderr: {self.stderr[:600]!r}\n    stdout: {self.stdout[:200]!r}"
        )


def invoke(*args: str) -> Outcome:
    """``procflow ARGS`` in this process: exit code, stdout and stderr as a user sees them."""
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        code = _run(list(args))
    return Outcome(
        args, code, out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace")
    )


def changes(
    before: dict[str, list[tuple[Any, ...]]], after: dict[str, list[tuple[Any, ...]]]
) -> str:
    """What differs between two dumps, briefly ('' when nothing does)."""
    if before.keys() != after.keys():
        return f"tables {sorted(before)} became {sorted(after)}"
    changed = [t for t in before if before[t] != after[t]]
    return ", ".join(
        f"{t}: {len(before[t])} rows → {len(after[t])}"
        + (f" (first new: {[r for r in after[t] if r not in before[t]][:1]})" if after[t] else "")
        for t in changed
    )
