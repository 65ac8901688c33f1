from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from procflow.errors import ExprEvalError, ProcflowError
from procflow.expr import EvalContext, evaluate_condition, parse
from procflow.expr.evaluator import evaluate

NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
CTX = EvalContext(now=lambda: NOW, secret=lambda name: {"TOKEN": "s3cr3t"}.get(name))  # type: ignore[arg-type,return-value]
ENV: dict[str, Any] = {
    "deal": {"name": "Acme", "amount": 12000, "owner": None, "tags": ["a", "b"], "m": {"k": 1}},
    "items": [1, 2, 3],
    "empty": [],
    "n": None,
    "s": "Hello",
    "f": 2.5,
    "i": 7,
    "t": datetime(2025, 1, 1, tzinfo=UTC),
    "t2": datetime(2025, 1, 2, 12, tzinfo=UTC),
    "d": timedelta(hours=1),
    "yes": True,
    "no": False,
    "nested": [{"check": {"status": "indexed"}}, {"check": {"status": "pending"}}],
    "date_s": "2027-01-10",
    "ts_s": "2027-01-10T09:30:00+01:00",
}


def ev(text: str, env: dict[str, Any] | None = None, ctx: EvalContext = CTX) -> Any:
    return evaluate(parse(text), ENV if env is None else env, ctx)


def fails(text: str, env: dict[str, Any] | None = None, ctx: EvalContext = CTX) -> ExprEvalError:
    with pytest.raises(ExprEvalError) as info:
        ev(text, env, ctx)
    return info.value


