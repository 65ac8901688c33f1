"""No traceback ever reaches a user: every command of the `procflow` tree, given bad input, ends
with exit 1 or 2 and one clear line on stderr (a definition problem: one line each), and the
store is exactly as it was (every table compared before and after).

The commands are found by walking click's command tree, so a new command without bad inputs
in :func:`cases` fails :func:`test_every_command_has_bad_inputs_here`. Commands run in-process,
through the same error handling as the installed `procflow` (hundreds of cases in seconds).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import click
import pytest
from cli_inprocess import FLOW, INTENT, Outcome, changes, dump, invoke

from procflow.cli import cli as procflow_cli
from procflow.store.store import Store

pytestmark = pytest.mark.empty_store  # `db init` makes the store, as a user would

MAX_ID = str(2**63 - 1)
HUGE_ID = str(2**63)
HUGER_ID = "9" * 5000  # more digits than int() converts by default
DEEP = 1_000  # nesting that ends Python's recursion if anything recurses per level
TICK = "flow: tick\ntrigger:\n  schedule: { every: 15m }\nsteps:\n  - a: { set: { b: 1 } }\n"


def deep_json(levels: int = DEEP) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def deep_yaml(levels: int = DEEP, *, flow: bool = True) -> str:
    head = "flow: deep\nsteps:\n  - a: " if flow else "name: deep\nentities: "
    return head + "[" * levels + "]" * levels + "\n"


# --- the scene -------------------------------------------------------------------------------


class Scene:
    """A store with something in it (an intent, a flow and a scheduled flow deployed, an order
    waiting at a user task, a flow run waiting on a timer), and files and paths to give
    commands."""

    def __init__(
        self, url: str, folder: Path, more_bad_stores: dict[str, str] | None = None
    ) -> None:
        self.url = url
        self.folder = folder
        self.more_bad_stores = more_bad_stores or {}
        self.intent = self.write("shop.intent", INTENT)
        self.flow = self.write("greet.flow.yaml", FLOW)
        self.scheduled = self.write("tick.flow.yaml", TICK)
        self.deep_flow = self.write("deep.flow.yaml", deep_yaml())
        self.deep_intent = self.write("deep.intent", deep_yaml(flow=False))
        self.deep_block = self.write(
            "block.intent", "".join("  " * i + "k:\n" for i in range(DEEP)) + "  " * DEEP + "v\n"
        )
        self.invalid = self.write("bad.flow.yaml", "flow: bad\nsteps: 3\nnope: 1\n")
        self.not_yaml = self.write("broken.intent", "name: [unclosed\n")
        self.wrong_suffix = self.write("notes.txt", "name: x\n")
        self.bad_test = self.write("bad.test.yaml", "tests: greet.flow.yaml\nscenarioz: []\n")
        self.deep_test = self.write("deep.test.yaml", deep_yaml())
        self.broken_test = self.write("broken.test.yaml", "tests: [unclosed\n")
        self.missing = str(folder / "missing.intent")
        (folder / "empty-dir").mkdir()
        self.empty_dir = str(folder / "empty-dir")
        self.not_sqlite = self.write("notes.db", "these are notes, not a database\n")
        self.empty_file = self.write("empty.db", "")

    def write(self, name: str, text: str) -> str:
        path = self.folder / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    def build(self) -> None:
        for args in (
            ("db", "init", "--virtual-clock"),
            ("deploy", self.intent, self.flow, self.scheduled),
            ("records", "create", "Order", "--data", '{"title": "first", "total": 3}'),
            ("start", "greet", "--input", "who=ann"),
        ):
            done = invoke(*args, "--db", self.url)
            assert done.code == 0, done.stderr

    @property
    def bad_stores(self) -> dict[str, str]:
        """--db values that name no usable store (SQLite: the path's problem is the case)."""
        f = self.folder
        return {
            "missing file": f"sqlite:///{f / 'typo.db'}",
            "missing folder": f"sqlite:///{f / 'no-such-folder' / 'x.db'}",
            "a folder": f"sqlite:///{self.empty_dir}",
            "not SQLite": f"sqlite:///{self.not_sqlite}",
            "an empty file": f"sqlite:///{self.empty_file}",
            "unsupported scheme": "mysql://localhost/x",
            "malformed": "sqlite://host/x.db",
            "unreachable server": "postgresql://127.0.0.1:1/procflow",
            **self.more_bad_stores,
        }


@pytest.fixture
def scene(db_url: str, db_factory: Callable[..., str], tmp_path: Path) -> Scene:
    more = {}
    if db_url.startswith("postgresql"):
        more = {
            "no such database": urlsplit(db_url)._replace(path="/procflow_no_such_db").geturl(),
            "an empty database": db_factory(empty=True),
        }
    made = Scene(db_url, tmp_path, more)
    made.build()
    return made


# --- the table -------------------------------------------------------------------------------

Case = tuple[str, ...]


def cases(s: Scene) -> dict[str, list[Case]]:
    """Bad invocations of each command (``--db`` is added to every one that takes it)."""
    j = deep_json()
    return {
        "validate": [
            (s.missing,), (s.empty_dir,), (s.deep_flow,), (s.deep_intent,), (s.deep_block,),
            (s.invalid,), (s.not_yaml,), (s.wrong_suffix,), (s.deep_flow, "--json"), (),
        ],
        "deploy": [
            (s.missing,), (s.deep_flow,), (s.deep_intent,), (s.deep_block,), (s.invalid,),
            (s.not_yaml,), (s.empty_dir,), (),
        ],
        "graph": [
            (s.missing,), (s.deep_flow,), (s.deep_block,), (s.invalid,), (s.intent, "--name", "x"),
            (s.flow, "--format", "png"), (),
        ],
        "schema": [("yaml",), ()],
        "completion": [("tcsh",), (), ("bash", "zsh")],
        "test": [
            (s.missing,), (s.empty_dir,), (s.bad_test,), (s.deep_test,), (s.broken_test,),
            (s.flow,), (s.bad_test, "--min-coverage", "x"), (s.bad_test, "--min-coverage", "101"),
        ],
        "run": [
            (s.missing,), (s.deep_flow,), (s.deep_intent,), (s.deep_block,), (s.invalid,),
            (s.empty_dir,), (s.intent, "--record", j), (s.intent, "--record", "{"),
            (s.intent, "--record", "[1]"), (s.intent, "--inputs", "{}"),
            (s.flow, "--inputs", j), (s.flow, "--input", f"extra={j}"), (s.flow, "--inputs", "{"),
            (s.flow, "--record", "{}"), (s.flow, "--input", "who"),
            (s.flow, "--input", "nobody=1"), (s.flow,),
        ],
        "start": [
            ("nope",), ("Manual",), ("Manual", "--record", f"Order:{HUGE_ID}"),
            ("Manual", "--record", f"Order:{HUGER_ID}"), ("Manual", "--record", "Order:-1"),
            ("Manual", "--record", "Order"), ("Manual", "--record", "Nope:1"),
            ("Manual", "--inputs", "{}"), ("greet", "--inputs", j), ("greet", "--inputs", "[]"),
            ("greet", "--input", f"extra={j}"), ("greet", "--record", "Order:1"), ("greet",), (),
        ],
        "runs list": [("--status", "nope"), ("--status", j)],
        "runs show": [("nope",), ("nope", "--history", "x"), ("nope", "--history", HUGER_ID), ()],
        "runs cancel": [("nope",), (HUGE_ID,), ()],
        "runs retry": [("nope",), ()],
        "runs purge": [
            ("--ended-before", "soon"), ("--ended-before", "-1d"), ("--ended-before", j), (),
        ],
        "worker": [
            ("--concurrency", "-1"), ("--concurrency", "0"), ("--concurrency", HUGE_ID),
            ("--log-format", "yaml"), ("--retain", "0d"), ("--retain", j),
            ("--metrics-port", "-1"),
        ],
        "clock show": [("--nope",)],
        "clock advance": [("soon",), ("-1d",), ("99999999999999999999d",), (j,), ()],
        "clock set": [("yesterday",), ("2026-01-01T00:00:00Z",), ("9" * 50,), ()],
        "db init": [(), ("--virtual-clock",)],  # the store exists: refused, nothing changed
        "db upgrade": [("--nope",)],
        "definitions list": [("--nope",)],
        "definitions disable": [("nope",), ()],
        "definitions enable": [("nope",), ()],
        "records create": [
            ("Nope", "--data", "{}"), ("Order", "--data", j), ("Order", "--data", "{"),
            ("Order", "--data", "[]"), ("Order", "--data", '{"nope": 1}'),
            ("Order", "--data", '{"title": "x", "total": ' + HUGE_ID + "}"),
            ("Order", "--data", '{"title": "x", "Progress": ' + HUGE_ID + "}"),
            ("Order", "--data", '{"title": "x", "Progress": 99}'), ("Order",),
        ],
        "records update": [
            ("Order", HUGE_ID, "--data", "{}"), ("Order", HUGER_ID, "--data", "{}"),
            ("Order", "-1", "--data", "{}"), ("Order", "one", "--data", "{}"),
            ("Order", "99", "--data", '{"total": 1}'), ("Order", "1", "--data", j),
            ("Order", "1", "--data", '{"total": ' + HUGE_ID + "}"),
            ("Order", "1", "--data", '{"Progress": ' + HUGE_ID + "}"),
        ],
        "records delete": [("Order", HUGE_ID), ("Order", "-1"), ("Order", "99"), ("Nope", "1")],
        "records get": [("Order", HUGE_ID), ("Order", HUGER_ID), ("Order", "x"), ("Nope", "1")],
        "records list": [("Nope",), ()],
        "events send": [
            ("app.thing", "--data", j), ("app.thing", "--data", "{"), ("--envelope", j),
            ("--slack-payload", j), ("--envelope", "[]"), (), ("app.thing", "--envelope", "{}"),
        ],
        "tasks list": [("--nope",)],
        "tasks complete": [
            (HUGE_ID,), (HUGER_ID,), ("-1",), ("99",), ("1", "--data", j), ("1", "--data", "{"),
            ("1", "--data", '{"total": ' + HUGE_ID + "}"),
        ],
        "outbox list": [("--nope",)],
        "schedules list": [("--limit", "0"), ("--cursor", "x"), ("--cursor", j)],
        "schedules show": [
            ("nope",), ("tick/x",), ("tick", "--next", "0"), ("tick", "--next", HUGER_ID), (),
        ],
        "schedules pause": [
            ("nope",), ("tick", "--note", "two\nlines"), ("tick", "--note", "x" * 501),
            ("tick", "--as", "nobody"), (),
        ],
        "schedules resume": [("nope",), ("tick", "--as", "nobody"), ()],
        "schedules trigger": [("nope",), ("tick", "--overlap", "always"), ()],
        "schedules backfill": [
            ("tick", "--from", "soon", "--to", "2027-01-01"), ("tick", "--from", j, "--to", j),
            ("tick", "--from", "9" * 50, "--to", "2027-01-01"),
            ("tick", "--from", "2027-01-01T00:00:00Z", "--to", "2026-01-01"),
            ("tick", "--from", "2026-01-01", "--to", "2027-01-01"),
            ("tick", "--from", "2026-12-31", "--to", "9999-12-31"),
            ("nope", "--from", "2026-12-31", "--to", "2027-01-01"), ("tick",), (),
        ],
        # (only refusals that come before it listens: a case it accepted would serve forever)
        "serve": [
            ("--port", "-1"), ("--port", "70000"), ("--port", HUGER_ID), ("--nope",),
            ("--log-format", "yaml"), ("--retain", "soon"),
        ],
    }  # fmt: skip


def good_args(s: Scene) -> dict[str, Case]:
    """Arguments each command that takes --db would accept on the scene's store: whatever it
    says on another --db is about that --db."""
    return {
        "deploy": (s.flow,), "run": (s.intent, "--record", '{"title": "x"}'),
        "start": ("greet", "--input", "who=ann"), "runs list": (), "runs show": ("r1",),
        "runs cancel": ("r1",), "runs retry": ("r1",), "worker": ("--until-idle",),
        "runs purge": ("--ended-before", "30d"),
        "clock show": (), "clock advance": ("1h",), "clock set": ("2027-06-01T00:00:00Z",),
        "db init": (), "db upgrade": (), "definitions list": (), "definitions disable": ("greet",),
        "definitions enable": ("greet",), "records create": ("Order", "--data", '{"title": "x"}'),
        "records update": ("Order", "1", "--data", "{}"), "records delete": ("Order", "1"),
        "records get": ("Order", "1"), "records list": ("Order",), "events send": ("app.thing",),
        "tasks list": (), "tasks complete": ("1",), "outbox list": (), "schedules list": (),
        "schedules show": ("tick",), "schedules pause": ("tick",), "schedules resume": ("tick",),
        "schedules trigger": ("tick",),
        "schedules backfill": ("tick", "--from", "2026-12-31", "--to", "2027-01-01"),
        "serve": ("--port", "0", "--no-worker"),  # refused before it listens, or it would block
    }  # fmt: skip


# Commands whose refusals are definition problems, one line each (validate also sums up).
DIAGNOSING = {"validate", "deploy", "run", "graph"}
# Commands that make a store where there is none: their --db cases are the paths with no file.
MAKES_A_STORE = {"db init", "db upgrade", "run"}
NO_STORE_YET = {"missing file", "an empty file", "an empty database"}


def leaf_commands(
    group: click.Group = procflow_cli, prefix: str = ""
) -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)  # the top group imports its commands on demand: ask it
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from leaf_commands(command, f"{path} ")
        else:
            yield path, command


