"""Limits on what a definition file can make validation do: only regular files within a size
are read, every check stays linear in the file's size, literal durations and timestamps stay in
the representable range, and messages do not grow with the lists they name.

Timing is never asserted here (``bench/validate_large.py`` measures it): these tests check that
the large inputs come out right.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.config import Config, format_size, parse_size, size_setting
from procflow.errors import ConfigError, UsageError
from procflow.expr import hints
from procflow.model.intent.graph import Paths
from procflow.model.ir import END, Entity, Field, Process, ServiceTask, SetField
from procflow.model.reading.files import DEFAULT_MAX_FILE_SIZE, read_bytes, read_text
from procflow.model.source import Pos, listing, suggest
from procflow.model.validate import compile_file, load_file, load_text

P = Pos("t", 1, 1, "")
LIMIT_HINT = "raise it with --max-file-size or PROCFLOW_MAX_FILE_SIZE"


# --- files: regular files only, bounded ----------------------------------------------------------


def flow_file(tmp_path: Path, name: str = "ok.flow.yaml") -> Path:
    path = tmp_path / name
    path.write_text("flow: ok\nsteps:\n  - a: { set: { v: 1 } }\n")
    return path


def finishes(call: Callable[[], Any], seconds: float = 10.0) -> Any:
    """``call()`` run in a thread, its result or what it raised; fails the test if it is still
    running after ``seconds`` (the thread is left behind: it is a daemon)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # handed back to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds} s"
    return outcome[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.flow.yaml"
    os.mkfifo(fifo)
    error = finishes(lambda: load_file(str(fifo)))
    assert isinstance(error, UsageError)
    assert str(error) == (
        f"{fifo}: not a regular file (a named pipe); procflow reads only regular files"
    )
    assert error.exit_code == 2


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_link_to_a_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    link = tmp_path / "zero.intent"
    link.symlink_to("/dev/zero")
    error = finishes(lambda: load_file(str(link)))
    assert isinstance(error, UsageError)
    assert str(error) == (
        f"{link}: not a regular file (a character device); procflow reads only regular files"
    )


def test_a_link_to_a_regular_file_is_read(tmp_path: Path) -> None:
    target = flow_file(tmp_path, "target.flow.yaml")
    link = tmp_path / "link.flow.yaml"
    link.symlink_to(target)
    loaded = load_file(str(link))
    assert loaded.ok
    assert loaded.source == target.read_text()


def test_a_folder_named_like_a_definition_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "dir.intent"
    folder.mkdir()
    with pytest.raises(UsageError) as info:
        load_file(str(folder))
    assert str(info.value) == f"{folder}: is a directory; name a *.intent or *.flow.yaml file"


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        load_file(str(tmp_path / "none.intent"))
    assert str(info.value) == f"{tmp_path / 'none.intent'}: no such file"


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.flow.yaml"
    path.write_bytes(b"#" * 3000)
    with pytest.raises(UsageError) as info:
        load_file(str(path), max_size=2048)
    assert str(info.value) == (
        f"{path}: is 2.93 KiB (3,000 bytes), over the limit of 2 KiB; {LIMIT_HINT}"
    )
    with pytest.raises(UsageError):
        compile_file(str(path), max_size=2048)


def test_a_file_at_the_limit_is_read(tmp_path: Path) -> None:
    path = flow_file(tmp_path)
    assert load_file(str(path), max_size=path.stat().st_size).ok


def test_the_default_limit_is_ten_mebibytes(tmp_path: Path) -> None:
    assert DEFAULT_MAX_FILE_SIZE == 10 * 1024 * 1024
    path = tmp_path / "huge.intent"
    with path.open("wb") as f:  # sparse: no 10 MiB written
        f.truncate(DEFAULT_MAX_FILE_SIZE + 1)
    with pytest.raises(UsageError) as info:
        load_file(str(path))
    assert "over the limit of 10 MiB" in str(info.value)


def test_a_file_that_grows_after_the_check_is_read_only_up_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "growing.intent"
    path.write_bytes(b"#" * 5000)
    real_fstat = os.fstat

    def small(fd: int) -> os.stat_result:  # what fstat said before the file grew
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))

    monkeypatch.setattr(os, "fstat", small)
    with pytest.raises(UsageError) as info:
        read_bytes(str(path), 1024)
    assert str(info.value) == f"{path}: grew past the limit of 1 KiB; {LIMIT_HINT}"