def same(a: Any, b: Any) -> bool:
    return bool(a == b and type(a) is type(b))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # arithmetic
        ("1 + 2", 3),
        ("1 + 2.5", 3.5),
        ("5 - 7", -2),
        ("3 * 4", 12),
        ("7 / 2", 3.5),
        ("6 / 3", 2.0),
        ("7 % 3", 1),
        ("-7 % 3", 2),
        ("7.5 % 2", 1.5),
        ("-i", -7),
        ("-f", -2.5),
        ("1 + 2 * 3 - 4", 3),
        ("(1 + 2) * 3", 9),
        ("'a' + 'b'", "ab"),
        ("[1] + [2, 3]", [1, 2, 3]),
        ("t + d", datetime(2025, 1, 1, 1, tzinfo=UTC)),
        ("d + t", datetime(2025, 1, 1, 1, tzinfo=UTC)),
        ("t - d", datetime(2024, 12, 31, 23, tzinfo=UTC)),
        ("t2 - t", timedelta(days=1, hours=12)),
        ("d + 30m", timedelta(minutes=90)),
        ("d - 30m", timedelta(minutes=30)),
        ("d * 2", timedelta(hours=2)),
        ("2 * d", timedelta(hours=2)),
        ("d * 0.5", timedelta(minutes=30)),
        ("d / 4", timedelta(minutes=15)),
        ("d / 30m", 2.0),
        ("-d", timedelta(hours=-1)),
        ("now() - 1d", NOW - timedelta(days=1)),
        # comparisons
        ("1 == 1.0", True),
        ("1.0 != 1", False),
        ("null == null", True),
        ("'a' == null", False),
        ("null != 1", True),
        ("t == null", False),
        ("n == null", True),
        ("deal.owner != null", False),
        ("'a' == 'a'", True),
        ("[1, {'a': 2}] == [1.0, {'a': 2}]", True),
        ("[1, 2] == [2, 1]", False),
        ("{'a': 1} == {'a': 1, 'b': 2}", False),
        ("t == t", True),
        ("t == timestamp('2025-01-01T00:00:00Z')", True),
        ("d == 1h", True),
        # items of lists and mappings may mix kinds: they are compared as JSON, unequal
        ("[1, 'a'] == [1, 2]", False),
        ("{'a': '1'} != {'a': 1}", True),
        ("'a' in [1, 'a']", True),
        ("1 in ['1']", False),
        ("1 < 2", True),
        ("2 <= 2.0", True),
        ("3 > 2.5", True),
        ("2 >= 3", False),
        ("'a' < 'b'", True),
        ("t < t2", True),
        ("1h > 30m", True),
        ("2 in items", True),
        ("2.0 in items", True),
        ("9 in items", False),
        ("9 not in items", True),
        ("null in [null]", True),
        ("'ell' in s", True),
        ("'x' not in s", True),
        ("'k' in deal.m", True),
        ("'z' in deal.m", False),
        # boolean logic
        ("true and false", False),
        ("true or false", True),
        ("not true", False),
        ("not false and true", True),
        ("false and n", False),
        ("true or n", True),
        ("false and 1", False),
        ("yes and not no", True),
        ("deal.amount > 10000 and 'a' in deal.tags", True),
        # paths
        ("deal.name", "Acme"),
        ("deal['name']", "Acme"),
        ("items[0]", 1),
        ("items[-1]", 3),
        ("items[-3]", 1),
        ("items[3]", None),
        ("items[-4]", None),
        ("deal.missing", None),
        ("deal.missing.deeper[0]", None),
        ("n.x", None),
        ("n[0]", None),
        ("s.x", None),
        ("i.x", None),
        ("items.x", None),
        ("items['x']", None),
        ("deal[0]", None),
        ("items[true]", None),
        ("items[1.0]", None),
        ("nested[-1].check.status", "pending"),
        ("nested[i - 7].check['status']", "indexed"),
        ("[10, 20][1]", 20),
        ("{'a': {'b': 5}}.a.b", 5),
        ("(items | last)", 3),
        ("deal.tags[0] + deal.tags[1]", "ab"),
    ],
)
def test_operators_and_paths(text: str, expected: Any) -> None:
    assert same(ev(text), expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("t | plus(1d)", datetime(2025, 1, 2, tzinfo=UTC)),
        ("t | minus(1h30m)", datetime(2024, 12, 31, 22, 30, tzinfo=UTC)),
        ("date_s | minus(1d)", datetime(2027, 1, 9, tzinfo=UTC)),
        ("ts_s | plus(30m)", datetime(2027, 1, 10, 9, 0, tzinfo=UTC)),
        ("t | plus('PT1H')", datetime(2025, 1, 1, 1, tzinfo=UTC)),
        ("t | plus(duration('2h'))", datetime(2025, 1, 1, 2, tzinfo=UTC)),
        ("n | default(5)", 5),
        ("0 | default(5)", 0),
        ("'' | default('x')", ""),
        ("deal.owner | default('nobody')", "nobody"),
        ("n | default(null)", None),
        ("n | default(n) | default(1)", 1),
        ("s | length", 5),
        ("items | length", 3),
        ("deal.m | length", 1),
        ("s | upper", "HELLO"),
        ("s | lower", "hello"),
        ("'  x y  ' | trim", "x y"),
        ("12 | string", "12"),
        ("2.0 | string", "2.0"),
        ("true | string", "true"),
        ("t | string", "2025-01-01T00:00:00Z"),
        ("d | string", "PT1H"),
        ("items | string", "[1,2,3]"),
        ("'x' | string", "x"),
        ("'42' | int", 42),
        ("' -3 ' | int", -3),
        ("3.9 | int", 3),
        ("-3.9 | int", -3),
        ("7 | int", 7),
        ("'2.5' | float", 2.5),
        ("'1e3' | float", 1000.0),
        ("3 | float", 3.0),
        ("2.5 | float", 2.5),
        ("'x' | json", '"x"'),
        ("deal.m | json", '{"k":1}'),
        ("[t, d, null] | json", '["2025-01-01T00:00:00Z","PT1H",null]'),
        ("items | first", 1),
        ("items | last", 3),
        ("empty | first", None),
        ("empty | last", None),
        ("deal.tags | join(', ')", "a, b"),
        ("[1, 2.5, true, 'x'] | join('-')", "1-2.5-true-x"),
        ("empty | join(',')", ""),
        ("deal.m | keys", ["k"]),
        ("deal.m | values", [1]),
        ("2.5 | round", 3),
        ("-2.5 | round", -3),
        ("2.4 | round", 2),
        ("2.675 | round(2)", 2.68),
        ("1.005 | round(2)", 1.01),
        ("7 | round(2)", 7),
        ("7 | round", 7),
        ("1e300 | round(2)", 1e300),
        ("t | date", "2025-01-01"),
        ("ts_s | date", "2027-01-10"),
        ("date_s | date", "2027-01-10"),
        ("nested | length > 1", True),
        ("n | default([]) | length", 0),
        # functions
        ("now()", NOW),
        ("duration('30s')", timedelta(seconds=30)),
        ("duration('PT1M')", timedelta(minutes=1)),
        ("duration(d)", timedelta(hours=1)),
        ("timestamp('2024-02-29')", datetime(2024, 2, 29, tzinfo=UTC)),
        ("timestamp('2024-02-29T10:00:00Z')", datetime(2024, 2, 29, 10, tzinfo=UTC)),
        ("timestamp('2024-02-29T10:00:00-02:00')", datetime(2024, 2, 29, 12, tzinfo=UTC)),
        ("timestamp(t)", datetime(2025, 1, 1, tzinfo=UTC)),
        ("secret('TOKEN')", "s3cr3t"),
    ],
)
def test_filters_and_functions(text: str, expected: Any) -> None:
    assert same(ev(text), expected)


