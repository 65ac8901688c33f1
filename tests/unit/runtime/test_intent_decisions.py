"""The pure core of intent execution: one step of one token → one Transition.

No database: runs, tokens and records are hand-built rows, and each test asserts what
``procflow.runtime.interpret.intent.advance`` decided (history, token, timers, vars, record write,
run).
"""

from __future__ import annotations

from typing import Any

import pytest

from procflow.model.ir import Application
from procflow.model.validate import compile_file
from procflow.runtime.interpret.intent import MAX_STEPS_WITHOUT_WAIT, RunCtx, advance
from procflow.runtime.transition import Transition
from procflow.store.rows import RunRow, TokenRow

T0 = 1_798_761_600_000_000  # 2027-01-01T00:00:00Z in microseconds
SECOND = 1_000_000
PASSWORD = "hunter2-correct-horse-battery"

INTENT = """\
name: unit
entities:
  - name: Customer
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: creditLimit, type: integer }
  - name: Order
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 200 }
      - { name: amount, type: integer }
      - { name: x, type: string, length: 100 }
      - { name: route, type: string, length: 20 }
      - { name: failureMessage, type: string, length: 500 }
      - { name: short, type: string, length: 12 }
    relations:
      - { name: customer, kind: manyToOne, to: Customer }

processes:
  - name: Chain
    trigger: { onCreate: Order }
    steps:
      - { name: a, kind: serviceTask, args: { delegate: Ok } }
      - { name: b, kind: serviceTask, args: { setField: route, value: b } }
      - { name: c, kind: serviceTask, args: { setField: route, value: c, next: end } }
      - { name: d, kind: serviceTask, args: { setField: route, value: d } }

  - name: Flaky
    trigger: { onCreate: Order }
    steps:
      - name: call
        kind: serviceTask
        args: { delegate: Flaky, fields: { fail_until: 2 }, retry: { count: 2, every: PT30S } }
      - { name: done, kind: end }

  - name: Exhausted
    trigger: { onCreate: Order }
    vars: [ { name: pw } ]
    steps:
      - name: call
        kind: serviceTask
        args:
          delegate: FlakyProducer
          fields: { fail_until: 99 }
          produces: [pw]
          retry: { count: 1, every: PT1M }
          onError: recordFailure
      - { name: done, kind: end }
      - name: recordFailure
        kind: serviceTask
        args: { setField: failureMessage, value: "{error}", next: end }

  - name: NoHandler
    trigger: { onCreate: Order }
    steps:
      - name: call
        kind: serviceTask
        args: { delegate: Flaky, fields: { fail_until: 99 }, retry: { count: 1, every: PT1M } }

  - name: Fatal
    trigger: { onCreate: Order }
    steps:
      - name: call
        kind: serviceTask
        args: { delegate: Fatal, retry: { count: 5, every: PT1M }, onError: cut }
      - { name: done, kind: end }
      - { name: cut, kind: serviceTask, args: { setField: short, value: "{error}", next: end } }

  - name: Decide
    trigger: { onCreate: Order }
    steps:
      - { name: check, kind: decision, args: { if: "amount > 100", then: big, else: small } }
      - { name: small, kind: serviceTask, args: { setField: route, value: small, next: end } }
      - { name: big, kind: serviceTask, args: { setField: route, value: big, next: end } }

  - name: FallThrough
    trigger: { onCreate: Order }
    steps:
      - { name: check, kind: decision, args: { if: "customer.creditLimit > 1000", then: vip } }
      - { name: normal, kind: serviceTask, args: { setField: route, value: normal, next: end } }
      - { name: vip, kind: serviceTask, args: { setField: route, value: vip, next: end } }

  - name: Loop
    trigger: { onCreate: Order }
    steps:
      - { name: ping, kind: serviceTask, args: { setField: route, value: ping, next: pong } }
      - { name: pong, kind: serviceTask, args: { setField: route, value: pong, next: ping } }

  - name: WaitingLoop
    trigger: { onCreate: Order }
    steps:
      - name: ping
        kind: serviceTask
        args: { delegate: FailsOddVisits, retry: { count: 1, every: PT1S } }
      - { name: pong, kind: serviceTask, args: { setField: route, value: pong, next: ping } }

  - name: Vars
    trigger: { onCreate: Order }
    vars: [ { name: pw, clearAfter: use } ]
    steps:
      - { name: make, kind: serviceTask, args: { delegate: Produce, produces: [pw] } }
      - { name: use, kind: serviceTask, args: { delegate: Use, uses: [pw] } }
      - { name: after, kind: serviceTask, args: { setField: route, value: after } }

  - name: Leak
    trigger: { onCreate: Order }
    vars: [ { name: pw } ]
    steps:
      - name: use
        kind: serviceTask
        args: { delegate: Leak, uses: [pw], onError: recordFailure }
      - { name: done, kind: end }
      - name: recordFailure
        kind: serviceTask
        args: { setField: failureMessage, value: "{error}", next: end }

  - name: LeakNoHandler
    trigger: { onCreate: Order }
    vars: [ { name: pw } ]
    steps:
      - { name: use, kind: serviceTask, args: { delegate: Leak, uses: [pw] } }

  - name: Undeclared
    trigger: { onCreate: Order }
    vars: [ { name: pw }, { name: token } ]
    steps:
      - name: make
        kind: serviceTask
        args: { delegate: SetsToken, produces: [pw], retry: { count: 3, every: PT1M } }

  - name: EmptyMessage
    trigger: { onCreate: Order }
    steps:
      - { name: call, kind: serviceTask, args: { delegate: EmptyMessage } }
"""

