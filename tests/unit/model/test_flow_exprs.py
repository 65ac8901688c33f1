"""Expressions in flow files: syntax errors at their character, names resolved per scope.

Scopes: inputs and earlier steps of this and enclosing scopes; inner steps only through their
owner; loop names inside the loop; ``error`` inside recover; ``run`` everywhere but the trigger.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_flow import HEAD, LOG, F, assert_exactly, case, compile_ok, compile_text, run_cases

REPEAT_HEAD = HEAD + "  - r:\n      repeat: { every: 1m, max: 3, until: '{{ c != null }}' }\n"

NAME_CASES = [
    case(
        "a later step",
        HEAD + "  - a: { log.write: { message: '{{ ask.ts }}' } }\n"
        "  - ask: { slack.post: { channel: c, text: t } }\n",
        F + "5:36: error: step [a]: log.write.message: [ask] is not bound yet here",
    ),
    case(
        "the step itself",
        HEAD + "  - a: { log.write: { message: '{{ a }}' } }\n",
        F + "5:36: error: step [a]: log.write.message: [a] is not bound yet here; a step cannot "
        "read its own binding",
    ),
    case(
        "a later step of an enclosing scope, from inside a group",
        HEAD + "  - g:\n      steps:\n        - a: { log.write: { message: '{{ z }}' } }\n"
        f"  - z: {LOG}\n",
        F + "7:42: error: step [a]: log.write.message: [z] is not bound yet here",
    ),
    case(
        "the owner from inside its own steps",
        HEAD + "  - g:\n      steps:\n        - a: { log.write: { message: '{{ g.a }}' } }\n",
        F + "7:42: error: step [a]: log.write.message: [g] is not bound yet here; it is bound "
        "when step [g] completes",
    ),
    case(
        "unknown name with suggestion",
        HEAD + "  - a: { log.write: { message: '{{ dea.name }}' } }\n",
        F + "5:36: error: step [a]: log.write.message: unknown name [dea]; did you mean [deal]?",
    ),
    case(
        "a function used as a name",
        HEAD + "  - a: { log.write: { message: '{{ now }}' } }\n",
        F + "5:36: error: step [a]: log.write.message: unknown name [now]; did you mean now()?",
    ),
    case(
        "unknown filter",
        HEAD + "  - a: { log.write: { message: '{{ deal.name | uper }}' } }\n",
        F + "5:48: error: step [a]: log.write.message: unknown filter [uper]; did you mean "
        "[upper]?",
    ),
    case(
        "unknown function",
        HEAD + "  - a: { log.write: { message: '{{ tiemstamp(\"x\") }}' } }\n",
        F + "5:36: error: step [a]: log.write.message: unknown function [tiemstamp]",
    ),
    case(
        "a path into a declared result that does not exist",
        HEAD + "  - ask: { slack.post: { channel: c, text: t } }\n"
        "  - b: { log.write: { message: '{{ ask.tss }}' } }\n",
        F
        + "6:40: error: step [b]: log.write.message: [ask] has no field [tss]; did you mean [ts]?",
    ),
    case(
        "a path into an empty declared result",
        HEAD + f"  - w: {LOG}\n  - v: {{ log.write: {{ message: '{{{{ w.x }}}}' }} }}\n",
        F + "6:38: error: step [v]: log.write.message: [w] has no field [x]",
    ),
    case(
        "wait_for binds status and event only",
        HEAD + "  - w: { wait_for: slack.approval, match: { message: x }, timeout: 1h }\n"
        "  - v: { log.write: { message: '{{ w.payload }}' } }\n",
        F + "6:38: error: step [v]: log.write.message: [w] has no field [payload]",
    ),
    case(
        "wait binds until only",
        HEAD + "  - w: { wait: { for: 1h } }\n  - v: { log.write: { message: '{{ w.at }}' } }\n",
        F + "6:38: error: step [v]: log.write.message: [w] has no field [at]",
    ),
    case(
        "set binds its keys only",
        HEAD + "  - s: { set: { v: 1 } }\n  - t: { log.write: { message: '{{ s.w }}' } }\n",
        F + "6:38: error: step [t]: log.write.message: [s] has no field [w]",
    ),
    case(
        "repeat binds a list of iteration scopes",
        REPEAT_HEAD + f"      steps:\n        - c: {LOG}\n"
        "  - z: { log.write: { message: '{{ r.c }}' } }\n",
        F + "9:38: error: step [z]: log.write.message: [r] is a list; it has no field [c]",
    ),
    case(
        "inner step not visible outside its group",
        HEAD + f"  - g:\n      steps:\n        - n: {LOG}\n"
        "  - b: { log.write: { message: '{{ n }}' } }\n",
        F + "8:36: error: step [b]: log.write.message: [n] is not available here; it is a step "
        "inside [g], visible outside only as g.n",
    ),
    case(
        "inner step not visible outside its repeat",
        REPEAT_HEAD + f"      steps:\n        - c: {LOG}\n"
        "  - z: { log.write: { message: '{{ c.x }}' } }\n",
        F + "9:36: error: step [z]: log.write.message: [c] is not available here; it is a step "
        "inside [r], visible outside only as r[-1].c",
    ),
    case(
        "loop name not visible outside its for_each",
        HEAD + f"  - each:\n      for_each: '{{{{ [1] }}}}'\n      steps:\n        - s: {LOG}\n"
        "  - t: { log.write: { message: '{{ item }}' } }\n",
        F + "9:36: error: step [t]: log.write.message: unknown name [item]",
    ),
    case(
        "error outside recover",
        HEAD + "  - b: { log.write: { message: '{{ error.message }}' } }\n",
        F + "5:36: error: step [b]: log.write.message: [error] is not available here; it is only "
        "visible inside recover steps",
    ),
    case(
        "error has message, step and type",
        HEAD
        + f"  - a: {LOG}\nrecover:\n  - r: {{ log.write: {{ message: '{{{{ error.msg }}}}' }} }}\n",
        F + "7:42: error: step [r]: log.write.message: [error] has no field [msg]",
    ),
    case(
        "run has id and started_at",
        HEAD + "  - a: { log.write: { message: '{{ run.name }}' } }\n",
        F + "5:40: error: step [a]: log.write.message: [run] has no field [name]",
    ),
    case(
        "a flow recover step from the main steps",
        HEAD
        + f"  - a: {{ log.write: {{ message: '{{{{ top }}}}' }} }}\nrecover:\n  - top: {LOG}\n",
        F + "5:36: error: step [a]: log.write.message: [top] is not available here; it is a "
        "recover step of the flow",
    ),
    case(
        "repeat until sees only the iteration's steps and the outer scope",
        HEAD + "  - r:\n      repeat: { every: 1m, max: 3, until: '{{ r | length > 2 }}' }\n"
        f"      steps:\n        - c: {LOG}\n",
        F + "6:47: error: step [r]: repeat.until: [r] is not bound yet here; it is bound when step "
        "[r] completes",
    ),
    case(
        "an iteration's step does not see the repeat's later steps",
        REPEAT_HEAD + "      steps:\n        - a: { log.write: { message: '{{ c }}' } }\n"
        f"        - c: {LOG}\n",
        F + "8:42: error: step [a]: log.write.message: [c] is not bound yet here",
    ),
    case(
        "output sees the top level only",
        HEAD + f"  - g:\n      steps:\n        - n: {LOG}\noutput: {{ a: '{{{{ n }}}}' }}\n",
        F + "8:18: error: flow: output.a: [n] is not available here; it is a step inside [g], "
        "visible outside only as g.n",
    ),
    case(
        "for_each list expression does not see its own loop name",
        HEAD + f"  - each:\n      for_each: '{{{{ item }}}}'\n      steps:\n        - s: {LOG}\n",
        F + "6:21: error: step [each]: for_each: unknown name [item]",
    ),
    case(
        "an if does not see the step's own inner steps",
        HEAD + f"  - g:\n      if: '{{{{ n }}}}'\n      steps:\n        - n: {LOG}\n",
        F + "6:15: error: step [g]: if: [n] is not available here; it is a step inside [g]",
    ),
]


@pytest.mark.parametrize(("text", "expected"), NAME_CASES)
def test_names(tmp_path: Path, text: str, expected: list[str]) -> None:
    run_cases(tmp_path, text, expected)


# Comparing values of different kinds fails when it runs, as does a filter given a kind it does not
# take; where the kinds are known statically (literals, declared input types, declared result
# fields, functions, filters) validation says so.
KIND_HEAD = (
    "flow: t\ninputs:\n  due: { type: timestamp }\n  n: { type: integer }\n"
    "  deal: { type: object }\nsteps:\n"
)
KIND_CASES = [
    case(
        "two literals of different kinds",
        KIND_HEAD + "  - a: { set: { x: 1 }, if: \"{{ 'a' == 1 }}\" }\n",
        F + "7:37: error: step [a]: if: [==] cannot compare string with integer",
    ),
    case(
        "now() and a string",
        KIND_HEAD + "  - a: { set: { x: 1 }, if: \"{{ now() == '2027-01-01T00:00:00Z' }}\" }\n",
        F + "7:39: error: step [a]: if: [==] cannot compare timestamp with string; "
        "timestamp(text) reads ISO-8601 text as a timestamp",
    ),
    case(
        "a timestamp input and a string",
        KIND_HEAD + "  - a: { set: { x: \"{{ due != '2027-01-01' }}\" } }\n",
        F + "7:28: error: step [a]: set.x: [!=] cannot compare timestamp with string",
    ),
    case(
        "an integer input and a string, in a template",
        KIND_HEAD + "  - a: { log.write: { message: \"n is {{ n == 'three' }}\" } }\n",
        F + "7:43: error: step [a]: log.write.message: [==] cannot compare integer with string",
    ),
    case(
        "a declared result field and a string",
        KIND_HEAD + "  - r: { http.request: { url: 'https://x' } }\n"
        "  - a: { set: { x: 1 }, if: \"{{ r.status == '200' }}\" }\n",
        F + "8:42: error: step [a]: if: [==] cannot compare integer with string",
    ),
    case(
        "the same kinds, null and unknown kinds are not judged",
        KIND_HEAD + "  - r: { http.request: { url: 'https://x' } }\n"
        '  - a: { set: { x: 1 }, if: "{{ r.status == 200.0 and due != null and deal.x == 1 '
        'and n < 2.5 and due < now() }}" }\n',
    ),
    case(
        "a filter given an integer input",
        KIND_HEAD + '  - a: { set: { x: "{{ n | upper }}" } }\n',
        F + "7:28: error: step [a]: set.x: filter [upper] needs a string, got integer",
    ),
    case(
        "a filter given what the filter before it gives",
        KIND_HEAD + '  - a: { log.write: { message: "{{ deal | keys | trim }}" } }\n',
        F + "7:50: error: step [a]: log.write.message: filter [trim] needs a string, got list",
    ),
    case(
        "a filter given a declared result field",
        KIND_HEAD + "  - r: { http.request: { url: 'https://x' } }\n"
        "  - a: { set: { x: 1 }, if: \"{{ r.status | date == 'x' }}\" }\n",
        F + "8:44: error: step [a]: if: filter [date] needs a timestamp or an ISO-8601 string, "
        "got integer",
    ),
    case(
        "filters given what they take, or a kind not known, are not judged",
        KIND_HEAD + '  - a: { set: { x: "{{ n | string | upper }}", y: "{{ deal.x | upper }}", '
        'z: "{{ due | date }}", w: "{{ n | round }}" } }\n',
    ),
]


@pytest.mark.parametrize(("text", "expected"), KIND_CASES)
def test_comparisons_and_filters_of_known_kinds(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    run_cases(tmp_path, text, expected)


SYNTAX_CASES = [
    case(
        "single-quoted scalar: column after the quote",
        HEAD + "  - b: { log.write: { message: 'hi {{ deal. }}' } }\n",
        F + "5:45: error: step [b]: log.write.message: expected a field name after [.], found [}]",
    ),
    case(
        "plain scalar in block style",
        HEAD + "  - b:\n      log.write:\n        message: hi {{ deal. }}\n",
        F + "7:30: error: step [b]: log.write.message: expected a field name after [.]",
    ),
    case(
        "nested arg value",
        HEAD + "  - h:\n      http.request:\n        url: u\n        headers:\n"
        '          X-A: "{{ 1 + }}"\n',
        F + "9:24: error: step [h]: http.request.headers.X-A: expected a value",
    ),
    case(
        "list item of an output",
        HEAD + f"  - a: {LOG}\noutput:\n  - ok\n  - '{{{{ a | }}}}'\n",
        F + "8:13: error: flow: output[1]: expected a filter name after [|], found [}]",
    ),
    case(
        "unterminated in a condition",
        HEAD + "  - a: { log.write: { message: m }, if: '{{ deal' }\n",
        F + "5:42: error: step [a]: if: unterminated [{{]: missing [}}]",
    ),
    case(
        "syntax in a match value, a set value and a fail message",
        HEAD + "  - w: { wait_for: slack.approval, match: { message: '{{ ) }}' }, timeout: 1h }\n"
        "  - s: { set: { v: '{{ ( }}' } }\n  - f: { fail: '{{ }}' }\n",
        F + "5:58: error: step [w]: match.message: expected a value, found [)]",
        F + "6:26: error: step [s]: set.v: expected a value, found [}]",
        F + "7:20: error: step [f]: fail: empty expression between [{{ }}]",
    ),
    case(
        "syntax in a wait duration and instant",
        HEAD + "  - w: { wait: { for: '{{ 1 + }}' } }\n  - v: { wait: { until: '{{ ] }}' } }\n",
        F + "5:31: error: step [w]: wait.for: expected a value",
        F + "6:29: error: step [v]: wait.until: expected a value, found []]",
    ),
]


@pytest.mark.parametrize(("text", "expected"), SYNTAX_CASES)
def test_syntax_positions(tmp_path: Path, text: str, expected: list[str]) -> None:
    run_cases(tmp_path, text, expected)


def test_optional_steps_may_bind_error(tmp_path: Path) -> None:
    compile_ok(
        tmp_path,
        HEAD
        + """\
  - r:
      optional: true
      repeat: { every: 1m, max: 2, until: "{{ c != null }}" }
      steps:
        - c: { log.write: { message: m } }
  - s: { set: { v: 1 }, optional: true }
  - w: { wait: { for: 1h }, optional: true }
  - l: { log.write: { message: "{{ r.error.message }} {{ s.error.step }} {{ w.error.type }}" } }