def takes_db(command: click.Command) -> bool:
    return any(p.name == "db_url" for p in command.params)


def check(scene: Scene, command: str, case: Case, db: str) -> tuple[Outcome, list[str]]:
    """Run one bad invocation: its outcome, and what is wrong with it."""
    before = dump(scene.url)
    outcome = invoke(*command.split(), *case, *(("--db", db) if db else ()))
    problems = outcome.problems(diagnostics=command in DIAGNOSING)
    changed = changes(before, dump(scene.url))
    if changed:
        problems.append(f"the store changed: {changed}")
    return outcome, problems


# --- the tests -------------------------------------------------------------------------------


def test_every_command_has_bad_inputs_here(tmp_path: Path) -> None:
    scene = Scene("sqlite://", tmp_path)
    table = cases(scene)
    missing = [path for path, _ in leaf_commands() if path not in table]
    assert not missing, f"commands without bad inputs in cases(): {missing}"
    good = good_args(scene)
    missing = [path for path, c in leaf_commands() if takes_db(c) and path not in good]
    assert not missing, f"commands with --db but no arguments in good_args(): {missing}"


def test_every_command_refuses_bad_input_in_one_line_and_changes_nothing(scene: Scene) -> None:
    failures = []
    count = 0
    for path, command in leaf_commands():
        db = scene.url if takes_db(command) else ""
        for case in cases(scene)[path]:
            count += 1
            outcome, problems = check(scene, path, case, db)
            if problems:
                failures.append(outcome.report(problems))
    assert count > 120
    assert not failures, f"{len(failures)} of {count} cases:\n" + "\n".join(failures)