def test_text_is_read_with_universal_newlines_as_before(tmp_path: Path) -> None:
    path = tmp_path / "crlf.flow.yaml"
    path.write_bytes(b"flow: ok\r\nsteps:\r\n  - a: { set: { v: 1 } }\r\n")
    assert read_text(str(path)) == "flow: ok\nsteps:\n  - a: { set: { v: 1 } }\n"
    assert load_file(str(path)).ok


def test_text_that_is_not_utf8_is_a_diagnostic(tmp_path: Path) -> None:
    path = tmp_path / "latin.flow.yaml"
    path.write_bytes(b"flow: caf\xe9\n")
    loaded = load_file(str(path))
    assert [d.message for d in loaded.diagnostics] == [
        "the file is not UTF-8 text (invalid continuation byte)"
    ]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_project_files_that_are_pipes_are_not_waited_on(tmp_path: Path) -> None:
    connector = tmp_path / "connectors" / "piped"
    connector.mkdir(parents=True)
    os.mkfifo(connector / "manifest.yaml")
    (connector / "__init__.py").write_text("")
    flow = tmp_path / "f.flow.yaml"
    flow.write_text("flow: f\nsteps:\n  - a: { piped.go: {} }\n")
    loaded = finishes(lambda: load_file(str(flow)))
    assert [d.message for d in loaded.diagnostics] == ["step [a]: unknown connector [piped]"]
    manifest = finishes(lambda: read_text(str(connector / "manifest.yaml")))
    assert isinstance(manifest, UsageError)


# --- sizes in settings and flags -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4096", 4096),
        ("10MiB", 10 * 1024 * 1024),
        ("10mib", 10 * 1024 * 1024),
        ("512KiB", 512 * 1024),
        ("2MB", 2_000_000),
        ("1 GiB", 1024**3),
        ("300B", 300),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text, "--max-file-size") == size