""",
    )


# --- secret() --------------------------------------------------------------------------------

SECRET_STEP = HEAD + "  - b: { log.write: { message: \"{{ secret('PF_TEST_TOKEN') }}\" } }\n"


def test_missing_secret_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PF_TEST_TOKEN", raising=False)
    monkeypatch.delenv("PROCFLOW_SECRETS_FILE", raising=False)
    loaded, shown = compile_text(tmp_path, SECRET_STEP)
    assert_exactly(
        shown,
        [
            F + "5:36: warning: step [b]: secret [PF_TEST_TOKEN] is not set in this environment; "
            "a worker without it fails this step"
        ],
    )
    assert loaded.ok  # a warning does not make the file invalid


def test_secret_in_secrets_file_or_env_is_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PF_TEST_TOKEN", raising=False)
    secrets = tmp_path / "secrets.env"
    secrets.write_text("# comment\nPF_TEST_TOKEN=abc\n", encoding="utf-8")
    monkeypatch.setenv("PROCFLOW_SECRETS_FILE", str(secrets))
    compile_ok(tmp_path, SECRET_STEP)
    monkeypatch.delenv("PROCFLOW_SECRETS_FILE")
    monkeypatch.setenv("PF_TEST_TOKEN", "abc")
    compile_ok(tmp_path, SECRET_STEP)


def test_secret_missing_from_secrets_file_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PF_TEST_TOKEN", raising=False)
    secrets = tmp_path / "secrets.env"
    secrets.write_text("OTHER=1\n", encoding="utf-8")
    monkeypatch.setenv("PROCFLOW_SECRETS_FILE", str(secrets))
    _, shown = compile_text(tmp_path, SECRET_STEP)
    assert_exactly(shown, ["not set in this environment nor in PROCFLOW_SECRETS_FILE"])


# --- what the IR holds -----------------------------------------------------------------------


def test_ir_of_the_seed_constructs(tmp_path: Path) -> None:
    from datetime import timedelta

    from procflow.model.ir import RepeatStep, WaitForStep, WaitStep

    flow = compile_ok(
        tmp_path,
        HEAD
        + """\
  - w: { wait: { for: 2d } }
  - ask: { slack.post: { channel: c, text: "{{ deal.name }}" }, retry: { count: 3, every: PT30S } }
  - approval:
      wait_for: slack.approval
      match: { message: "{{ ask.ts }}" }
      timeout: 24h
      lookback: 1h
  - indexed:
      repeat: { every: 30s, max: 20, until: "{{ check.status == 200 }}" }
      steps:
        - check: { http.request: { url: "https://x/{{ deal.id }}" } }
""",
    )
    w, ask, approval, indexed = flow.steps
    assert isinstance(w, WaitStep) and w.for_ is not None and w.for_.text == "2d"
    assert ask.mods.retry is not None and ask.mods.retry.every == timedelta(seconds=30)
    assert ask.mods.retry.attempts == 4
    assert isinstance(approval, WaitForStep)
    assert (approval.timeout, approval.lookback) == (timedelta(hours=24), timedelta(hours=1))
    assert list(approval.match) == ["message"] and approval.match["message"].kind == "single"
    assert isinstance(indexed, RepeatStep)
    assert (indexed.every, indexed.max, indexed.until.kind) == (timedelta(seconds=30), 20, "single")
    assert [s.id for s in indexed.steps] == ["check"]
    assert sorted(flow.connectors) == ["http", "slack"]