def test_timestamps_are_utc() -> None:
    value = ev("timestamp('2024-02-29T10:00:00-02:00')")
    assert value.tzinfo is UTC
    plus = ev("ts_s | plus(0s)")
    assert plus.utcoffset() == timedelta(0)


def test_naive_and_offset_host_timestamps() -> None:
    env = {
        "a": datetime(2025, 1, 1, 12),
        "b": datetime(2025, 1, 1, 14, tzinfo=timezone(timedelta(hours=2))),
    }
    assert ev("a == b", env) is True
    assert ev("a - b", env) == timedelta(0)
    assert ev("a | string", env) == "2025-01-01T12:00:00Z"
    ctx = EvalContext(now=lambda: datetime(2025, 1, 1))
    assert ev("now() | string", {}, ctx) == "2025-01-01T00:00:00Z"


def test_default_argument_is_lazy() -> None:
    assert ev("s | default(1 / 0)") == "Hello"
    assert ev("false and 1 / 0 == 1") is False
    assert ev("true or missing_name") is True


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        # null misuse names the path
        ("deal.owner + 1", "[deal.owner] is null; [+] needs a value", 0),
        ("1 + deal.owner", "[deal.owner] is null; [+] needs a value", 4),
        ("deal.missing * 2", "[deal.missing] is null", 0),
        ("-n", "[n] is null; [-] needs a value", 1),
        ("n < 1", "[n] is null; [<] needs a value", 0),
        ("1 >= n", "[n] is null", 5),
        ("not n", "[n] is null; [not] needs a value", 4),
        ("n and true", "[n] is null; [and] needs a value", 0),
        ("false or n", "[n] is null; [or] needs a value", 9),
        ("deal.owner | upper", "[deal.owner] is null; filter [upper] needs a value", 0),
        ("n | default(null) | length", "[n | default(null)] is null; filter [length]", 0),
        ("items[n]", "[n] is null; an index needs a value", 6),
        ("s | join(n)", "[n] is null; filter [join] needs a value", 9),
        ("duration(n)", "[n] is null; [duration()] needs a value", 9),
        ("'a' in n", "[n] is null; [in] needs a value", 7),
        ("n in 'abc'", "[n] is null; [in] needs a value", 0),
        ("n in deal.m", "[n] is null", 0),
        ("deal.owner | json", "[deal.owner] is null; filter [json]", 0),
        ("deal.owner | string", "[deal.owner] is null; filter [string]", 0),
        # kind mismatches
        ("'a' + 1", "cannot add string and integer", 4),
        ("1 + true", "cannot add integer and boolean", 2),
        ("[1] + 'a'", "cannot add list and string", 4),
        ("t + t", "cannot add timestamp and timestamp", 2),
        ("t + 1", "cannot add timestamp and integer", 2),
        ("d - t", "cannot subtract timestamp from duration", 2),
        ("'a' - 'b'", "cannot subtract string from string", 4),
        ("'a' * 3", "cannot multiply string and integer", 4),
        ("d * d", "cannot multiply duration and duration", 2),
        ("'a' / 2", "cannot divide string by integer", 4),
        ("1 / d", "cannot divide integer by duration", 2),
        ("'a' % 2", "cannot take string modulo integer", 4),
        ("-'a'", "[-] needs a number or a duration, got string from ['a']", 0),
        ("-true", "[-] needs a number or a duration, got boolean", 0),
        ("-5 | string", "got string from [5 | string]", 0),
        ("not 1", "[not] needs a boolean, got integer from [1]", 4),
        ("1 and true", "[and] needs booleans, got integer from [1]", 0),
        ("true and 's'", "[and] needs booleans, got string", 9),
        ("false or []", "[or] needs booleans, got list", 9),
        ("t < '2025-01-01'", "[<] cannot compare timestamp with string", 2),
        # values of different kinds are never equal or unequal: that is an error, not false
        ("true == 1", "[==] cannot compare boolean with integer", 5),
        ("0 == false", "[==] cannot compare integer with boolean", 2),
        ("1 != 'x'", "[!=] cannot compare integer with string", 2),
        ("'a' == 1", "[==] cannot compare string with integer", 4),
        (
            "now() == '2027-01-01T00:00:00Z'",
            "[==] cannot compare timestamp with string; timestamp(text) reads ISO-8601 text as "
            "a timestamp",
            6,
        ),
        ("t != ts_s", "[!=] cannot compare timestamp with string", 2),
        ("d == 3600", "[==] cannot compare duration with integer", 2),
        ("[1] == {'a': 1}", "[==] cannot compare list with mapping", 4),
        ("deal.tags == 'vip'", "[==] cannot compare list with string", 10),
        ("'a' < 1", "[<] cannot compare string with integer", 4),
        ("true < false", "[<] cannot order booleans", 5),
        ("[1] < [2]", "[<] cannot order lists", 4),
        ("d < 1", "cannot compare duration with integer", 2),
        ("1 in 'abc'", "[in] needs a string as a substring of a string, got integer", 2),
        ("1 in deal.m", "[in] needs a string as a key of a mapping, got integer", 2),
        ("1 in 5", "[in] needs a list, string or mapping on the right, got integer", 2),
        # division by zero
        ("1 / 0", "division by zero", 2),
        ("1.5 / 0.0", "division by zero", 4),
        ("1 % 0", "modulo by zero", 2),
        ("d / 0", "division by zero", 2),
        ("d / 0s", "division by a zero duration", 2),
        # bounds
        ("9223372036854775807 + 1", "integer result out of range", 20),
        ("-9223372036854775807 - 2", "integer result out of range", 21),
        ("3037000500 * 3037000500", "integer result out of range", 11),
        ("1e308 * 10", "number out of range", 6),
        (
            "t + 36500d * 100",
            "timestamp out of range: 2025-01-01T00:00:00Z + 3650000d falls outside the years "
            "0001 to 9999",
            2,
        ),
        ("d * 1e300", "duration out of range: beyond 999,999,999 days", 2),
        # filters
        ("1 | upper", "filter [upper] needs a string, got integer", 4),
        ("1 | length", "filter [length] needs a string, list or mapping, got integer", 4),
        ("s | first", "filter [first] needs a list, got string", 4),
        ("s | last", "filter [last] needs a list, got string", 4),
        ("s | keys", "filter [keys] needs a mapping, got string", 4),
        ("items | values", "filter [values] needs a mapping, got list", 8),
        ("s | join(',')", "filter [join] needs a list, got string", 4),
        ("items | join(1)", "the separator must be a string, got integer", 8),
        ("[1, null] | join(',')", "item [1] is null", 12),
        ("'x' | int", "[x] is not an integer", 6),
        ("'1.5' | int", "[1.5] is not an integer", 8),
        ("'١' | int", "is not an integer", 6),
        ("true | int", "filter [int] needs a number or a string, got boolean", 7),
        ("items | int", "filter [int] needs a number or a string, got list", 8),
        ("'99999999999999999999' | int", "integer result out of range", 25),
        ("1e300 | int", "integer result out of range", 8),
        ("'nan' | float", "[nan] is not a number", 8),
        ("'1e999' | float", "is too large", 10),
        ("false | float", "needs a number or a string, got boolean", 8),
        ("'x' | round", "filter [round] needs a number, got string", 6),
        ("1.5 | round(-1)", "number of decimals must be an integer from 0 to 15, got -1", 6),
        ("1.5 | round(16)", "got 16", 6),
        ("1.5 | round('2')", "got string", 6),
        ("1.5 | round(true)", "got boolean", 6),
        ("1 | date", "filter [date] needs a timestamp or an ISO-8601 string, got integer", 4),
        ("'soon' | date", "[soon] is not an ISO-8601 timestamp", 9),
        ("'2025-01-01T10:00:00' | plus(1h)", "has no time zone; add Z", 24),
        ("'2025-13-01' | minus(1h)", "is not an ISO-8601 timestamp", 15),
        ("t | plus(1)", "filter [plus] needs a duration, got integer", 4),
        ("t | plus('soon')", "filter [plus]: [soon] is not a valid duration", 4),
        ("d | plus(1h)", "needs a timestamp or an ISO-8601 string, got duration", 4),
        ("t | minus(36500d * 100)", "filter [minus]: timestamp out of range", 4),
        # functions
        ("duration('P1M')", "months and years have no fixed length", 0),
        ("duration('x')", "[x] is not a valid duration", 0),
        ("duration(5)", "duration() needs a duration, got integer", 0),
        ("timestamp('x')", "[x] is not an ISO-8601 timestamp", 0),
        ("timestamp(5)", "timestamp() needs a timestamp or an ISO-8601 string", 0),
        ("secret('MISSING')", "secret [MISSING] is not set", 0),
        ("secret(5)", "secret() needs a non-empty name, got integer", 0),
        ("secret('')", "secret() needs a non-empty name", 0),
        # names
        ("missing", "[missing] is not bound", 0),
        ("1 + missing.x", "[missing] is not bound", 4),
        # host values that are not plain data
        ("obj == 1", "unsupported value of type [object]", 4),
        ("obj | string", "unsupported value of type [object]", 6),
        ("obj | json", "unsupported value of type [object]", 6),
        ("[obj] | json", "unsupported value of type [object]", 8),
        ("1 in [obj]", "unsupported value of type [object]", 2),
        ("bad | json", "a number is infinite, NaN or too long", 6),
        ("bad | string", "not finite", 6),
        ("keyed | json", "a mapping key is not text", 8),
        ("deep | json", "nested too deeply", 7),
        # numbers and instants at the edge of their range
        ("inf | round(1)", "filter [round]: [inf] is not finite", 6),
        ("inf | int", "filter [int]: [inf] has no integer value", 6),
        ("bad | int", "filter [int]: [nan] has no integer value", 6),
        ("big | float", "filter [float]: integer too large", 6),
        ("early | string", "timestamp out of range", 8),
    ],
)
def test_evaluation_errors(text: str, message: str, offset: int) -> None:
    env = {
        **ENV,
        "obj": object(),
        "bad": float("nan"),
        "keyed": {(1, 2): 3},
        "deep": _deep(5000),
        "inf": float("inf"),
        "big": 10**400,
        "early": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
    }
    error = fails(text, env)
    assert message in error.message
    assert error.offset == offset