def test_every_store_command_refuses_a_db_that_names_no_store(scene: Scene) -> None:
    """Every command that takes --db, on each kind of --db that names no store: one line, exit
    2, nothing made on disk (a mistyped path must never become a new, empty store)."""
    failures = []
    for path, command in leaf_commands():
        if not takes_db(command):
            continue
        args = good_args(scene)[path]
        for kind, db in scene.bad_stores.items():
            if path in MAKES_A_STORE and kind in NO_STORE_YET:
                continue  # these may make a store (test_only_init_upgrade_and_run_make_a_store)
            listing = sorted(os.listdir(scene.folder))
            outcome, problems = check(scene, path, args, db)
            if sorted(os.listdir(scene.folder)) != listing:
                problems.append("files appeared beside the store")
            wanted = 1 if kind == "unreachable server" else 2  # an outage, not a bad request
            if outcome.code != wanted:
                problems.append(f"exit {outcome.code} for {kind}, wanted {wanted}")
            if problems:
                failures.append(outcome.report(problems))
    assert not failures, "\n".join(failures)


def test_a_mistyped_db_path_is_refused_and_named(scene: Scene) -> None:
    typo = scene.bad_stores["missing file"]
    for args in (("runs", "list"), ("records", "list", "Order"), ("worker", "--until-idle"),
                 ("deploy", scene.flow), ("clock", "show")):  # fmt: skip
        done = invoke(*args, "--db", typo)
        assert (done.code, done.stderr) == (
            2,
            f"error: no procflow store at {typo}: {typo.removeprefix('sqlite:///')} does not "
            "exist; create one with `procflow db init`\n",
        ), args
    assert not (scene.folder / "typo.db").exists()


