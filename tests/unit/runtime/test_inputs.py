"""Checking, defaulting and converting the inputs a flow run starts with."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import InputError, UsageError
from procflow.model.ir import Flow
from procflow.model.validate import load_text
from procflow.runtime.data.inputs import check_inputs, cli_inputs, input_env

FLOW = """\
flow: hire-onboarding
inputs:
  hire:    { type: object, required: true }
  name:    { type: string }
  count:   { type: integer, default: 3 }
  ratio:   { type: number }
  urgent:  { type: boolean, default: false }
  tags:    { type: array, default: [a, b] }
  start:   { type: timestamp, default: "2027-01-10" }
  due:     { type: timestamp }
steps:
  - say: { log.write: { message: hi } }
"""

BARE = """\
flow: bare
steps:
  - say: { log.write: { message: hi } }
"""

PREFIX = "flow [hire-onboarding]: "
DECLARED = "(declared inputs: hire, name, count, ratio, urgent, tags, start, due)"
HIRE = {"name": "Ada", "start_date": "2027-01-11"}


def load(text: str, tmp_path: Path) -> Flow:
    loaded = load_text(text, str(tmp_path / "x.flow.yaml"), str(tmp_path))
    assert loaded.ok, loaded.diagnostics
    assert isinstance(loaded.definition, Flow)
    return loaded.definition


@pytest.fixture
def flow(tmp_path: Path) -> Flow:
    return load(FLOW, tmp_path)


def problems(flow: Flow, given: dict[str, Any]) -> list[str]:
    with pytest.raises(InputError) as info:
        check_inputs(flow, given)
    return str(info.value).split("\n")


def cli_problems(flow: Flow, pairs: list[str], inputs_json: str | None = None) -> list[str]:
    with pytest.raises(InputError) as info:
        cli_inputs(flow, pairs, inputs_json)
    return str(info.value).split("\n")


# --- check_inputs ----------------------------------------------------------------------------


def test_defaults_fill_missing_inputs_and_absent_ones_bind_null(flow: Flow) -> None:
    assert check_inputs(flow, {"hire": HIRE}) == {
        "hire": HIRE,
        "name": None,
        "count": 3,
        "ratio": None,
        "urgent": False,
        "tags": ["a", "b"],
        "start": "2027-01-10T00:00:00Z",
        "due": None,
    }


def test_given_values_win_over_defaults(flow: Flow) -> None:
    got = check_inputs(flow, {"hire": HIRE, "count": 7, "urgent": True, "tags": []})
    assert (got["count"], got["urgent"], got["tags"]) == (7, True, [])


def test_result_is_a_new_dict_that_shares_nothing(flow: Flow) -> None:
    given: dict[str, Any] = {"hire": {"name": "Ada"}}
    got = check_inputs(flow, given)
    got["hire"]["name"] = "changed"
    got["tags"].append("c")
    assert given == {"hire": {"name": "Ada"}}
    assert check_inputs(flow, {"hire": {}})["tags"] == ["a", "b"]  # the IR default is intact


def test_null_counts_as_not_given(flow: Flow) -> None:
    got = check_inputs(flow, {"hire": HIRE, "count": None, "name": None})
    assert (got["count"], got["name"]) == (3, None)
    assert problems(flow, {"hire": None}) == [PREFIX + "missing required input [hire] (object)"]


def test_missing_required_input(flow: Flow) -> None:
    assert problems(flow, {}) == [PREFIX + "missing required input [hire] (object)"]


def test_unknown_input_with_suggestion_and_the_declared_inputs(flow: Flow) -> None:
    assert problems(flow, {"hire": HIRE, "cuont": 1}) == [
        PREFIX + f"unknown input [cuont]; did you mean [count]? {DECLARED}"
    ]


def test_unknown_input_differing_in_case(flow: Flow) -> None:
    assert problems(flow, {"hire": HIRE, "Count": 1}) == [
        PREFIX + f"unknown input [Count]; did you mean [count]? (names are case-sensitive) "
        f"{DECLARED}"
    ]


def test_unknown_input_without_a_close_name(flow: Flow) -> None:
    assert problems(flow, {"hire": HIRE, "zzz": 1}) == [PREFIX + f"unknown input [zzz] {DECLARED}"]


def test_flow_without_inputs_accepts_only_nothing(tmp_path: Path) -> None:
    bare = load(BARE, tmp_path)
    assert check_inputs(bare, {}) == {}
    with pytest.raises(InputError) as info:
        check_inputs(bare, {"x": 1})
    assert str(info.value) == "flow [bare]: unknown input [x] (this flow declares no inputs)"


def test_every_problem_is_reported_at_once(flow: Flow) -> None:
    with pytest.raises(InputError) as info:
        check_inputs(flow, {"hier": {}, "count": "3", "urgent": 1, "due": "soon"})
    err = info.value
    assert isinstance(err, UsageError)
    assert err.flow == "hire-onboarding"
    assert err.problems == [
        f"unknown input [hier]; did you mean [hire]? {DECLARED}",
        "missing required input [hire] (object)",
        'input [count] must be an integer, got a string ("3")',
        "input [urgent] must be a boolean, got an integer (1)",
        "input [due] must be an ISO-8601 timestamp: [soon] is not an ISO-8601 timestamp "
        "(e.g. 2027-01-10T09:00:00Z or 2027-01-10)",
    ]
    assert str(err) == "\n".join(PREFIX + p for p in err.problems)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("count", True, "input [count] must be an integer, got a boolean (true)"),
        ("count", 3.0, "input [count] must be an integer, got a number (3.0)"),
        ("count", 2.5, "input [count] must be an integer, got a number (2.5)"),
        ("ratio", False, "input [ratio] must be a number, got a boolean (false)"),
        ("ratio", "1.5", 'input [ratio] must be a number, got a string ("1.5")'),
        ("ratio", float("inf"), "input [ratio] must be a finite number, got inf"),
        ("name", 5, "input [name] must be a string, got an integer (5)"),
        ("urgent", "true", 'input [urgent] must be a boolean, got a string ("true")'),
        ("hire", [1], "input [hire] must be an object, got an array"),
        ("tags", {"a": 1}, "input [tags] must be an array, got an object"),
        ("tags", "a,b", 'input [tags] must be an array, got a string ("a,b")'),
        ("due", 20270110, "input [due] must be a timestamp (ISO-8601 text), got an integer"),
    ],
)
def test_wrong_type(flow: Flow, name: str, value: Any, message: str) -> None:
    given = {"hire": HIRE, name: value} if name != "hire" else {"hire": value}
    got = problems(flow, given)
    assert len(got) == 1
    assert got[0].startswith(PREFIX + message)


def test_long_scalars_are_shortened_in_messages(flow: Flow) -> None:
    [line] = problems(flow, {"hire": HIRE, "count": "x" * 100})
    assert line == PREFIX + 'input [count] must be an integer, got a string ("' + "x" * 36 + "...)"


def test_an_integer_is_a_number(flow: Flow) -> None:
    got = check_inputs(flow, {"hire": HIRE, "ratio": 2})
    assert got["ratio"] == 2 and isinstance(got["ratio"], int)
    assert check_inputs(flow, {"hire": HIRE, "ratio": 0.25})["ratio"] == 0.25


def test_large_integers_are_integers(flow: Flow) -> None:
    assert check_inputs(flow, {"hire": HIRE, "count": 10**30})["count"] == 10**30


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("2027-01-10T10:00:00+01:00", "2027-01-10T09:00:00Z"),
        ("2027-01-10T09:00:00Z", "2027-01-10T09:00:00Z"),
        ("2027-01-10T09:00:00.250Z", "2027-01-10T09:00:00.250Z"),
        ("2027-01-10", "2027-01-10T00:00:00Z"),
    ],
)
def test_timestamps_are_normalised_to_utc(flow: Flow, text: str, stored: str) -> None:
    assert check_inputs(flow, {"hire": HIRE, "due": text})["due"] == stored


def test_zone_less_timestamp_is_refused(flow: Flow) -> None:
    assert problems(flow, {"hire": HIRE, "due": "2027-01-10T10:00:00"}) == [
        PREFIX + "input [due] must be an ISO-8601 timestamp: timestamp [2027-01-10T10:00:00] has "
        "no time zone; add Z (UTC) or an offset such as +02:00"
    ]


def test_a_tuple_is_an_array_and_a_mapping_an_object(flow: Flow) -> None:
    got = check_inputs(flow, {"hire": HIRE, "tags": ("x", "y")})
    assert got["tags"] == ["x", "y"]


# --- cli_inputs ------------------------------------------------------------------------------


def test_cli_inputs_json_gives_values(flow: Flow) -> None:
    got = cli_inputs(flow, [], json.dumps({"hire": HIRE, "count": 5}))
    assert (got["hire"], got["count"], got["urgent"]) == (HIRE, 5, False)


def test_cli_pairs_override_and_extend_inputs_json(flow: Flow) -> None:
    got = cli_inputs(flow, ["count=9", "name=Ada", "count=10"], '{"hire": {}, "count": 5}')
    assert (got["count"], got["name"]) == (10, "Ada")


@pytest.mark.parametrize(
    ("pair", "name", "value"),
    [
        ("name=Ada Lovelace", "name", "Ada Lovelace"),
        ("name=", "name", ""),
        ("name= 42 ", "name", " 42 "),
        ("name=a=b=c", "name", "a=b=c"),
        ("count=42", "count", 42),
        ("count=-7", "count", -7),
        ("count=+7", "count", 7),
        ("ratio=2", "ratio", 2),
        ("ratio=2.5", "ratio", 2.5),
        ("ratio=-1e3", "ratio", -1000.0),
        ("urgent=true", "urgent", True),
        ("urgent=FALSE", "urgent", False),
        ("urgent=True", "urgent", True),
        ('tags=["x", 1]', "tags", ["x", 1]),
        ("tags=[]", "tags", []),
        ('hire={"name": "Ada", "k": "a=b"}', "hire", {"name": "Ada", "k": "a=b"}),
        ("due=2027-01-10T10:00:00+01:00", "due", "2027-01-10T09:00:00Z"),
        ("due=2027-01-10", "due", "2027-01-10T00:00:00Z"),
    ],
)
def test_cli_pair_is_converted_by_the_declared_type(
    flow: Flow, pair: str, name: str, value: Any
) -> None:
    pairs = [pair] if name == "hire" else ["hire={}", pair]
    got = cli_inputs(flow, pairs, None)
    assert got[name] == value
    assert type(got[name]) is type(value)


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("count=abc", "input [count] expects an integer, got [abc]"),
        ("count=3.0", "input [count] expects an integer, got [3.0]"),
        ("count=", "input [count] expects an integer, got []"),
        ("count=1_000", "input [count] expects an integer, got [1_000]"),
        ("ratio=abc", "input [ratio] expects a number, got [abc]"),
        ("ratio=nan", "input [ratio] expects a number, got [nan]"),
        ("ratio=1e999", "input [ratio] expects a number, got [1e999]"),
        ("urgent=yes", "input [urgent] expects true or false, got [yes]"),
        ("urgent=1", "input [urgent] expects true or false, got [1]"),
        ("tags={}", "input [tags] expects an array (JSON), got an object"),
        ('tags="a"', 'input [tags] expects an array (JSON), got a string ("a")'),
        ("due=2027-01-10T10:00:00", "input [due] must be an ISO-8601 timestamp: timestamp"),
    ],
)
def test_cli_pair_that_does_not_convert(flow: Flow, pair: str, message: str) -> None:
    got = cli_problems(flow, ["hire={}", pair])
    assert len(got) == 1
    assert got[0].startswith(PREFIX + message)


def test_cli_object_pair_with_bad_json(flow: Flow) -> None:
    assert cli_problems(flow, ["hire={name: Ada}"]) == [
        PREFIX + "input [hire] expects a JSON object, but [{name: Ada}] is not valid JSON: "
        "Expecting property name "
        "enclosed in double quotes: line 1 column 2 (char 1)"
    ]


def test_cli_object_pair_of_another_kind(flow: Flow) -> None:
    assert cli_problems(flow, ["hire=[1]"]) == [
        PREFIX + "input [hire] expects an object (JSON), got an array"
    ]


def test_cli_pair_without_equals(flow: Flow) -> None:
    assert cli_problems(flow, ["hire={}", "urgent"]) == [
        PREFIX + "--input expects k=v, got [urgent]"
    ]
    assert cli_problems(flow, ["hire={}", "=x"]) == [PREFIX + "--input expects k=v, got [=x]"]


def test_cli_pair_for_an_unknown_input(flow: Flow) -> None:
    assert cli_problems(flow, ["hire={}", "urgnet=true"]) == [
        PREFIX + f"unknown input [urgnet]; did you mean [urgent]? {DECLARED}"
    ]


def test_cli_inputs_json_that_is_not_json(flow: Flow) -> None:
    assert cli_problems(flow, [], "{hire: 1}") == [
        PREFIX + "--inputs is not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    ]


def test_cli_inputs_json_refuses_nan(flow: Flow) -> None:
    assert cli_problems(flow, ["hire={}"], '{"ratio": NaN}') == [
        PREFIX + "--inputs is not valid JSON: NaN is not a JSON value"
    ]


def test_cli_inputs_json_that_is_not_an_object(flow: Flow) -> None:
    assert cli_problems(flow, ["hire={}"], "[1, 2]") == [
        PREFIX + "--inputs must be a JSON object, got an array"
    ]


def test_cli_inputs_json_values_are_checked(flow: Flow) -> None:
    assert cli_problems(flow, [], '{"hire": {}, "count": "3"}') == [
        PREFIX + 'input [count] must be an integer, got a string ("3")'
    ]


def test_cli_reports_conversion_and_check_problems_together(flow: Flow) -> None:
    # [hire] failed to convert, so it is not also reported as missing
    assert cli_problems(flow, ["hire=nope", "count=x", "bogus=1", "due=2027-13-01"]) == [
        PREFIX + "input [hire] expects a JSON object, but [nope] is not valid JSON: Expecting "
        "value: line 1 "
        "column 1 (char 0)",
        PREFIX + "input [count] expects an integer, got [x]",
        PREFIX + f"unknown input [bogus] {DECLARED}",
        PREFIX + "input [due] must be an ISO-8601 timestamp: [2027-13-01] is not an ISO-8601 "
        "timestamp (e.g. 2027-01-10T09:00:00Z or 2027-01-10)",
    ]


def test_cli_missing_required_input(flow: Flow) -> None:
    assert cli_problems(flow, ["count=1"]) == [PREFIX + "missing required input [hire] (object)"]


def test_cli_unreadable_inputs_json_does_not_also_report_missing_inputs(flow: Flow) -> None:
    assert cli_problems(flow, [], "{") == [
        PREFIX + "--inputs is not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    ]


def test_cli_a_later_good_pair_replaces_a_bad_one(flow: Flow) -> None:
    assert cli_problems(flow, ["hire={}", "count=x", "count=2"]) == [
        PREFIX + "input [count] expects an integer, got [x]"
    ]


def test_cli_flow_without_inputs(tmp_path: Path) -> None:
    bare = load(BARE, tmp_path)
    assert cli_inputs(bare, [], None) == {}
    assert cli_inputs(bare, [], "{}") == {}
    with pytest.raises(InputError) as info:
        cli_inputs(bare, ["x=1"], None)
    assert str(info.value) == "flow [bare]: unknown input [x] (this flow declares no inputs)"


# --- input_env -------------------------------------------------------------------------------


def test_input_env_turns_timestamps_into_aware_datetimes(flow: Flow) -> None:
    inputs = check_inputs(flow, {"hire": HIRE, "count": 2})
    env = input_env(flow, inputs)
    assert env["start"] == datetime(2027, 1, 10, tzinfo=UTC)
    assert env["start"].utcoffset() is not None
    assert env["due"] is None
    assert {k: v for k, v in env.items() if k != "start"} == {
        k: v for k, v in inputs.items() if k != "start"
    }
    assert inputs["start"] == "2027-01-10T00:00:00Z"  # the stored form is left alone


def test_input_env_of_a_flow_without_inputs(tmp_path: Path) -> None:
    assert input_env(load(BARE, tmp_path), {}) == {}