DELEGATES = f"""\
from procflow import NonRetryableError

PASSWORD = {PASSWORD!r}


def Ok(ctx):
    ctx.record["x"] = "done"


class Flaky:
    fail_until = 0

    def execute(self, ctx):
        ctx.record["x"] = f"written by attempt {{ctx.attempt}}"
        if ctx.attempt <= int(self.fail_until):
            raise ConnectionError(f"service unavailable (attempt {{ctx.attempt}})")


class FlakyProducer(Flaky):
    def execute(self, ctx):
        ctx.vars["pw"] = f"{{PASSWORD}}-{{ctx.attempt}}"
        super().execute(ctx)


def Fatal(ctx):
    raise NonRetryableError("card declined by the issuing bank")


def FailsOddVisits(ctx):
    if ctx.attempt == 1:
        raise ConnectionError("first attempt of every visit fails")


def Produce(ctx):
    ctx.vars["pw"] = PASSWORD


def Use(ctx):
    assert ctx.vars["pw"] == PASSWORD


def Leak(ctx):
    raise PermissionError(f"login refused for password {{ctx.vars['pw']}}")


def SetsToken(ctx):
    ctx.vars["pw"] = PASSWORD
    ctx.vars["token"] = "abc"


def EmptyMessage(ctx):
    raise KeyError()
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Application:
    root = tmp_path_factory.mktemp("unit-intent")
    (root / "custom").mkdir()
    (root / "custom" / "__init__.py").write_text(DELEGATES)
    (root / "app.intent").write_text(INTENT)
    definition = compile_file(str(root / "app.intent"))
    assert isinstance(definition, Application)
    return definition


def make_rc(
    app: Application,
    process: str,
    record: dict[str, Any] | None = None,
    vars_: dict[str, Any] | None = None,
    related: dict[tuple[str, int], dict[str, Any]] | None = None,
    step: str | None = None,
) -> tuple[RunCtx, TokenRow]:
    proc = next(p for p in app.processes if p.name == process)
    first = step or proc.steps[0].name
    rec = {"id": 7, "title": "t", "amount": None, "x": None, "route": None,
           "failureMessage": None, "short": None, "customer": None}  # fmt: skip
    rec.update(record or {})
    run = RunRow(
        id="run-1", version_id=1, name=process, dialect="intent", status="running",
        started_at=T0, business_key="7", record_entity="Order", record_id=7, seq=1,
    )  # fmt: skip
    token = TokenRow(11, run.id, first, first, "ready", 1, T0, None, {"visit": 1})
    stored = dict(vars_ or {})
    rc = RunCtx(
        run=run, tokens={11: token}, app=app, process=proc, project_dir=app.project_dir,
        record=rec, load_vars=lambda: dict(stored),
        load_related=lambda entity, id_: (related or {}).get((entity, id_)),
    )  # fmt: skip
    return rc, token


def types(tr: Transition) -> list[str]:
    return [h.type for h in tr.history]


def entry(tr: Transition, type_: str) -> Any:
    return next(h for h in tr.history if h.type == type_)


def fire(token: TokenRow) -> None:
    """What the engine does when the token's retry timer fires."""
    token.state, token.wait = "ready", None


