"""The flow dialect compiler: one failing case per rule and per message, plus what must pass.

Each case compiles YAML text as ``t.flow.yaml`` exactly as ``procflow validate`` does and asserts
the complete list of diagnostics as ``file:line:col: severity: message`` substrings.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from procflow.model.ir import Flow
from procflow.model.validate import Loaded, load_text

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# the common head of most cases: step lines start at line 5
HEAD = "flow: t\ninputs:\n  deal: { type: object, required: true }\nsteps:\n"
LOG = "{ log.write: { message: m } }"
F = "t.flow.yaml:"


def compile_text(
    tmp_path: Path, text: str, files: Mapping[str, str] | None = None
) -> tuple[Loaded, list[str]]:
    """Write ``files`` (relative to the project) and compile ``text`` as ``t.flow.yaml``.

    Diagnostics come back as ``<file name>:line:col: severity: message``.
    """
    for rel, content in (files or {}).items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content), encoding="utf-8")
    loaded = load_text(text, str(tmp_path / "t.flow.yaml"), project_dir=str(tmp_path))
    shown = [
        f"{Path(d.pos.file).name}:{d.pos.line}:{d.pos.col}: {d.severity}: {d.message}"
        for d in loaded.diagnostics
    ]
    return loaded, shown


def assert_exactly(shown: list[str], expected: list[str]) -> None:
    """Every expected substring appears, and every diagnostic is one of the expected."""
    missing = [e for e in expected if not any(e in s for s in shown)]
    extra = [s for s in shown if not any(e in s for e in expected)]
    assert not missing and not extra, f"missing: {missing}\nextra: {extra}\nall: {shown}"


def compile_ok(tmp_path: Path, text: str, files: Mapping[str, str] | None = None) -> Flow:
    loaded, shown = compile_text(tmp_path, text, files)
    assert shown == [], shown
    assert isinstance(loaded.definition, Flow)
    return loaded.definition


def case(id_: str, text: str, *expected: str) -> object:
    return pytest.param(text, list(expected), id=id_)


def run_cases(tmp_path: Path, text: str, expected: list[str]) -> None:
    loaded, shown = compile_text(tmp_path, text)
    assert_exactly(shown, expected)
    if any(": error: " in e or "error" in e.split(":")[:4] for e in shown):
        assert loaded.definition is None


# --- file, inputs, trigger ---------------------------------------------------------------------

FILE_CASES = [
    case(
        "missing flow",
        f"steps:\n  - a: {LOG}\n",
        F + "1:1: error: flow: missing required key [flow]",
    ),
    case(
        "bad flow name",
        f"flow: 'a b'\nsteps:\n  - a: {LOG}\n",
        F + "1:7: error: flow: the flow name [a b] may hold letters, digits",
    ),
    case(
        "unknown top key",
        f"flow: t\nstep:\n  - a: {LOG}\n",
        F + "1:1: error: flow: missing required key [steps]",
        F + "2:1: error: flow: unknown key [step]; did you mean [steps]?",
    ),
    case(
        "empty steps",
        "flow: t\nsteps: []\n",
        F + "2:8: error: flow: steps must list at least one step",
    ),
    case(
        "steps not a list",
        "flow: t\nsteps: { a: 1 }\n",
        F + "2:8: error: flow: steps must be a list, got a mapping",
    ),
    case(
        "version bool",
        f"flow: t\nversion: true\nsteps:\n  - a: {LOG}\n",
        F + "2:10: error: flow: version must be a label",
    ),
    case(
        "input type unknown",
        f"flow: t\ninputs:\n  a: {{ type: strng }}\nsteps:\n  - s: {LOG}\n",
        F + "3:14: error: input [a]: unknown type [strng]; did you mean [string]?",
    ),
    case(
        "input without type",
        f"flow: t\ninputs:\n  a: {{ typ: string }}\nsteps:\n  - s: {LOG}\n",
        F + "3:6: error: input [a]: missing required key [type]",
        F + "3:8: error: input [a]: unknown key [typ]; did you mean [type]?",
    ),
    case(
        "input default wrong type",
        f"flow: t\ninputs:\n  b: {{ type: integer, default: x }}\nsteps:\n  - s: {LOG}\n",
        F + "3:32: error: input [b]: default must be an integer, got a string",
    ),
    case(
        "input default naive timestamp",
        f"flow: t\ninputs:\n  c: {{ type: timestamp, default: '2027-01-01T00:00:00' }}\n"
        f"steps:\n  - s: {LOG}\n",
        F + "3:34: error: input [c]: default [2027-01-01T00:00:00] is not an ISO-8601 timestamp",
    ),
    case(
        "input required with default",
        "flow: t\ninputs:\n  d: { type: string, required: true, default: x }\n"
        f"steps:\n  - s: {LOG}\n",
        F + "3:47: error: input [d]: a required input never uses its default",
    ),
    case(
        "input default templated",
        "flow: t\ninputs:\n  d: { type: string, default: '{{ x }}' }\n"
        f"steps:\n  - s: {LOG}\n",
        F + "3:31: error: input [d]: default is a literal value; {{ }} is not evaluated here",
    ),
    case(
        "input reserved",
        f"flow: t\ninputs:\n  run: {{ type: string }}\nsteps:\n  - s: {LOG}\n",
        F + "3:3: error: input [run]: [run] is a reserved name (run, error, now)",
    ),
    case(
        "input name not identifier",
        f"flow: t\ninputs:\n  a-b: {{ type: string }}\nsteps:\n  - s: {LOG}\n",
        F + "3:3: error: input [a-b]: an input name [a-b] is not an identifier",
    ),
    case(
        "inputs not a mapping",
        f"flow: t\ninputs: [a]\nsteps:\n  - s: {LOG}\n",
        F + "2:9: error: flow: inputs must be a mapping, got a list",
    ),
    case(
        "trigger unknown event",
        f"flow: t\ntrigger: {{ event: slack.aproval, as: x }}\ninputs:\n  x: {{ type: object }}\n"
        f"steps:\n  - a: {LOG}\n",
        F + "2:19: error: trigger: connector [slack] has no event [aproval]; "
        "did you mean [approval]?",
    ),
    case(
        "trigger event is an action",
        f"flow: t\ntrigger: {{ event: slack.post, as: x }}\ninputs:\n  x: {{ type: object }}\n"
        f"steps:\n  - a: {LOG}\n",
        F + "2:19: error: trigger: connector [slack] has no event [post]; [post] is an action",
    ),
    case(
        "trigger unknown connector",
        f"flow: t\ntrigger: {{ event: slak.approval, as: x }}\ninputs:\n  x: {{ type: object }}\n"
        f"steps:\n  - a: {LOG}\n",
        F + "2:19: error: trigger: unknown connector [slak]; did you mean [slack]?",
    ),
    case(
        "trigger as missing, when not a condition",
        "flow: t\ntrigger: { event: slack.approval, when: 'x' }\n"
        f"inputs:\n  x: {{ type: object }}\nsteps:\n  - a: {LOG}\n",
        F + "2:10: error: trigger: missing required key [as]",
        F + "2:41: error: trigger: when is a condition and must be exactly one {{ expression }}; "
        'e.g. "{{ x }}"',
    ),
    case(
        "trigger as undeclared",
        f"flow: t\ntrigger: {{ event: slack.approval, as: xx }}\ninputs:\n  x: {{ type: object }}\n"
        f"steps:\n  - a: {LOG}\n",
        F + "2:39: error: trigger: as [xx] is not a declared input; did you mean [x]?",
    ),
    case(
        "trigger as not object, other input without default, bad when",
        "flow: t\ntrigger: { event: slack.approval, as: deal, when: '{{ deal.x' }\n"
        "inputs:\n  deal: { type: string }\n  other: { type: string }\n"
        f"steps:\n  - a: {LOG}\n",
        F + "2:39: error: trigger: as [deal] must name an object input, but it is a string",
        F + "2:52: error: trigger: when: unterminated [{{]: missing [}}]",
        F + "5:10: error: input [other]: needs a default: a run started by the trigger only "
        "supplies [deal]",
    ),
    case(
        "trigger as an integer input",
        "flow: t\ntrigger: { event: slack.approval, as: n }\n"
        f"inputs:\n  n: {{ type: integer, default: 1 }}\nsteps:\n  - a: {LOG}\n",
        F + "2:39: error: trigger: as [n] must name an object input, but it is an integer",
    ),
    case(
        "trigger when names an unknown input",
        f"flow: t\ntrigger: {{ event: slack.approval, as: x, when: '{{{{ y.ok }}}}' }}\n"
        f"inputs:\n  x: {{ type: object }}\nsteps:\n  - a: {LOG}\n",
        F + "2:52: error: trigger: when: unknown name [y]",
    ),
    case(
        "trigger unknown key",
        f"flow: t\ntrigger: {{ event: slack.approval, as: x, wen: y }}\n"
        f"inputs:\n  x: {{ type: object }}\nsteps:\n  - a: {LOG}\n",
        F + "2:42: error: trigger: unknown key [wen]; did you mean [when]?",
    ),
]


@pytest.mark.parametrize(("text", "expected"), FILE_CASES)
def test_file_inputs_trigger(tmp_path: Path, text: str, expected: list[str]) -> None:
    run_cases(tmp_path, text, expected)


# --- step shape, ids, names ------------------------------------------------------------------

SHAPE_CASES = [
    case(
        "non-single-key step",
        HEAD + "  - a:\n    log.write: { message: m }\n",
        F + "5:5: error: step: a step is a single-key map `- <id>: <body>`, this one has keys "
        "[a], [log.write]; indent the body under [a]",
    ),
    case(
        "step is a string",
        HEAD + "  - w\n",
        F + "5:5: error: step: a step is a single-key map `- <id>: <body>`, got a string",
    ),
    case(
        "step is an empty mapping",
        HEAD + "  - {}\n",
        F + "5:5: error: step: a step is a single-key map `- <id>: <body>`, got an empty mapping",
    ),
    case(
        "body is a string",
        HEAD + "  - w: slack.post\n",
        F + "5:8: error: step [w]: the body must be a mapping of one construct",
    ),
    case(
        "id not an identifier",
        HEAD + "  - 1w: { wait: { for: 1h } }\n",
        F + "5:5: error: step: step id [1w] is not an identifier",
    ),
    case(
        "two constructs",
        HEAD + "  - a: { log.write: { message: m }, wait: { for: 1h } }\n",
        F + "5:37: error: step [a]: has 2 constructs, [log.write] and [wait]; a step holds "
        "exactly one",
    ),
    case(
        "no construct",
        HEAD + "  - a: { description: x }\n",
        F + "5:8: error: step [a]: has no construct; a step holds exactly one of "
        "<connector>.<action>, wait, wait_for, repeat, for_each, steps (a group), set, fail or "
        "call",
    ),
    case(
        "misspelt construct",
        HEAD + "  - w: { wiat: { for: 1h } }\n",
        F + "5:8: error: step [w]: has no construct",
        F + "5:10: error: step [w]: unknown key [wiat]; did you mean [wait]?",
    ),
    case(
        "unknown modifier",
        HEAD + "  - w: { wait: { for: 1h }, iff: '{{ true }}' }\n",
        F + "5:29: error: step [w]: unknown key [iff]; did you mean [if]?",
    ),
    case(
        "duplicate id",
        HEAD + f"  - a: {LOG}\n  - a: {LOG}\n",
        F + "6:5: error: step [a]: the id [a] is used twice (first at line 5); step ids are "
        "unique in the whole file",
    ),
    case(
        "duplicate id across nesting",
        HEAD + f"  - a: {LOG}\n  - g:\n      steps:\n        - a: {LOG}\n",
        F + "8:11: error: step [a]: the id [a] is used twice (first at line 5)",
    ),
    case(
        "duplicate id in recover",
        HEAD + f"  - a: {LOG}\nrecover:\n  - a: {LOG}\n",
        F + "7:5: error: step [a]: the id [a] is used twice (first at line 5)",
    ),
    case(
        "reserved id",
        HEAD + f"  - run: {LOG}\n  - error: {LOG}\n  - now: {LOG}\n",
        F + "5:5: error: step [run]: [run] is a reserved name (run, error, now); choose another id",
        F + "6:5: error: step [error]: [error] is a reserved name",
        F + "7:5: error: step [now]: [now] is a reserved name",
    ),
    case(
        "id collides with input",
        HEAD + f"  - deal: {LOG}\n",
        F + "5:5: error: step [deal]: the id [deal] is also an input; step ids, inputs and loop "
        "names must differ",
    ),
    case(
        "loop name collides with input",
        HEAD + f"  - each:\n      for_each: '{{{{ [1] }}}}'\n      as: deal\n      steps:\n"
        f"        - s: {LOG}\n",
        F + "7:11: error: step [each]: the loop name [deal] is also an input",
    ),
    case(
        "loop name collides with step id",
        HEAD + f"  - each:\n      for_each: '{{{{ [1] }}}}'\n      as: s\n      steps:\n"
        f"        - s: {LOG}\n",
        F + "7:11: error: step [each]: the loop name [s] is also a step id",
    ),
    case(
        "loop name reserved",
        HEAD + f"  - each:\n      for_each: '{{{{ [1] }}}}'\n      as: now\n      steps:\n"
        f"        - s: {LOG}\n",
        F + "7:11: error: step [each]: [now] is a reserved name (run, error, now)",
    ),
    case(
        "loop name shadows enclosing loop",
        HEAD + "  - outer:\n      for_each: '{{ [1] }}'\n      steps:\n        - inner:\n"
        "            for_each: '{{ [2] }}'\n            steps:\n"
        f"              - s: {LOG}\n",
        F + "9:13: error: step [inner]: the loop name [item] is already the name of an "
        "enclosing loop (for_each's default loop name); name this loop with `as:`",
    ),
    case(
        "loop name not an identifier",
        HEAD + f"  - each:\n      for_each: '{{{{ [1] }}}}'\n      as: a-b\n      steps:\n"
        f"        - s: {LOG}\n",
        F + "7:11: error: step [each]: as [a-b] is not an identifier",
    ),
]


@pytest.mark.parametrize(("text", "expected"), SHAPE_CASES)
def test_step_shape_and_names(tmp_path: Path, text: str, expected: list[str]) -> None:
    run_cases(tmp_path, text, expected)


# --- constructs ------------------------------------------------------------------------------


def repeat(body: str) -> str:
    return HEAD + f"  - r:\n      repeat: {body}\n      steps:\n        - c: {LOG}\n"


CONSTRUCT_CASES = [
    case(
        "wait with both",
        HEAD + "  - w: { wait: { for: 2d, until: '2027-01-01' } }\n",
        F + "5:27: error: step [w]: wait has both [for] and [until]; give exactly one",
    ),
    case(
        "wait with neither",
        HEAD + "  - w: { wait: {} }\n",
        F + "5:16: error: step [w]: wait needs exactly one of [for] (a duration) or [until]",
    ),
    case(
        "wait unknown key",
        HEAD + "  - w: { wait: { fr: 1h } }\n",
        F + "5:16: error: step [w]: wait needs exactly one of",
        F + "5:18: error: step [w] wait: unknown key [fr]; did you mean [for]?",
    ),
    case(
        "wait for bad duration",
        HEAD + "  - w: { wait: { for: 2x } }\n",
        F + "5:23: error: step [w]: wait.for: [2x] is not a valid duration",
    ),
    case(
        "wait for zero",
        HEAD + "  - w: { wait: { for: 0s } }\n",
        F + "5:23: error: step [w]: wait.for must be longer than zero, got 0s",
    ),
    case(
        "wait for an integer",
        HEAD + "  - w: { wait: { for: 30 } }\n",
        F + "5:23: error: step [w]: wait.for must be a duration such as 2d or P2D, got an integer",
    ),
    case(
        "wait until not a timestamp",
        HEAD + "  - w: { wait: { until: tomorrow } }\n",
        F + "5:25: error: step [w]: wait.until [tomorrow] is not an ISO-8601 timestamp",
    ),
    case(
        "wait until without offset",
        HEAD + "  - w: { wait: { until: '2027-01-01T10:00:00' } }\n",
        F + "5:25: error: step [w]: wait.until [2027-01-01T10:00:00] is not an ISO-8601 "
        "timestamp with an offset",
    ),
    case(
        "wait not a mapping",
        HEAD + "  - w: { wait: 2d }\n",
        F + "5:16: error: step [w]: wait must be a mapping, got a string",
    ),
    case(
        "wait_for without timeout",
        HEAD + "  - w: { wait_for: slack.approval, match: { message: x } }\n",
        F + "5:8: error: step [w]: missing required key [timeout]",
    ),
    case(
        "wait_for match missing a correlate_on key",
        HEAD + "  - w: { wait_for: slack.approval, match: {}, timeout: 1h }\n",
        F + "5:43: error: step [w]: match is missing [message], a correlate_on key of "
        "slack.approval",
    ),
    case(
        "wait_for without match",
        HEAD + "  - w: { wait_for: slack.approval, timeout: 1h }\n",
        F + "5:8: error: step [w]: missing required key [match]: slack.approval correlates on "
        "[message]",
    ),
    case(
        "wait_for match with an extra key",
        HEAD + "  - w: { wait_for: slack.approval, match: { message: x, user: y }, timeout: 1h }\n",
        F + "5:57: error: step [w]: match key [user] is not a correlate_on key of slack.approval "
        "(it correlates on [message])",
    ),
    case(
        "wait_for match key misspelt",
        HEAD + "  - w: { wait_for: slack.approval, match: { mesage: x }, timeout: 1h }\n",
        F + "5:43: error: step [w]: match is missing [message]",
        F + "5:45: error: step [w]: match key [mesage] is not a correlate_on key of "
        "slack.approval; did you mean [message]?",
    ),
    case(
        "wait_for match literal of the wrong type",
        HEAD + "  - w: { wait_for: slack.approval, match: { message: 5 }, timeout: 1h }\n",
        F + "5:54: error: step [w]: match.message must be a string, got an integer",
    ),
    case(
        "wait_for match null",
        HEAD + "  - w: { wait_for: slack.approval, match: { message: null }, timeout: 1h }\n",
        F + "5:54: error: step [w]: match.message is null; a correlation value is never null",
    ),
    case(
        "wait_for unknown event",
        HEAD + "  - w: { wait_for: slack.aproval, match: { message: x }, timeout: 1h }\n",
        F + "5:20: error: step [w]: connector [slack] has no event [aproval]; did you mean "
        "[approval]?",
    ),
    case(
        "wait_for not connector.event",
        HEAD + "  - w: { wait_for: approval, timeout: 1h }\n",
        F + "5:20: error: step [w]: [approval] is not <connector>.<event>",
    ),
    case(
        "wait_for bad timeout and lookback",
        HEAD + "  - w: { wait_for: slack.approval, match: { message: x }, timeout: -1h, "
        "lookback: soon }\n",
        F + "5:68: error: step [w]: timeout must be longer than zero, got -1h",
        F + "5:83: error: step [w]: lookback: [soon] is not a valid duration",
    ),
    case(
        "wait_for timeout templated",
        HEAD + "  - w: { wait_for: slack.approval, match: { message: x }, timeout: '{{ 1 }}' }\n",
        F + "5:68: error: step [w]: timeout must be a literal duration",
    ),
    case(
        "repeat max 0",
        repeat("{ every: 30s, max: 0, until: '{{ c }}' }"),
        F + "6:34: error: step [r]: repeat.max must be a positive integer, got 0; max bounds "
        "the polling loop, there is no unbounded form",
    ),
    case(
        "repeat max negative",
        repeat("{ every: 30s, max: -2, until: '{{ c }}' }"),
        F + "6:34: error: step [r]: repeat.max must be a positive integer, got -2",
    ),
    case(
        "repeat max missing",
        repeat("{ every: 30s, until: '{{ c }}' }"),
        F + "6:15: error: step [r] repeat: missing required key [max] (a positive integer bound)",
    ),
    case(
        "repeat max a string",
        repeat("{ every: 30s, max: '5', until: '{{ c }}' }"),
        F + "6:34: error: step [r]: repeat.max must be a positive integer, got a string",
    ),
    case(
        "repeat max a float",
        repeat("{ every: 30s, max: 2.5, until: '{{ c }}' }"),
        F + "6:34: error: step [r]: repeat.max must be a positive integer, got a number",
    ),
    case(
        "repeat every and until missing",
        repeat("{ max: 3 }"),
        F + "6:15: error: step [r] repeat: missing required key [every]",
        F + "6:15: error: step [r] repeat: missing required key [until]",
    ),
    case(
        "repeat every zero",
        repeat("{ every: PT0S, max: 3, until: '{{ c }}' }"),
        F + "6:24: error: step [r]: repeat.every must be longer than zero",
    ),
    case(
        "repeat until not a condition",
        repeat("{ every: 1m, max: 3, until: done }"),
        F + "6:43: error: step [r]: repeat.until is a condition and must be exactly one "
        '{{ expression }}; e.g. "{{ done }}"',
    ),
    case(
        "repeat unknown key",
        repeat("{ every: 1m, max: 3, until: '{{ c }}', tries: 2 }"),
        F + "6:54: error: step [r] repeat: unknown key [tries]",
    ),
    case(
        "repeat without steps",
        HEAD + "  - r: { repeat: { every: 1m, max: 3, until: '{{ true }}' } }\n",
        F + "5:8: error: step [r]: missing required key [steps]",
    ),
    case(
        "for_each literal list",
        HEAD + f"  - each:\n      for_each: [1, 2]\n      steps:\n        - s: {LOG}\n",
        F + "6:17: error: step [each]: for_each must be exactly one {{ expression }} giving a list",
    ),
    case(
        "for_each text template",
        HEAD + f"  - each:\n      for_each: 'x {{{{ deal }}}}'\n      steps:\n        - s: {LOG}\n",
        F + "6:17: error: step [each]: for_each is the list to iterate and must be exactly one "
        "{{ expression }}",
    ),
    case(
        "group with no steps",
        HEAD + "  - g: { steps: [] }\n",
        F + "5:17: error: step [g]: steps must list at least one step",
    ),
    case(
        "set key not an identifier",
        HEAD + "  - s: { set: { 1x: 1 } }\n",
        F + "5:17: error: step [s]: a set name [1x] is not an identifier",
    ),
    case(
        "set not a mapping",
        HEAD + "  - s: { set: [1] }\n",
        F + "5:15: error: step [s]: set must be a mapping, got a list",
    ),
    case(
        "fail not a string",
        HEAD + "  - f: { fail: 42 }\n",
        F + "5:16: error: step [f]: fail must be a string, got an integer",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CONSTRUCT_CASES)
def test_constructs(tmp_path: Path, text: str, expected: list[str]) -> None:
    run_cases(tmp_path, text, expected)


# --- modifiers -------------------------------------------------------------------------------

MODIFIER_CASES = [
    case(
        "retry on a wait",
        HEAD + "  - w: { wait: { for: 1h }, retry: { count: 1, every: 1s } }\n",
        F + "5:29: error: step [w]: [retry] is not allowed on a wait step; retry applies to "
        "action and call steps only",
    ),
    case(
        "recover on an action",
        HEAD + f"  - a: {{ log.write: {{ message: m }}, recover: [ {{ b: {LOG} }} ] }}\n",
        F + "5:37: error: step [a]: [recover] is not allowed on an action step; recover applies "
        "to group, for_each and repeat steps only",
    ),
    case(
        "timeout on a group",
        HEAD + f"  - g:\n      timeout: 1h\n      steps:\n        - c: {LOG}\n",
        F + "6:7: error: step [g]: [timeout] is not allowed on a group; timeout applies to "
        "action and call steps only",
    ),
    case(
        "steps on an action",
        HEAD + f"  - a: {{ log.write: {{ message: m }}, steps: [ {{ b: {LOG} }} ] }}\n",
        F + "5:37: error: step [a]: [steps] is not allowed on an action step",
    ),
    case(
        "as on a group",
        HEAD + f"  - g:\n      as: x\n      steps:\n        - c: {LOG}\n",
        F + "6:7: error: step [g]: [as] is not allowed on a group; as belongs to for_each",
    ),
    case(
        "lookback on an action",
        HEAD + "  - a: { log.write: { message: m }, lookback: 1h }\n",
        F + "5:37: error: step [a]: [lookback] is not allowed on an action step; lookback "
        "belongs to wait_for",
    ),
    case(
        "retry unknown key",
        HEAD + "  - b: { log.write: { message: m }, retry: { cout: 1, every: 1s } }\n",
        F + "5:44: error: step [b] retry: missing required key [count]",
        F + "5:46: error: step [b] retry: unknown key [cout]; did you mean [count]?",
    ),
    case(
        "retry count 0",
        HEAD + "  - s: { log.write: { message: m }, retry: { count: 0, every: PT1M } }\n",
        F + "5:53: error: step [s]: retry.count must be at least 1, got 0",
    ),
    case(
        "retry count not an integer",
        HEAD + "  - s: { log.write: { message: m }, retry: { count: two, every: 1s } }\n",
        F + "5:53: error: step [s]: retry.count must be an integer, got a string",
    ),
    case(
        "retry every missing",
        HEAD + "  - s: { log.write: { message: m }, retry: { count: 2 } }\n",
        F + "5:44: error: step [s] retry: missing required key [every]",
    ),
    case(
        "retry every bad",
        HEAD + "  - s: { log.write: { message: m }, retry: { count: 2, every: 30 } }\n",
        F + "5:63: error: step [s]: retry.every: [30] is not a duration",
    ),
    case(
        "timeout zero",
        HEAD + "  - s: { log.write: { message: m }, timeout: 0s }\n",
        F + "5:46: error: step [s]: timeout must be longer than zero, got 0s",
    ),
    case(
        "timeout not a scalar",
        HEAD + "  - s: { log.write: { message: m }, timeout: { s: 1 } }\n",
        F + "5:46: error: step [s]: timeout must be a duration, got a mapping",
    ),
    case(
        "retry every not a scalar",
        HEAD + "  - s: { log.write: { message: m }, retry: { count: 1, every: [1s] } }\n",
        F + "5:63: error: step [s]: retry.every must be a duration, got a list",
    ),
    case(
        "optional not a boolean",
        HEAD + "  - s: { log.write: { message: m }, optional: yes }\n",
        F + "5:47: error: step [s]: optional must be true or false, got a string",
    ),
    case(
        "if a text template",
        HEAD + "  - b: { log.write: { message: m }, if: 'x {{ deal }}' }\n",
        F + "5:41: error: step [b]: if is a condition and must be exactly one {{ expression }}; "
        "put all of it inside one {{ }}",
    ),
    case(
        "if a plain string",
        HEAD + "  - b: { log.write: { message: m }, if: yes }\n",
        F + "5:41: error: step [b]: if is a condition",
    ),
    case(
        "description not a string",
        HEAD + "  - b: { log.write: { message: m }, description: [x] }\n",
        F + "5:50: error: step [b]: description must be a string, got a list",
    ),
    case(
        "empty recover",
        HEAD + f"  - g:\n      steps:\n        - c: {LOG}\n      recover: []\n",
        F + "8:16: error: step [g]: recover must list at least one step",
    ),
]


@pytest.mark.parametrize(("text", "expected"), MODIFIER_CASES)
def test_modifiers(tmp_path: Path, text: str, expected: list[str]) -> None:
    run_cases(tmp_path, text, expected)


# --- connector calls -------------------------------------------------------------------------

ACTION_CASES = [
    case(
        "unknown connector",
        HEAD + "  - a: { slak.post: { channel: c, text: t } }\n",
        F + "5:10: error: step [a]: unknown connector [slak]; did you mean [slack]?",
    ),
    case(
        "unknown action",
        HEAD + "  - a: { slack.pots: { channel: c, text: t } }\n",
        F + "5:10: error: step [a]: connector [slack] has no action [pots]; did you mean [post]?",
    ),
    case(
        "an event called as an action",
        HEAD + "  - a: { slack.approval: { message: m } }\n",
        F + "5:10: error: step [a]: connector [slack] has no action [approval]; [approval] is an "
        "event, wait for it with `wait_for: slack.approval`",
    ),
    case(
        "unknown arg (its required twin is not reported again)",
        HEAD + "  - a: { slack.post: { chanel: c, text: t } }\n",
        F + "5:24: error: step [a]: slack.post has no arg [chanel]; did you mean [channel]? "
        "(args: channel, text, blocks, thread_ts)",
    ),
    case(
        "missing required arg",
        HEAD + "  - a: { slack.post: { channel: c } }\n",
        F + "5:22: error: step [a]: slack.post is missing required arg [text]",
    ),
    case(
        "no args at all",
        HEAD + "  - w: { log.write: }\n",
        F + "5:10: error: step [w]: log.write is missing required arg [message]",
    ),
    case(
        "args not a mapping",
        HEAD + "  - w: { log.write: hello }\n",
        F + "5:21: error: step [w]: the args of log.write must be a mapping, got a string",
    ),
    case(
        "wrong literal arg type",
        HEAD + "  - a: { slack.post: { channel: 42, text: t } }\n",
        F + "5:33: error: step [a]: slack.post arg [channel] must be a string, got an integer",
    ),
    case(
        "wrong literal types; a single {{ }} is not checked, a text template is a string",
        HEAD + "  - h: { http.request: { url: u, expect: 200, method: '{{ 1 }}', "
        "headers: 'x {{ deal }}' } }\n",
        F + "5:42: error: step [h]: http.request arg [expect] must be an array, got an integer",
        F + "5:75: error: step [h]: http.request arg [headers] must be an object, got a string",
    ),
    case(
        "not connector.action",
        HEAD + "  - a: { .post: {} }\n",
        F + "5:10: error: step [a]: [] is not <connector>.<name>",
    ),
]


@pytest.mark.parametrize(("text", "expected"), ACTION_CASES)
def test_action_calls(tmp_path: Path, text: str, expected: list[str]) -> None:
    run_cases(tmp_path, text, expected)


# --- what must pass --------------------------------------------------------------------------


def test_onboarding_example_validates_clean(tmp_path: Path) -> None:
    project = tmp_path / "onboarding"
    shutil.copytree(EXAMPLES / "onboarding", project)
    text = (project / "onboarding.flow.yaml").read_text(encoding="utf-8")
    loaded = load_text(text, str(project / "onboarding.flow.yaml"), project_dir=str(project))
    assert loaded.diagnostics == []
    flow = loaded.definition
    assert isinstance(flow, Flow)
    assert [s.id for s in flow.steps] == ["cooling_off", "day_before", "ask", "approval", "indexed"]
    assert sorted(flow.connectors) == ["log", "search", "slack"]
    assert flow.connectors["search"].source == "project"


def test_every_construct_and_scope_compiles(tmp_path: Path) -> None:
    flow = compile_ok(
        tmp_path,
        HEAD
        + """\
  - g:
      description: a group with its own recovery
      steps:
        - n: { log.write: { message: m } }
      recover:
        - r1: { log.write: { message: "{{ error.message }} {{ n }}" } }
        - r2: { log.write: { message: "{{ r1 }}" } }
  - e: { log.write: { message: "{{ g.n }} {{ g.r1 }}" } }
  - each:
      for_each: "{{ [1, 2] }}"
      as: x
      steps:
        - s: { set: { v: "{{ x }}" } }
        - t: { log.write: { message: "{{ s.v }} {{ run.id }} {{ run.started_at }}" } }
  - f: { fail: "{{ each[0].s.v }} {{ each | length }}", if: false }
  - o: { slack.post: { channel: c, text: t }, optional: true, if: true, timeout: PT5M }
  - o2: { log.write: { message: "{{ o.error.message }} {{ o.ts }}" } }
  - w: { wait: { for: '{{ duration("1h") }}' } }
  - v: { wait: { until: '{{ w.until | plus(1d) }}' } }
  - d: { wait: { until: '2027-01-10' } }
  - z: { wait: { until: '2027-01-10T09:00:00+02:00' } }
  - lit: { wait_for: slack.approval, match: { message: "5" }, timeout: P1D, lookback: 1h }
recover:
  - top: { log.write: { message: "{{ error.step }} {{ o.ts }}" } }
output:
  a: "{{ e }}"
  b: ["{{ each[-1].t }}", 3, null]
""",
    )
    kinds = [type(s).__name__ for s in flow.steps]
    assert kinds == [
        "GroupStep", "ActionStep", "ForEachStep", "FailStep", "ActionStep", "ActionStep",
        "WaitStep", "WaitStep", "WaitStep", "WaitStep", "WaitForStep",
    ]  # fmt: skip
    assert flow.recover is not None and flow.recover[0].id == "top"
