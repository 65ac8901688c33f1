"""FlowEnv: what an expression sees, with the run's inputs read on first use."""

from __future__ import annotations

import pytest

from procflow.runtime.interpret.flow_state import FlowEnv


def env_with(inputs: dict[str, object], loads: list[int]) -> FlowEnv:
    def load() -> dict[str, object]:
        loads.append(1)
        return inputs

    return FlowEnv(frozenset({"ask", "later"}), load, frozenset({"k", "note", "ask"}))


def test_inputs_are_read_once_and_only_when_an_input_is_named() -> None:
    loads: list[int] = []
    env = env_with({"k": "a"}, loads)
    env["ask"] = {"ok": True}
    assert env["ask"] == {"ok": True} and "ask" in env
    assert env["later"] is None and "later" in env  # a step not reached reads as null
    assert loads == []
    assert env["k"] == "a" and "k" in env
    assert env["k"] == "a"
    assert loads == [1]


def test_a_binding_keeps_its_value_over_an_input_of_the_same_name() -> None:
    loads: list[int] = []
    env = env_with({"k": "a", "ask": "from inputs"}, loads)
    env["ask"] = "bound"
    assert env["k"] == "a"
    assert env["ask"] == "bound"


def test_a_declared_input_not_given_is_not_bound_and_an_unknown_name_raises() -> None:
    loads: list[int] = []
    env = env_with({"k": "a"}, loads)
    assert "note" not in env
    assert loads == [1]
    with pytest.raises(KeyError):
        env["note"]
    with pytest.raises(KeyError):
        env["nobody"]