# --- success and routing -----------------------------------------------------------------


def test_success_moves_to_the_next_step_and_buffers_the_record_write(app: Application) -> None:
    rc, token = make_rc(app, "Chain")
    tr = advance(rc, token, T0)
    assert types(tr) == ["step.started", "step.completed"]
    assert [(h.seq, h.step, h.path, h.attempt) for h in tr.history] == [
        (2, "a", "a", 1),
        (3, "a", "a", 1),
    ]
    assert (token.step, token.state, token.attempt) == ("b", "ready", 1)
    assert tr.tokens_update == [token]
    assert tr.record_write is not None
    assert (tr.record_write.entity, tr.record_write.id) == ("Order", 7)
    assert tr.record_write.before["x"] is None and tr.record_write.after["x"] == "done"
    assert rc.run.status == "running"
    assert tr.timers == []


def test_no_next_falls_through_and_next_end_completes_the_run(app: Application) -> None:
    rc, token = make_rc(app, "Chain", step="b")
    tr = advance(rc, token, T0)
    assert token.step == "c"  # declaration order
    assert tr.record_write is not None and tr.record_write.after["route"] == "b"
    tr = advance(rc, token, T0 + 5)
    assert types(tr) == ["step.started", "step.completed", "run.completed"]
    assert tr.record_write is not None and tr.record_write.after["route"] == "c"
    assert tr.tokens_delete == [11] and rc.tokens == {}
    assert (rc.run.status, rc.run.ended_at, rc.run.error) == ("completed", T0 + 5, None)


def test_falling_off_the_last_step_ends_the_run(app: Application) -> None:
    rc, token = make_rc(app, "Chain", step="d")
    tr = advance(rc, token, T0)
    assert types(tr)[-1] == "run.completed"
    assert rc.run.status == "completed"


# --- retry ---------------------------------------------------------------------------------


def test_a_failed_attempt_schedules_a_durable_retry_every_apart(app: Application) -> None:
    rc, token = make_rc(app, "Flaky")
    tr = advance(rc, token, T0)
    assert types(tr) == ["step.started", "attempt.failed", "retry.scheduled"]
    failed = entry(tr, "attempt.failed")
    assert (failed.step, failed.attempt) == ("call", 1)
    assert failed.data == {"message": "service unavailable (attempt 1)"}
    scheduled = entry(tr, "retry.scheduled")
    assert scheduled.attempt == 2
    assert scheduled.data == {"due": "2027-01-01T00:00:30Z"}
    assert (token.step, token.state, token.attempt, token.since) == ("call", "waiting", 2, T0)
    assert token.wait == {
        "kind": "retry",
        "attempt": 2,
        "of": 3,
        "due": T0 + 30 * SECOND,
        "last_error": "service unavailable (attempt 1)",
    }
    assert tr.timers == [(token, "retry", T0 + 30 * SECOND)]
    assert tr.record_write is None  # the failed attempt's write is discarded
    assert rc.run.status == "waiting"


def test_recovery_on_exactly_the_last_declared_attempt(app: Application) -> None:
    rc, token = make_rc(app, "Flaky")  # fails attempts 1 and 2; count 2 → 3 attempts in all
    now = T0
    for attempt in (1, 2):
        tr = advance(rc, token, now)
        assert token.wait is not None and token.wait["attempt"] == attempt + 1
        assert tr.record_write is None
        now = token.wait["due"]
        assert now == T0 + attempt * 30 * SECOND
        fire(token)
    tr = advance(rc, token, now)
    assert types(tr) == ["step.started", "step.completed"]
    assert entry(tr, "step.completed").attempt == 3
    assert tr.record_write is not None
    assert tr.record_write.after["x"] == "written by attempt 3"
    assert (token.step, token.attempt) == ("done", 1)
    advance(rc, token, now)
    assert rc.run.status == "completed"