def test_a_name_too_long_for_the_system_is_refused_in_one_line(scene: Scene) -> None:
    """A path the system cannot even look up (ENAMETOOLONG) is the request's fault: exit 2 and
    one line saying why, as for a file that does not exist."""
    long = str(scene.folder / ("n" * 300))
    expected = {
        ("validate", long): (
            f"error: {long}: not a definition file; procflow reads *.intent and *.flow.yaml files"
        ),
        ("validate", f"{long}.intent"): f"error: {long}.intent: cannot be read: File name too long",
        ("test", long): f"error: cannot look up [{long}]: File name too long",
        ("db", "init", "--db", f"sqlite:///{long}.db"): (
            f"error: sqlite:///{long}.db: cannot open the database: unable to open database file"
        ),
        ("run", scene.flow, "--input", "who=ann", "--db", f"sqlite:///{long}.db"): (
            f"error: sqlite:///{long}.db: cannot open the database: unable to open database file"
        ),
    }
    for args, line in expected.items():
        done = invoke(*args)
        assert (done.code, done.lines[-1]) == (2, line), done.stderr


def test_only_init_upgrade_and_run_make_a_store(scene: Scene) -> None:
    """`db init` and `db upgrade` make a store where there is none; so does `run`, the one-shot
    job, after checking its file and inputs, and it says so on stderr."""
    for args, name in (
        (("db", "init"), "a.db"),
        (("db", "upgrade"), "b.db"),
        (("run", scene.flow, "--input", "who=ann"), "c.db"),
    ):
        url = f"sqlite:///{scene.folder / name}"
        done = invoke(*args, "--db", url)
        assert done.code == 0, done.stderr
        assert Store(url, create=False).schema_version() is not None
    assert done.stderr == f"created a new store at {url} (system clock)\n"
    # A refused run makes nothing: its file and inputs are checked first.
    for args in ((scene.invalid,), (scene.flow, "--input", "nobody=1"), (scene.missing,)):
        refused = invoke("run", *args, "--db", f"sqlite:///{scene.folder / 'd.db'}")
        assert refused.code in (1, 2) and "Traceback" not in refused.stderr
    assert not (scene.folder / "d.db").exists()