@pytest.mark.parametrize("text", ["0", "-1", "ten", "10TB", "1.5MiB", ""])
def test_sizes_refused(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_size(text, "PROCFLOW_MAX_FILE_SIZE")
    assert str(info.value) == (
        "PROCFLOW_MAX_FILE_SIZE must be a positive size like 10MiB, 512KiB or 4096 (bytes), "
        f"not [{text}]"
    )


def test_sizes_shown() -> None:
    assert [format_size(n) for n in (300, 1024, 1536, 10 * 1024**2, 3 * 1024**3)] == [
        "300 bytes",
        "1 KiB",
        "1.5 KiB",
        "10 MiB",
        "3 GiB",
    ]


def test_the_size_settings_and_their_defaults() -> None:
    assert Config.from_environ({}).max_file_size == 10 * 1024**2
    assert Config.from_environ({}).max_result_size == 1024**2
    config = Config.from_environ(
        {"PROCFLOW_MAX_FILE_SIZE": "1KiB", "PROCFLOW_MAX_RESULT_SIZE": "2KiB"}
    )
    assert (config.max_file_size, config.max_result_size) == (1024, 2048)
    assert size_setting("PROCFLOW_MAX_RESULT_SIZE", {}) == 1024**2
    with pytest.raises(ConfigError):
        Config.from_environ({"PROCFLOW_MAX_RESULT_SIZE": "lots"})


# --- linear checks on large files --------------------------------------------------------------


def wide_entity(fields: int, *, extra_fields: str = "", steps: str = "") -> str:
    lines = [
        "name: wide",
        "entities:",
        "  - name: Wide",
        "    fields:",
        "      - { name: id, type: integer, primaryKey: true, generated: true }",
        *(f"      - {{ name: f{i}, type: string, length: 50 }}" for i in range(fields)),
        extra_fields,
        "processes:",
        "  - name: Fill",
        "    trigger: { onCreate: Wide }",
        "    steps:",
        f"      - {{ name: last, kind: serviceTask, args: {{ setField: f{fields - 1}, "
        "value: \"'x'\" } }",
        steps,
    ]
    return "\n".join(line for line in lines if line) + "\n"


def errors(text: str, name: str = "t.intent") -> list[str]:
    return [d.message for d in load_text(text, name).diagnostics if d.severity == "error"]


def test_an_entity_of_5000_fields_validates() -> None:
    loaded = load_text(wide_entity(5000), "wide.intent")
    assert loaded.ok, loaded.diagnostics[:3]
    assert loaded.definition is not None
    wide = loaded.definition.entity("Wide")  # type: ignore[union-attr]
    assert wide is not None and len(wide.fields) == 5001
    assert wide.field("f4999") is wide.fields[-1]


def test_every_repeated_field_of_a_large_entity_is_reported_once() -> None:
    repeats = "\n".join(f"      - {{ name: f{i}, type: string }}" for i in range(0, 5000, 1000))
    found = errors(wide_entity(5000, extra_fields=repeats))
    assert found == [f"entity [Wide]: field [f{i}] is declared twice" for i in range(0, 5000, 1000)]


def test_every_unknown_field_of_many_steps_is_reported() -> None:
    steps = "\n".join(
        f"      - {{ name: s{i}, kind: serviceTask, args: {{ setField: g{i}, value: \"'x'\" }} }}"
        for i in range(3000)
    )
    found = errors(wide_entity(3000, steps=steps))
    assert len(found) == 3000
    assert all("is not a field of [Wide]" in m for m in found)


def test_hints_stop_when_the_budget_of_a_validation_is_spent() -> None:
    # 3,000 unknown names, each compared with up to 1,000 candidates: the first 50 get a hint
    steps = "\n".join(
        f"      - {{ name: s{i}, kind: serviceTask, args: {{ setField: F{i}, value: \"'x'\" }} }}"
        for i in range(3000)
    )
    found = errors(wide_entity(1000, steps=steps))
    hinted = [m for m in found if "did you mean" in m]
    assert len(hinted) == hints.VALIDATION_BUDGET // hints.MAX_CANDIDATES
    assert hinted[0].endswith("; did you mean [f0]? (names are case-sensitive)")
    assert len(found) == 3000


def test_a_typo_among_more_names_than_a_hint_looks_at_gets_none() -> None:
    early = [f"f{i}" for i in range(hints.MAX_CANDIDATES + 500)]
    early[10] = "zebra"
    assert suggest("zebar", early) == "; did you mean [zebra]?"
    late = [f"f{i}" for i in range(hints.MAX_CANDIDATES + 500)]
    late[hints.MAX_CANDIDATES + 100] = "zebra"
    assert suggest("zebar", late) == ""


def test_suggest_takes_generators_and_views_lazily() -> None:
    taken: list[int] = []

    def names() -> Iterator[str]:
        for i in range(10**9):
            taken.append(i)
            yield f"n{i}"

    with hints.hint_budget(10):
        assert suggest("n3x", names()) == "; did you mean [n3]?"
        assert suggest("n4x", names()) == ""  # the budget is spent: nothing is taken
    assert len(taken) == 10


def test_a_seeded_value_listing_is_cut_short() -> None:
    rows = "".join(f"      - {{ id: {i + 1}, name: Value{i} }}\n" for i in range(40))
    text = (
        "name: t\nentities:\n  - name: Status\n    function: Setting\n    fields:\n"
        "      - { name: id, type: integer, primaryKey: true }\n"
        "      - { name: name, type: string }\n"
        "  - name: Thing\n    fields:\n      - { name: id, type: integer, primaryKey: true }\n"
        "    relations:\n"
        "      - { name: st, kind: manyToOne, to: Status, function: EntityStatus, init: 99 }\n"
        f"seeds:\n  - name: s\n    entity: Status\n    rows:\n{rows}"
    )
    shown = ", ".join(str(i) for i in range(1, 11))
    assert errors(text) == [
        "entity [Thing] relation [st]: init [99] is not a seeded value of [Status] "
        f"(seeded ids: {shown} and 30 more)"
    ]


def test_listing() -> None:
    assert listing([]) == ""
    assert listing(["a", "b"]) == "a, b"
    assert listing([str(i) for i in range(12)], limit=3) == "0, 1, 2 and 9 more"


def test_a_long_path_shows_its_ends_whatever_its_length() -> None:
    parents: dict[str, str | None] = {"start": None, "a0": "start"}
    for i in range(1, 20_000):
        parents[f"a{i}"] = f"a{i - 1}"
    paths = Paths(parents)
    assert paths.to("a19999") == "start → a0 → … → a19997 → a19998 → a19999"
    assert paths.to("a3") == "start → a0 → a1 → a2 → a3"
    assert paths.to("a4") == "start → a0 → a1 → a2 → a3 → a4"  # six steps: all shown
    assert paths.to("a5") == "start → a0 → … → a3 → a4 → a5"
    assert paths.to("start") == "start"


def test_lookups_by_name_find_the_first_declared() -> None:
    first, second = Field("x", "string", P), Field("x", "integer", P)
    entity = Entity("E", P, (Field("id", "integer", P, primary_key=True), first, second))
    assert entity.field("x") is first
    assert entity.primary_key.name == "id"
    with pytest.raises(LookupError):
        _ = Entity("F", P, (first,)).primary_key
    a = ServiceTask("a", "serviceTask", SetField("x", "1"), P)
    process = Process("p", (a, ServiceTask("b", "serviceTask", SetField("x", "1"), P)), P)
    assert process.fall_through("a") == "b"
    assert process.fall_through("b") == END
    assert process.step("b").name == "b"


# --- literal durations and timestamps -----------------------------------------------------------

TOO_LONG = "is too large: procflow accepts at most 100 years (36525d)"


def flow(step: str) -> str:
    return f"flow: f\nsteps:\n  - s:\n{step}"


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("      wait: { for: 3000000d }\n", f"step [s]: wait.for: duration [3000000d] {TOO_LONG}"),
        ("      wait: { for: P40000D }\n", f"step [s]: wait.for: duration [P40000D] {TOO_LONG}"),
        (
            '      wait: { for: "{{ 36526d }}" }\n',
            f"step [s]: wait.for: invalid number or duration: duration [36526d] {TOO_LONG}",
        ),
        (
            "      log.write: { message: hi }\n      retry: { count: 1, every: 40000d }\n",
            f"step [s]: retry.every: duration [40000d] {TOO_LONG}",
        ),
        (
            '      repeat: { every: 40000d, max: 2, until: "{{ true }}" }\n'
            "      steps:\n        - x: { log.write: { message: hi } }\n",
            f"step [s]: repeat.every: duration [40000d] {TOO_LONG}",
        ),
        (
            '      wait: { until: "10000-01-01T00:00:00Z" }\n',
            "step [s]: wait.until: timestamp [10000-01-01T00:00:00Z] is outside the years "
            "0001 to 9999",
        ),
        (
            '      wait: { until: "9999-12-31T23:00:00-05:00" }\n',
            "step [s]: wait.until: timestamp [9999-12-31T23:00:00-05:00] falls outside the "
            "years 0001 to 9999 in UTC",
        ),
        (
            "      wait: { for: \"{{ now() + duration('3000000d') }}\" }\n",
            f"step [s]: wait.for: duration(): duration [3000000d] {TOO_LONG}",
        ),
        (
            "      wait: { until: \"{{ timestamp('0000-01-01') }}\" }\n",
            "step [s]: wait.until: timestamp [0000-01-01] is outside the years 0001 to 9999",
        ),
    ],
)
def test_flow_literals_out_of_range(step: str, message: str) -> None:
    assert errors(flow(step), "f.flow.yaml") == [message]