def test_exhausted_retries_route_to_on_error_with_the_final_attempts_writes(
    app: Application,
) -> None:
    rc, token = make_rc(app, "Exhausted")
    tr = advance(rc, token, T0)
    assert tr.vars_set == {} and tr.record_write is None  # intermediate: all discarded
    assert "var.produced" not in types(tr)
    fire(token)
    tr = advance(rc, token, T0 + 60 * SECOND)
    assert types(tr) == ["step.started", "attempt.failed", "var.produced", "step.failed"]
    assert entry(tr, "step.failed").data == {"message": "service unavailable (attempt 2)"}
    assert tr.record_write is not None
    assert tr.record_write.after["x"] == "written by attempt 2"
    assert tr.vars_set == {"pw": f"{PASSWORD}-2"}
    assert (token.step, token.state, token.attempt) == ("recordFailure", "ready", 1)
    assert tr.timers == []
    assert rc.run.status == "running" and rc.run.error is None
    tr = advance(rc, token, T0 + 60 * SECOND)
    assert tr.record_write is not None
    assert tr.record_write.after["failureMessage"] == "service unavailable (attempt 2)"
    assert tr.record_write.after["x"] == "written by attempt 2"
    assert rc.run.status == "completed"
    assert "error" not in token.data


def test_final_failure_without_on_error_fails_the_run_on_that_step(app: Application) -> None:
    rc, token = make_rc(app, "NoHandler")
    advance(rc, token, T0)
    fire(token)
    tr = advance(rc, token, T0 + 60 * SECOND)
    assert types(tr) == ["step.started", "attempt.failed", "step.failed", "run.failed"]
    assert (token.step, token.state, token.attempt, token.wait) == ("call", "failed", 2, None)
    assert tr.tokens_update == [token] and tr.tokens_delete == []
    assert rc.run.status == "failed"
    assert rc.run.ended_at is None  # failed is not terminal: retry or cancel
    assert rc.run.error == {
        "step": "call",
        "message": "service unavailable (attempt 2)",
        "type": rc.run.error["type"] if rc.run.error else None,
    }
    assert set(rc.run.error or {}) == {"step", "message", "type"}
    assert isinstance((rc.run.error or {})["type"], str)
    assert tr.record_write is None and tr.timers == []


def test_non_retryable_error_skips_the_remaining_attempts(app: Application) -> None:
    rc, token = make_rc(app, "Fatal")
    tr = advance(rc, token, T0)
    assert "retry.scheduled" not in types(tr)
    assert types(tr) == ["step.started", "attempt.failed", "step.failed"]
    assert token.step == "cut" and token.data["error"] == "card declined by the issuing bank"
    assert tr.timers == []


def test_error_is_cut_to_the_field_length_with_an_ellipsis(app: Application) -> None:
    rc, token = make_rc(app, "Fatal")
    advance(rc, token, T0)
    tr = advance(rc, token, T0)
    assert tr.record_write is not None
    short = tr.record_write.after["short"]
    assert short == "card declin…"
    assert len(short) == 12


def test_an_empty_exception_message_becomes_its_class_name(app: Application) -> None:
    rc, token = make_rc(app, "EmptyMessage")
    advance(rc, token, T0)
    assert rc.run.error is not None and rc.run.error["message"] == "KeyError"


# --- decisions -----------------------------------------------------------------------------


@pytest.mark.parametrize(("amount", "target"), [(500, "big"), (100, "small"), (5, "small")])
def test_decision_then_and_else(app: Application, amount: int, target: str) -> None:
    rc, token = make_rc(app, "Decide", {"amount": amount})
    tr = advance(rc, token, T0)
    assert types(tr) == ["step.started", "step.completed"]
    assert entry(tr, "step.completed").data == {"outcome": target == "big"}
    assert token.step == target and tr.record_write is None


@pytest.mark.parametrize(("limit", "target"), [(5000, "vip"), (10, "normal")])
def test_decision_over_a_relation_without_else_falls_through(
    app: Application, limit: int, target: str
) -> None:
    related = {("Customer", 3): {"id": 3, "creditLimit": limit}}
    rc, token = make_rc(app, "FallThrough", {"customer": 3}, related=related)
    advance(rc, token, T0)
    assert token.step == target


