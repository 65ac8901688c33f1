"""The one limit on how deep JSON a user gives may nest (``procflow.store.codec``): the scan of JSON
text every face runs before parsing (``depth_problem``), and the same limit on values
(``runtime.data.user_json.json_problems``), which every door of the engine asks."""

from __future__ import annotations

import time
from typing import Any

import pytest
from projects import nested_json, nested_value

from procflow.runtime.data.user_json import json_problems
from procflow.store.codec import MAX_JSON_DEPTH, TOO_DEEP, depth_problem, too_deep_at


def test_the_limit_is_64_levels_and_the_message_says_so() -> None:
    assert MAX_JSON_DEPTH == 64
    assert TOO_DEEP == "nested too deeply: more than 64 levels of objects and arrays"


@pytest.mark.parametrize("levels", [0, 1, 2, 63, 64])
def test_text_up_to_64_levels_passes(levels: int) -> None:
    assert depth_problem(nested_json(levels) if levels else '"flat"') is None


@pytest.mark.parametrize("levels", [65, 491, 1_000, 5_000, 100_000])
def test_text_past_64_levels_is_refused_where_level_65_opens(levels: int) -> None:
    text = nested_json(levels)
    at = 32 * len('{"d":') + 32 * len("[") + 1  # after the openers of levels 1 to 64: 193
    assert too_deep_at(text) == at
    assert depth_problem(text) == f"{TOO_DEEP} (level 65 opens at character {at})"


def test_brackets_in_strings_do_not_count() -> None:
    quoted = '"' + "[{" * 100 + '\\"' + "[" * 100 + '"'
    assert depth_problem(f'[{quoted}, {{"k": {quoted}}}]') is None
    assert depth_problem(nested_json(64, quoted)) is None


def test_many_brackets_side_by_side_are_not_deep() -> None:
    assert depth_problem("[" + ",".join(["[]"] * 10_000) + "]") is None


def test_text_with_unterminated_strings_is_scanned_in_linear_time() -> None:
    """An unterminated string once made the scan retry at every later quote: a body of escaped
    quotes took quadratic time (1 MiB: hours)."""
    text = '"' + '\\"' * 50_000  # 100 kB: 25 s for the quadratic scan
    started = time.perf_counter()
    assert depth_problem(text) is None
    assert depth_problem('"' + "x" * 100 + "[" * 100) is None  # inside the string to the end
    assert depth_problem("[" * 100 + '"unterminated') is not None
    assert time.perf_counter() - started < 2.0


# --- values ----------------------------------------------------------------------------------


def problems(value: Any) -> list[tuple[str, str]]:
    return [(p.where, p.problem) for p in json_problems(value)]


def test_values_up_to_64_levels_pass() -> None:
    assert problems(nested_value(64)) == []
    assert problems({"a": nested_value(63), "b": [nested_value(63)][0]}) == []


@pytest.mark.parametrize("levels", [65, 491, 1_000, 5_000, 100_000])
def test_values_past_64_levels_are_one_problem_at_their_member(levels: int) -> None:
    value = {"ok": 1, "deep": nested_value(levels - 1), "also": [nested_value(levels - 2)] * 3}
    assert problems(value) == [("deep", f"is {TOO_DEEP}"), ("also", f"is {TOO_DEEP}")]


def test_a_value_containing_itself_is_nested_too_deeply() -> None:
    loop: list[Any] = []
    loop.append({"again": loop})
    assert problems({"loop": loop}) == [("loop", f"is {TOO_DEEP}")]


def test_a_shared_value_is_measured_where_it_lies_deepest() -> None:
    shared = nested_value(40)
    assert problems({"a": shared, "b": shared}) == []
    assert problems({"a": shared, "b": nested_value(30, shared)}) == [("b", f"is {TOO_DEEP}")]
    assert problems({"b": nested_value(30, shared), "a": shared}) == [("b", f"is {TOO_DEEP}")]


def test_a_widely_shared_value_is_walked_a_bounded_number_of_times() -> None:
    """Each level holds the next twice: 2**60 paths, yet each container is walked once a level."""
    value: Any = "leaf"
    for _ in range(60):
        value = [value, value]
    started = time.perf_counter()
    assert problems({"tree": value}) == []
    assert time.perf_counter() - started < 2.0


def test_depth_and_other_problems_are_reported_together() -> None:
    value = {"deep": nested_value(70), "nan": float("nan")}
    assert problems(value) == [
        ("deep", f"is {TOO_DEEP}"),
        ("nan", "is NaN, which is not a JSON number"),
    ]