def test_click_usage_errors_are_one_line_naming_the_help(scene: Scene) -> None:
    done = invoke("records", "get", "Order", "--db", scene.url)
    assert (done.code, done.stderr) == (
        2,
        "error: Missing argument 'ID'. (see `procflow records get --help`)\n",
    )
    done = invoke("records", "get", "Order", "1", "--dta", "x")
    assert done.code == 2 and done.lines == [
        "error: No such option '--dta'. (Did you mean one of: '--as', '--db'?) "
        "(see `procflow records get --help`)"
    ]


def test_an_unexpected_exception_is_one_line_too(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last line of defence: a bug is reported in one line (exit 1), never a traceback."""
    from procflow.runtime.engine import Engine

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("surprise\nacross lines")

    monkeypatch.setattr(Engine, "runs_page", broken)
    done = invoke("runs", "list", "--db", scene.url)
    assert (done.code, done.stderr) == (
        1,
        "error: unexpected KeyError: 'surprise\\nacross lines' (a bug in procflow; please "
        "report it)\n",
    )


def test_an_unreadable_definition_file_is_refused_in_one_line(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests run as root, which may read any file: opening this one is made to fail instead."""
    real_open = os.open

    def denied(path: str, *args: object, **kwargs: object) -> int:
        if str(path) == scene.flow:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", denied)
    for command, db in (("validate", ()), ("graph", ()), ("deploy", ("--db", scene.url)),
                        ("run", ("--db", scene.url))):  # fmt: skip
        before = dump(scene.url)
        done = invoke(command, scene.flow, *db)
        assert done.code == 2, (command, done.stderr)
        assert f"error: {scene.flow}: cannot be read: Permission denied" in done.lines, done.stderr
        assert dump(scene.url) == before


def test_deep_yaml_is_one_problem_at_its_place(scene: Scene) -> None:
    """Nesting past 64 levels is reported once, where level 65 opens; the file is checked no
    deeper (a thousand levels would otherwise end validate with a RecursionError)."""
    done = invoke("validate", scene.deep_flow)
    assert done.code == 1, done.stderr
    deep = [line for line in done.stdout.splitlines() if "nested too deeply" in line]
    # the file (1), steps (2), the step (3), then a's lists from column 8: level 65 at 69
    assert deep == [
        f"{scene.deep_flow}:3:69: error: nested too deeply: more than 64 levels of mappings and "
        "lists; flatten this part of the definition (steps[0].a" + "[0]" * 61 + ")"
    ]