def test_a_decision_that_cannot_be_evaluated_fails_the_run(app: Application) -> None:
    rc, token = make_rc(app, "Decide", {"amount": None})
    advance(rc, token, T0)
    assert rc.run.status == "failed"
    assert rc.run.error is not None and rc.run.error["step"] == "check"


# --- loop guard ------------------------------------------------------------------------------


def test_a_thousand_steps_without_a_wait_fail_naming_the_loop(app: Application) -> None:
    rc, token = make_rc(app, "Loop")
    for i in range(MAX_STEPS_WITHOUT_WAIT + 5):
        advance(rc, token, T0 + i)
        if rc.run.status != "running":
            break
    assert rc.run.status == "failed"
    assert i + 1 <= MAX_STEPS_WITHOUT_WAIT
    assert rc.run.error is not None
    message = rc.run.error["message"]
    assert "ping" in message and "pong" in message and "1000" in message


def test_a_loop_that_waits_each_round_is_not_an_endless_loop(app: Application) -> None:
    rc, token = make_rc(app, "WaitingLoop")
    now = T0
    for _ in range(3 * MAX_STEPS_WITHOUT_WAIT):
        advance(rc, token, now)
        assert rc.run.status in ("running", "waiting"), rc.run.error
        if token.state == "waiting":
            assert token.wait is not None
            now = token.wait["due"]
            fire(token)


# --- vars ------------------------------------------------------------------------------------


def test_produce_then_clear_after_the_using_step_then_sweep_at_the_end(app: Application) -> None:
    rc, token = make_rc(app, "Vars")
    tr = advance(rc, token, T0)
    assert tr.vars_set == {"pw": PASSWORD}
    produced = entry(tr, "var.produced")
    assert (produced.step, produced.data) == ("make", {"var": "pw"})
    assert not any(PASSWORD in repr(h) for h in tr.history)
    tr = advance(rc, token, T0)  # `use` completes: pw is cleared in the same transition
    assert types(tr) == ["step.started", "step.completed", "var.cleared"]
    assert tr.vars_clear == ["pw"] and tr.vars_set == {}
    assert entry(tr, "var.cleared").data == {"var": "pw"}
    assert token.step == "after"


def test_the_end_of_run_sweep_erases_every_var_left(app: Application) -> None:
    rc, token = make_rc(app, "Exhausted")  # an onError route leaves pw set until the end
    advance(rc, token, T0)
    fire(token)
    advance(rc, token, T0)
    tr = advance(rc, token, T0)  # recordFailure → end
    assert rc.run.status == "completed"
    assert tr.vars_sweep is True
    assert entry(tr, "var.cleared").data == {"var": "pw"}


def test_a_var_value_in_an_exception_message_is_masked_everywhere(app: Application) -> None:
    rc, token = make_rc(app, "Leak", vars_={"pw": PASSWORD})
    tr = advance(rc, token, T0)
    failed = entry(tr, "attempt.failed")
    assert failed.data == {"message": "login refused for password ***"}
    assert token.data["error"] == "login refused for password ***"
    tr = advance(rc, token, T0)
    assert tr.record_write is not None
    assert tr.record_write.after["failureMessage"] == "login refused for password ***"
    assert not any(PASSWORD in repr(h) for h in tr.history)


def test_a_masked_message_also_fills_the_runs_error(app: Application) -> None:
    rc, token = make_rc(app, "LeakNoHandler", vars_={"pw": PASSWORD})
    advance(rc, token, T0)
    assert rc.run.status == "failed"
    assert rc.run.error is not None
    assert rc.run.error["message"] == "login refused for password ***"


def test_setting_an_undeclared_var_fails_the_step_naming_it(app: Application) -> None:
    rc, token = make_rc(app, "Undeclared")
    tr = advance(rc, token, T0)
    assert rc.run.status == "failed"  # a contract breach does not heal by retrying
    assert "retry.scheduled" not in types(tr)
    assert tr.vars_set == {}  # the legal write of the failed attempt is discarded too
    message = entry(tr, "attempt.failed").data["message"]
    assert "[token]" in message and "produce" in message