def _deep(n: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(n):
        value = [value]
    return value


def test_deep_host_data_compares_without_recursion() -> None:
    env = {"a": _deep(50_000), "b": _deep(50_000)}
    assert ev("a == b", env) is True
    assert ev("a in [b]", env) is True


def test_string_and_list_growth_is_bounded() -> None:
    env = {"big": "x" * 600_000, "many": [0] * 600_000}
    assert len(ev("big + 'y'", env)) == 600_001
    assert "longer than 1000000 characters" in fails("big + big", env).message
    assert "more than 1000000 items" in fails("many + many", env).message


def test_secret_unavailable() -> None:
    ctx = EvalContext(now=lambda: NOW)
    assert fails("secret('TOKEN')", {}, ctx).message == "secret() is not available here"


def test_host_callback_errors_pass_through() -> None:
    class Missing(ProcflowError):
        pass

    def secret(name: str) -> str:
        raise Missing(f"secret {name} is missing")

    with pytest.raises(Missing):
        ev("secret('X')", {}, EvalContext(now=lambda: NOW, secret=secret))


def test_now_must_give_a_timestamp() -> None:
    ctx = EvalContext(now=lambda: "2025")  # type: ignore[arg-type,return-value]
    assert "now() is not available" in fails("now()", {}, ctx).message


@pytest.mark.parametrize(
    ("text", "expected"),
    [("total > 0", True), ("action == 'approve'", False), ("internal == false", True)],
)
def test_conditions(text: str, expected: bool) -> None:
    env = {"total": 5, "action": "reject", "internal": False}
    assert evaluate_condition(parse(text), env, CTX) is expected


@pytest.mark.parametrize(
    ("text", "got"),
    [("total", "integer"), ("missing_field", "null"), ("'yes'", "string"), ("[true]", "list")],
)
def test_conditions_must_be_boolean(text: str, got: str) -> None:
    env = {"total": 5, "missing_field": None}
    with pytest.raises(ExprEvalError) as info:
        evaluate_condition(parse(text), env, CTX)
    assert info.value.message == f"condition [{text}] must be a boolean, got {got}"


def test_intent_examples() -> None:
    cond = parse("customer.creditLimit != null and total > customer.creditLimit")
    assert evaluate_condition(cond, {"customer": {"creditLimit": None}, "total": 9}, CTX) is False
    assert evaluate_condition(cond, {"customer": {"creditLimit": 5}, "total": 9}, CTX) is True


def test_evaluation_does_not_mutate_env() -> None:
    env = {"a": [1], "b": [2], "m": {"k": 1}}
    ev("a + b", env)
    ev("m | keys", env)
    assert env == {"a": [1], "b": [2], "m": {"k": 1}}


def test_tuples_read_as_lists() -> None:
    env = {"t": (1, 2)}
    assert ev("t[-1]", env) == 2
    assert ev("t == [1, 2]", env) is True
    assert ev("t | length", env) == 2
    assert ev("t | json", env) == "[1,2]"
