"""The inputs a flow run starts with: checked, defaulted, normalised (docs/reference/flow.md,
"inputs").

Decisions (normative for the engine, the CLI and the docs):

- Every problem is reported at once, in one :class:`InputError` (a :class:`UsageError`, exit 2)
  whose message holds one line per problem, each prefixed ``flow [<name>]: ``. Unreadable inputs
  come first (below), then unknown inputs (in the order given), then the declared inputs in
  declaration order. The error's ``input`` (and ``field``) names the input of the first problem.
- Values are JSON kinds: a boolean is not an integer or a number; an integer is a number; a float
  is never an integer, not even ``3.0``; non-finite numbers are refused. Anywhere in an input
  (inside objects and arrays too), text and keys must be valid Unicode (no lone surrogate),
  numbers finite and values JSON kinds; such an input is reported once, by the path of its first
  problem (``input [extra.n[1]] is Infinity, ...``), and not checked further. An ``array`` is a
  JSON list (a tuple is accepted and becomes a list); an ``object`` is a mapping.
- A ``timestamp`` input is ISO-8601 text with a zone, or a date (00:00Z that day). It is stored
  normalised to UTC text with ``Z`` (:func:`procflow.expr.format_timestamp`); expressions see it as
  an aware datetime (:func:`input_env`).
- A null value counts as "not given": a required input given null is missing; an optional one
  gets its default.
- Every declared input is in the result: missing ones with a default get (a copy of) the default,
  missing ones without a default bind null, so an expression naming one sees null.
- The CLI form (:func:`cli_inputs`): ``--inputs JSON`` (a JSON object) first, then each
  ``--input k=v`` overrides or extends it; ``v`` is split off at the first ``=`` and converted by
  the declared type of ``k``: string as written; integer/number parsed as JSON number text;
  boolean ``true``/``false`` (any case) only; object/array parsed as JSON and must be that kind;
  timestamp as ISO-8601 text. Conversion problems and check problems are reported together.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from procflow.errors import ExprEvalError, InputError
from procflow.expr import format_timestamp, kind_of, parse_timestamp
from procflow.model.source import suggest
from procflow.runtime.data.user_json import json_problems
from procflow.runtime.data.user_json import shown as printable
from procflow.store.codec import depth_problem

if TYPE_CHECKING:
    from procflow.model.ir import Flow, InputDecl

_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SHOWN_CHARS = 40

# A problem: (the input it is about, or None for the command line's form; its text).
_InputProblem = tuple[str | None, str]


# --- checking --------------------------------------------------------------------------------


def check_inputs(flow: Flow, given: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs of a new run of ``flow`` from the JSON values ``given``.

    Returns a new dict with every declared input (defaults filled in, absent ones null, timestamps
    normalised); raises :class:`InputError` listing every problem.
    """
    values, problems = _check(flow, given, skip=frozenset(), report_missing=True)
    if problems:
        raise _input_error(flow, problems)
    return values


def _input_error(flow: Flow, problems: Sequence[_InputProblem]) -> InputError:
    """One error listing every problem; it points at the first problem's input."""
    return InputError(flow.name, [text for _, text in problems], input=problems[0][0])


def _check(
    flow: Flow, given: Mapping[str, Any], skip: frozenset[str], report_missing: bool
) -> tuple[dict[str, Any], list[_InputProblem]]:
    """Values and problems; inputs in ``skip`` already have a reported problem."""
    problems, unreadable = _unreadable(given)
    problems += [
        (name, _unknown(flow, name))
        for name in given
        if name not in flow.inputs and name not in unreadable
    ]
    values: dict[str, Any] = {}
    for name, decl in flow.inputs.items():
        if name in skip or name in unreadable:
            continue
        value = given.get(name)
        if value is None:
            if decl.required:
                if report_missing:
                    problems.append((name, f"missing required input [{name}] ({decl.type})"))
                continue
            value = copy.deepcopy(decl.default) if decl.has_default else None
            if value is None:
                values[name] = None
                continue
        checked, problem = _check_value(decl, value)
        if problem is not None:
            problems.append((name, problem))
        else:
            values[name] = checked
    return values, problems


def _unreadable(given: Mapping[Any, Any]) -> tuple[list[_InputProblem], set[Any]]:
    """The inputs that are not JSON a user may give (module notes): one problem each."""
    problems: list[_InputProblem] = []
    names: set[Any] = set()
    for name, value in given.items():
        if not isinstance(name, str):
            problems.append((None, f"input names are text, got a {type(name).__name__}"))
        else:
            found = json_problems({name: value})
            if isinstance(value, float):  # the type check says "must be a finite number"
                found = [p for p in found if p.path != (name,)]
            if not found:
                continue
            first = found[0]
            problems.append((str(first.path[0]), f"input [{first.where}] {first.problem}"))
        names.add(name)
    return problems, names


def _unknown(flow: Flow, name: str) -> str:
    declared = list(flow.inputs)
    if not declared:
        return f"unknown input [{name}] (this flow declares no inputs)"
    return (
        f"unknown input [{name}]{suggest(name, declared)} (declared inputs: {', '.join(declared)})"
    )


