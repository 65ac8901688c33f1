"""The static checks of ``call``: a step's own form (compiling one file) and the called flow's
name and inputs against the flows validated together (``check_calls_together``, what
``procflow validate`` and a deploy run), one case per message.

Diagnostics come back as ``file:line:col: severity: message``, as ``procflow validate`` prints
them without the trailing path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from procflow.model.ir import InputDecl
from procflow.model.source import Pos
from procflow.model.validate import check_calls_together, load_text

CHILD = """\
flow: provision
inputs:
  tenant: { type: string, required: true }
  plan: { type: string }
  seats: { type: integer }
steps:
  - hi: { log.write: { message: "{{ tenant }}" } }
"""
BARE = "flow: bare\nsteps:\n  - hi: { log.write: { message: m } }\n"
SHOP = """\
name: shop
entities:
  - name: Item
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
processes:
  - name: Tidy
    trigger: { onCreate: Item }
    steps:
      - { name: done, kind: end }
"""
HEAD = "flow: parent\ninputs:\n  who: { type: string, required: true }\nsteps:\n"


def check(
    tmp_path: Path,
    parent: str,
    others: dict[str, str] | None = None,
    deployed: dict[str, dict[str, InputDecl] | None] | None = None,
    intents: tuple[str, ...] = (),
) -> list[str]:
    """``parent`` (as ``p.flow.yaml``) validated together with ``others``; the parent's
    diagnostics as ``file:line:col: severity: message``."""
    texts = {"p.flow.yaml": parent, **(others or {})}
    files = [load_text(text, str(tmp_path / name), str(tmp_path)) for name, text in texts.items()]
    checked = check_calls_together(files, deployed, intents)
    return [
        f"{Path(d.pos.file).name}:{d.pos.line}:{d.pos.col}: {d.severity}: {d.message}"
        for d in checked[0].diagnostics
    ]


def steps(*lines: str) -> str:
    return HEAD + "".join(f"{line}\n" for line in lines)


def test_a_call_of_a_flow_validated_together_with_its_inputs_is_clean(tmp_path: Path) -> None:
    parent = steps(
        "  - a:",
        "      call: provision",
        '      inputs: { tenant: "{{ who }}", plan: pro, seats: 3 }',
        "  - b: { call: bare }",
    )
    assert check(tmp_path, parent, {"c.flow.yaml": CHILD, "b.flow.yaml": BARE}) == []


def test_an_unknown_flow_is_an_error_at_the_name_with_the_nearest_name(tmp_path: Path) -> None:
    parent = steps("  - a: { call: provison, inputs: { tenant: x } }")
    assert check(tmp_path, parent, {"c.flow.yaml": CHILD}) == [
        "p.flow.yaml:5:16: error: step [a]: call: no flow [provison] is deployed or validated "
        "with this file; did you mean [provision]?"
    ]


def test_a_flow_differing_in_case_says_names_are_case_sensitive(tmp_path: Path) -> None:
    parent = steps("  - a: { call: Bare }")
    assert check(tmp_path, parent, {"b.flow.yaml": BARE}) == [
        "p.flow.yaml:5:16: error: step [a]: call: no flow [Bare] is deployed or validated with "
        "this file; did you mean [bare]? (names are case-sensitive)"
    ]


def test_a_flow_far_from_every_name_has_no_suggestion(tmp_path: Path) -> None:
    parent = steps("  - a: { call: zzz-unrelated }")
    assert check(tmp_path, parent, {"b.flow.yaml": BARE}) == [
        "p.flow.yaml:5:16: error: step [a]: call: no flow [zzz-unrelated] is deployed or "
        "validated with this file"
    ]


def test_an_unknown_input_names_the_nearest_and_the_inputs(tmp_path: Path) -> None:
    parent = steps("  - a: { call: provision, inputs: { tenant: x, plna: pro } }")
    assert check(tmp_path, parent, {"c.flow.yaml": CHILD}) == [
        "p.flow.yaml:5:48: error: step [a]: flow [provision] has no input [plna]; did you mean "
        "[plan]? (its inputs: tenant, plan, seats)"
    ]


def test_an_input_given_to_a_flow_without_inputs_says_it_takes_none(tmp_path: Path) -> None:
    parent = steps("  - a: { call: bare, inputs: { x: 1 } }")
    assert check(tmp_path, parent, {"b.flow.yaml": BARE}) == [
        "p.flow.yaml:5:32: error: step [a]: flow [bare] has no input [x] (it takes no inputs)"
    ]


def test_a_missing_required_input_is_an_error_at_the_name(tmp_path: Path) -> None:
    parent = steps("  - a: { call: provision, inputs: { plan: pro } }")
    assert check(tmp_path, parent, {"c.flow.yaml": CHILD}) == [
        "p.flow.yaml:5:16: error: step [a]: call of flow [provision] is missing required input "
        "[tenant]"
    ]


def test_a_misspelt_required_input_is_one_error_not_two(tmp_path: Path) -> None:
    parent = steps("  - a: { call: provision, inputs: { tenat: x } }")
    assert check(tmp_path, parent, {"c.flow.yaml": CHILD}) == [
        "p.flow.yaml:5:37: error: step [a]: flow [provision] has no input [tenat]; did you mean "
        "[tenant]? (its inputs: tenant, plan, seats)"
    ]


@pytest.mark.parametrize(
    ("given", "col", "problem"),
    [
        ("seats: three", 55, "input [seats] of flow [provision] must be an integer, got a string"),
        ("seats: true", 55, "input [seats] of flow [provision] must be an integer, got a boolean"),
        ('seats: "n-{{ who }}"', 55, "input [seats] of flow [provision] must be an integer, got "
         "a string"),  # a template with text around is a string
        ("plan: [a]", 54, "input [plan] of flow [provision] must be a string, got a list"),
    ],
)  # fmt: skip
def test_a_literal_of_the_wrong_type_is_an_error_at_the_value(
    tmp_path: Path, given: str, col: int, problem: str
) -> None:
    parent = steps(f"  - a: {{ call: provision, inputs: {{ tenant: x, {given} }} }}")
    assert check(tmp_path, parent, {"c.flow.yaml": CHILD}) == [
        f"p.flow.yaml:5:{col}: error: step [a]: {problem}"
    ]


def test_a_single_expression_is_not_type_checked(tmp_path: Path) -> None:
    # its type is known at run time only: the child's start checks it then
    parent = steps('  - a: { call: provision, inputs: { tenant: x, seats: "{{ who }}" } }')
    assert check(tmp_path, parent, {"c.flow.yaml": CHILD}) == []


def test_calls_nested_in_group_for_each_and_recover_are_checked(tmp_path: Path) -> None:
    parent = steps(
        "  - g:",
        "      steps:",
        "        - a: { call: nope1 }",
        "  - each:",
        '      for_each: "{{ [1, 2] }}"',
        "      steps:",
        "        - b: { call: nope2 }",
        "  - c:",
        "      steps:",
        "        - x: { fail: no }",
        "      recover:",
        "        - d: { call: nope3 }",
        "recover:",
        "  - e: { call: nope4 }",
    )
    shown = check(tmp_path, parent)
    assert [s.split(": error: ")[1].split(":")[0] for s in shown] == [
        "step [a]",
        "step [b]",
        "step [d]",
        "step [e]",
    ]
    assert all("no flow [nope" in s for s in shown), shown


def test_a_flow_may_call_itself(tmp_path: Path) -> None:
    parent = steps('  - again: { call: parent, if: "{{ false }}", inputs: { who: x } }')
    assert check(tmp_path, parent) == []


def test_an_intent_process_is_refused_by_name(tmp_path: Path) -> None:
    parent = steps("  - a: { call: Tidy }")
    expected = [
        "p.flow.yaml:5:16: error: step [a]: call: [Tidy] is an intent process; call starts "
        "flows only"
    ]
    assert check(tmp_path, parent, {"shop.intent": SHOP}) == expected
    assert check(tmp_path, parent, intents=("Tidy",)) == expected  # a deployed one


def test_a_deployed_flow_is_checked_with_its_inputs(tmp_path: Path) -> None:
    seats = InputDecl("seats", "integer", Pos("d.flow.yaml", 3, 3, ""))
    deployed: dict[str, dict[str, InputDecl] | None] = {"deployed": {"seats": seats}}
    parent = steps("  - a: { call: deployed, inputs: { seats: x } }")
    assert check(tmp_path, parent, deployed=deployed) == [
        "p.flow.yaml:5:43: error: step [a]: input [seats] of flow [deployed] must be an "
        "integer, got a string"
    ]


def test_a_flow_validated_together_is_newer_than_the_deployed_one(tmp_path: Path) -> None:
    parent = steps("  - a: { call: provision, inputs: { tenant: x, seats: 3 } }")
    deployed: dict[str, dict[str, InputDecl] | None] = {"provision": {}}
    assert check(tmp_path, parent, {"c.flow.yaml": CHILD}, deployed) == []


def test_a_flow_whose_inputs_are_unknown_is_checked_by_name_only(tmp_path: Path) -> None:
    parent = steps("  - a: { call: vague, inputs: { anything: 1 } }")
    assert check(tmp_path, parent, deployed={"vague": None}) == []


def test_a_file_with_errors_takes_part_with_what_compiled(tmp_path: Path) -> None:
    broken_child = CHILD.replace("seats: { type: integer }", "seats: { type: integr }")
    broken_child += "  - bad: { nothing.here: {} }\n"
    parent = steps(
        "  - a: { call: provision, inputs: { tenant: x, whatever: 1 } }",  # inputs not trusted
        "  - b: { nope: 1 }",  # the parent's own error
        "  - c: { call: provison }",  # a call that compiled is checked still
    )
    files = {"c.flow.yaml": broken_child}
    shown = check(tmp_path, parent, files)
    assert len(shown) == 3, shown  # the parent's own two, then its call's
    assert all(s.startswith("p.flow.yaml:6:") for s in shown[:2]), shown
    assert shown[2] == (
        "p.flow.yaml:7:16: error: step [c]: call: no flow [provison] is deployed or validated "
        "with this file; did you mean [provision]?"
    )
    texts = {"c.flow.yaml": broken_child, "p.flow.yaml": parent}
    loaded = [load_text(t, str(tmp_path / n), str(tmp_path)) for n, t in texts.items()]
    child_alone = loaded[0].diagnostics
    assert check_calls_together(loaded)[0].diagnostics == child_alone  # its own errors only


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    parent = steps(
        "  - a: { call: provison }",
        "  - b: { call: provision, inputs: { plna: 1, seats: x } }",
        "  - c: { call: Tidy }",
        "  - d: { nope: 1 }",
    )
    shown = check(tmp_path, parent, {"c.flow.yaml": CHILD, "shop.intent": SHOP})
    assert [s.split(": error: ")[0] for s in shown] == [
        "p.flow.yaml:5:16",
        "p.flow.yaml:6:16",  # missing [tenant]
        "p.flow.yaml:6:37",  # no input [plna]
        "p.flow.yaml:6:53",  # seats: x
        "p.flow.yaml:7:16",  # an intent process
        "p.flow.yaml:8:8",  # the file's own errors, among the others by position
        "p.flow.yaml:8:10",
    ]


# --- a call step's own form: compiling one file ---------------------------------------------


@pytest.mark.parametrize("key", ["retry", "timeout"])
def test_detach_refuses_retry_and_timeout(tmp_path: Path, key: str) -> None:
    value = "{ count: 2, every: 1s }" if key == "retry" else "1h"
    parent = steps(f"  - a: {{ call: bare, detach: true, {key}: {value} }}")
    col = 36
    assert check(tmp_path, parent, {"b.flow.yaml": BARE}) == [
        f"p.flow.yaml:5:{col}: error: step [a]: [{key}] does not apply to a detached call: it "
        "goes on as soon as the child has started"
    ]


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("3", "call must be a flow's name, e.g. `call: provision-tenant`, got an integer"),
        ("[a, b]", "call must be a flow's name, e.g. `call: provision-tenant`, got a list"),
        ('""', "call must be a flow's name, e.g. `call: provision-tenant`, got a string"),
        ('"{{ who }}"', "call must name a flow, not an expression (a flow's name, e.g. "
         "`call: provision-tenant`)"),
    ],
)  # fmt: skip
def test_a_call_names_a_flow_by_a_plain_string(tmp_path: Path, name: str, problem: str) -> None:
    parent = steps(f"  - a: {{ call: {name} }}")
    assert check(tmp_path, parent) == [f"p.flow.yaml:5:16: error: step [a]: {problem}"]
