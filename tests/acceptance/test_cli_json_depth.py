"""JSON arguments nested past the one limit (64 levels: ``procflow.store.codec.MAX_JSON_DEPTH``)
through the ``procflow`` command (in-process, through its own error handling), on both store
backends: ``--inputs``, ``--input k=v``, ``--data`` (records, events, tasks), ``--envelope``,
``--slack-payload`` and ``--record``. Text nested 64 levels deep is read (and meets the command's
other checks); 65, 491, 1,000 and 5,000 levels are exit 2 with one line saying where level 65
opens, and change nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_inprocess import Outcome, changes, dump, invoke
from projects import PROVISIONING_APP, TOO_DEEP_LEVELS, nested_json, write

pytestmark = pytest.mark.empty_store  # `db init` makes the store, as a user would

TOO_DEEP = "is nested too deeply: more than 64 levels of objects and arrays (level 65 opens at"

NEST = """\
flow: nest
inputs:
  payload: { type: object, required: true }
steps:
  - done:
      set: { ok: true }
"""


class Store:
    """A store with the provisioning app (Tenant 1 and its open review task) and the flow."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url = url
        self.app = write(folder / "app.intent", PROVISIONING_APP)
        self.flow = write(folder / "nest.flow.yaml", NEST)
        for args in (
            ("db", "init", "--virtual-clock"),
            ("deploy", self.app, self.flow),
            ("records", "create", "Tenant", "--data", '{"title": "acme"}'),
            ("worker", "--until-idle"),
        ):
            assert self.run(*args).code == 0, args

    def run(self, *args: str) -> Outcome:
        return invoke(*args, "--db", self.url)

    def refused(self, *args: str) -> str:
        """Exit 2, one ``error:`` line, no traceback, and the store as it was: that line."""
        before = dump(self.url)
        done = self.run(*args)
        assert done.code == 2 and not done.problems(), done.report(done.problems())
        assert not changes(before, dump(self.url)), args
        return done.lines[0]


@pytest.fixture
def store(db_url: str, tmp_path: Path) -> Store:
    return Store(db_url, tmp_path)


def wrapped(levels: int, head: str) -> str:
    """``head`` (an object's text up to a member's value) around a value, ``levels`` deep."""
    return f"{head}{nested_json(levels - 1)}}}"


# (the flags, the JSON text given `levels` deep, what the message calls it)
def arguments(store: Store, levels: int) -> list[tuple[list[str], str]]:
    inputs = wrapped(levels, '{"payload": ')
    note = wrapped(levels, '{"note": ')
    data = wrapped(levels, '{"message": "m", "x": ')
    envelope = '{"type": "slack.approval", "data": ' + wrapped(levels - 1, '{"message": "m", "x": ')
    click = '{"type": "block_actions", "message": {"ts": "1.2"}, "actions": [{"value": "ok"}], '
    slack = click + '"x": ' + nested_json(levels - 1) + "}"
    return [
        (["run", store.flow, "--inputs", inputs], "flow [nest]: --inputs"),
        (["start", "nest", "--inputs", inputs], "flow [nest]: --inputs"),
        (["records", "create", "Tenant", "--data", note], "--data"),
        (["records", "update", "Tenant", "1", "--data", note], "--data"),
        (["events", "send", "slack.approval", "--data", data], "--data"),
        (["events", "send", "--envelope", envelope + "}"], "--envelope"),
        (["events", "send", "--slack-payload", slack], "--slack-payload"),
        (["tasks", "complete", "1", "--action", "approve", "--data", note], "--data"),
        (["run", store.app, "--record", wrapped(levels, '{"title": "t", "note": ')], "--record"),
    ]


def test_json_arguments_past_64_levels_are_refused(store: Store) -> None:
    wrong = []
    for levels in TOO_DEEP_LEVELS:
        for args, what in arguments(store, levels):
            line = store.refused(*args)
            if not line.startswith(f"error: {what} {TOO_DEEP} character "):
                wrong.append((levels, args[:3], line[:200]))
    assert wrong == []


def test_the_refusal_says_where_level_65_opens(store: Store) -> None:
    # 12 characters of '{"payload": ', 63 openers of levels 2 to 64 (32 '{"d":', 31 '['): 203
    line = store.refused("start", "nest", "--inputs", wrapped(65, '{"payload": '))
    assert line == (
        "error: flow [nest]: --inputs is nested too deeply: more than 64 levels of objects and "
        "arrays (level 65 opens at character 204)"
    )


def test_an_input_pair_past_64_levels_is_refused(store: Store) -> None:
    for levels in TOO_DEEP_LEVELS:
        line = store.refused("start", "nest", "--input", f"payload={nested_json(levels)}")
        assert line.startswith("error: flow [nest]: input [payload] expects a JSON object, but ")
        assert f"] {TOO_DEEP} character " in line
    # The value of an input is level 2 of the inputs, as in --inputs: 63 levels of its own at most.
    line = store.refused("start", "nest", "--input", f"payload={nested_json(64)}")
    assert line == f"error: flow [nest]: input [payload] {TOO_DEEP.split(' (')[0]}"
    started = store.run("start", "nest", "--input", f"payload={nested_json(63)}", "--json")
    assert started.code == 0, started.stderr


def test_json_arguments_64_levels_deep_are_read(store: Store) -> None:
    """Each is read: a run starts, an event is accepted, or the record's own check refuses the
    note (text) — never the depth."""
    outcomes: dict[str, Any] = {}
    for args, _what in arguments(store, 64):
        done = store.run(*args, "--json")
        outcomes[" ".join(args[:3])] = done.code if done.code == 0 else done.lines
    for command, outcome in outcomes.items():
        if command.startswith(("records", "tasks", "run " + store.app)):
            assert "[note]: must be text, got" in "".join(outcome), (command, outcome)
        else:
            assert outcome == 0, (command, outcome)
    assert json.loads(store.run("runs", "list", "--json").stdout)  # the runs were started