def _check_value(decl: InputDecl, value: Any) -> tuple[Any, str | None]:
    """The stored form of ``value`` for ``decl``, or a problem."""
    type_ = decl.type
    if type_ == "timestamp":
        if not isinstance(value, str):
            return None, _wrong_type(decl, value, "a timestamp (ISO-8601 text)")
        try:
            return format_timestamp(parse_timestamp(value)), None
        except ExprEvalError as e:
            return None, f"input [{decl.name}] must be an ISO-8601 timestamp: {e.message}"
    if type_ == "string":
        ok = isinstance(value, str)
    elif type_ == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif type_ == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok and isinstance(value, float) and not math.isfinite(value):
            return None, f"input [{decl.name}] must be a finite number, got {value}"
    elif type_ == "boolean":
        ok = isinstance(value, bool)
    elif type_ == "object":
        ok = isinstance(value, Mapping)
        if ok:
            value = dict(value)
    else:  # array
        ok = isinstance(value, list | tuple)
        if ok:
            value = list(value)
    if not ok:
        article = "an" if type_[0] in "aeiou" else "a"
        return None, _wrong_type(decl, value, f"{article} {type_}")
    return copy.deepcopy(value), None


def _wrong_type(decl: InputDecl, value: Any, expected: str) -> str:
    return f"input [{decl.name}] must be {expected}, got {_describe(value)}"


def _json_kind(value: Any) -> str:
    """The JSON kind name of ``value`` (``kind_of`` says list/mapping; inputs speak JSON)."""
    kind = kind_of(value)
    return _JSON_NAMES.get(kind, kind)


_JSON_NAMES = {"list": "array", "mapping": "object"}


def _describe(value: Any) -> str:
    """``an integer (3)``, ``a string ("x")``, ``an object``: the kind, and a scalar's text."""
    kind = _json_kind(value)
    article = "an" if kind[0] in "aeiou" else "a"
    if isinstance(value, bool | int | float | str):
        shown = _shown(json.dumps(value, ensure_ascii=False))
        return f"{article} {kind} ({shown})"
    return f"{article} {kind}"


def _shown(text: str) -> str:
    text = printable(text)  # a lone surrogate from the command line must still print
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


# --- the CLI form ----------------------------------------------------------------------------


def cli_inputs(flow: Flow, pairs: Sequence[str], inputs_json: str | None) -> dict[str, Any]:
    """Inputs from ``--inputs JSON`` and ``--input k=v`` pairs (which win), then checked."""
    problems: list[_InputProblem] = []
    given: dict[str, Any] = {}
    report_missing = True
    if inputs_json is not None:
        parsed, problem = _parse_json(inputs_json)
        if problem is not None:
            problems.append((None, f"--inputs {problem}"))
            report_missing = False  # what is missing may be in the unreadable text
        elif not isinstance(parsed, dict):
            problems.append((None, f"--inputs must be a JSON object, got {_describe(parsed)}"))
            report_missing = False
        else:
            given.update(parsed)
    failed: set[str] = set()
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            problems.append((None, f"--input expects k=v, got [{_shown(pair)}]"))
            continue
        decl = flow.inputs.get(name)
        if decl is None:
            given[name] = text  # reported as unknown by the check below
            continue
        value, problem = _convert(decl, text)
        if problem is not None:
            problems.append((name, problem))
            failed.add(name)
            given.pop(name, None)
        else:
            failed.discard(name)
            given[name] = value
    values, check_problems = _check(flow, given, frozenset(failed), report_missing)
    problems.extend(check_problems)
    if problems:
        raise _input_error(flow, problems)
    return values


def _parse_json(text: str) -> tuple[Any, str | None]:
    """The JSON value of ``text``, or why it cannot be read: ``is not valid JSON: ...``, ``is
    nested too deeply: ...`` (checked first: the parser recurses once per level)."""
    too_deep = depth_problem(text)
    if too_deep is not None:
        return None, f"is {too_deep}"
    try:
        return json.loads(text, parse_constant=_no_constant), None
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        return None, f"is not valid JSON: {e}"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _convert(decl: InputDecl, text: str) -> tuple[Any, str | None]:
    """``--input`` text converted by the declared type of its input, or a problem."""
    type_ = decl.type
    shown = _shown(text)
    stripped = text.strip()
    if type_ in ("string", "timestamp"):  # timestamps are checked and normalised by the check
        return text, None
    if type_ in ("integer", "number"):
        pattern = _INTEGER if type_ == "integer" else _NUMBER
        number = _number(stripped) if pattern.fullmatch(stripped) else None
        if number is not None:
            return number, None
        article = "an" if type_ == "integer" else "a"
        return None, f"input [{decl.name}] expects {article} {type_}, got [{shown}]"
    if type_ == "boolean":
        lowered = stripped.lower()
        if lowered in ("true", "false"):
            return lowered == "true", None
        return None, f"input [{decl.name}] expects true or false, got [{shown}]"
    # object, array
    parsed, problem = _parse_json(text)
    if problem is not None:
        return None, f"input [{decl.name}] expects a JSON {type_}, but [{shown}] {problem}"
    want = dict if type_ == "object" else list
    if not isinstance(parsed, want):
        return None, f"input [{decl.name}] expects an {type_} (JSON), got {_describe(parsed)}"
    return parsed, None


def _number(text: str) -> int | float | None:
    """Number text (already matched) as an int when integral in form, else a finite float."""
    try:
        number: int | float = int(text) if _INTEGER.fullmatch(text) else float(text)
    except ValueError:  # more digits than int() converts
        return None
    return number if math.isfinite(number) else None


# --- what expressions see --------------------------------------------------------------------


def input_env(flow: Flow, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The input values as expressions see them: timestamp inputs as aware UTC datetimes."""
    env = dict(inputs)
    for name, decl in flow.inputs.items():
        value = env.get(name)
        if decl.type == "timestamp" and isinstance(value, str):
            env[name] = parse_timestamp(value)
    return env