def test_a_hundred_years_is_the_longest_literal() -> None:
    assert errors(flow("      wait: { for: 36525d }\n"), "f.flow.yaml") == []
    assert errors(flow('      wait: { until: "9999-12-31T23:59:59Z" }\n'), "f.flow.yaml") == []


INTENT = """\
name: t
entities:
  - name: Item
    fields:
      - { name: id, type: integer, primaryKey: true }
      - { name: due, type: timestamp, defaultValue: "DUE" }
      - { name: day, type: date, defaultValue: "DAY" }
processes:
  - name: P
    trigger: { onCreate: Item }
    steps:
      - name: review
        kind: userTask
        args: { assignee: a, form: F, timeout: { after: AFTER, then: end } }
forms:
  - { name: F, forEntity: Item, actions: [ok] }
"""


def intent(due: str, day: str, after: str) -> str:
    return INTENT.replace("DUE", due).replace("DAY", day).replace("AFTER", after)


def test_intent_literals_out_of_range() -> None:
    text = intent(due="9999-12-31T23:00:00-05:00", day="10000-01-01", after="P40000D")
    assert sorted(errors(text)) == sorted(
        [
            "entity [Item] field [due]: defaultValue must be a timestamp in the years 0001 to "
            "9999: timestamp [9999-12-31T23:00:00-05:00] falls outside the years 0001 to 9999 "
            "in UTC",
            "entity [Item] field [day]: defaultValue must be a date in the years 0001 to 9999: "
            "timestamp [10000-01-01] is outside the years 0001 to 9999",
            f"process [P] step [review]: timeout after duration [P40000D] {TOO_LONG}",
        ]
    )
    fine = intent(due="9999-12-31T23:00:00Z", day="9999-12-31", after="P36525D")
    assert errors(fine) == []
