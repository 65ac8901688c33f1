"""The intent ``parallel`` step: its args and every branch rule, each a validation error at its
position (docs/reference/intent.md, "parallel")."""

# ruff: noqa: E501 -- the case tables quote whole messages; unbroken they can be grepped

from __future__ import annotations

from pathlib import Path

import pytest
from diagnostic_cases import case
from test_intent_process import check, diagnostics, process, project, svc

from procflow.model.ir import JOIN, ParallelStep

__all__ = ["project"]  # the shared project fixture

P = "processes[0]"


def fork(name: str, branches: str, more: str = "") -> str:
    return f"{{ name: {name}, kind: parallel, args: {{ branches: [{branches}]{more} }} }}"


def task(name: str, more: str = "") -> str:
    return f"{{ name: {name}, kind: userTask, args: {{ assignee: clerk{more} }} }}"


def decide(name: str, then: str, else_: str | None = None) -> str:
    tail = f", else: {else_}" if else_ else ""
    return f"{{ name: {name}, kind: decision, args: {{ if: 'total > 10', then: {then}{tail} }} }}"


SPEC_EXAMPLE = process(
    fork("reviews", "techReview, commercial", ", next: consolidate"),
    task("techReview", ", next: techSignoff"),
    svc("techSignoff", "setField: note, value: tech"),
    fork("commercial", "pricing, legal"),
    decide("pricing", "escalate", "join"),
    task("escalate"),
    task("legal"),
    svc("consolidate", "setRelationField: Status, value: 2"),
)

VARS = "    trigger: { onCreate: Order }\n    vars: [ { name: pw } ]\n"

VALID = [
    case("the-spec-example", SPEC_EXAMPLE),
    case(
        "error-on-a-branch-step-only-its-on-error-route-reaches",
        process(
            fork("f", "a, b", ", next: end"),
            svc("a", "delegate: Ok, onError: recover, next: join"),
            svc("recover", 'setField: note, value: "{error}"'),
            task("b"),
        ),
    ),
    case(
        "a-var-produced-before-the-fork-or-in-the-same-branch",
        process(
            svc("make", "delegate: Ok, produces: [pw], next: f"),
            fork("f", "a, b", ", next: after"),
            svc("a", "delegate: Ok, uses: [pw]"),
            svc("b", "delegate: Ok, produces: [pw], next: b2"),
            svc("b2", "delegate: Ok, uses: [pw]"),
            svc("after", "delegate: Ok, uses: [pw]"),
            head=VARS,
        ),
    ),
    case(
        "routes-to-join-from-every-route-kind",
        process(
            fork("f", "a, b", ", next: end"),
            svc("a", "delegate: Ok, onError: join, next: join"),
            task("b", ", timeout: { after: P1D, then: remind }, next: join"),
            svc("remind", "notify: { to: a@b.c, subject: late }"),
        ),
    ),
    case(
        "a-loop-inside-a-branch",
        process(
            fork("f", "a, b", ", next: end"),
            task("a", ", next: check"),
            decide("check", "a"),
            task("b"),
        ),
    ),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_forks_have_no_diagnostics(text: str, expected: list[str], project: Path) -> None:
    check(text, expected, project)


INVALID = [
    case(
        "error-after-the-join-which-calm-branches-reach",
        process(
            fork("f", "a, b", ", next: after"),
            svc("a", "delegate: Ok, onError: join"),
            task("b"),
            svc("after", 'setField: note, value: "{error}"'),
        ),
        f"step [after]: {{error}} would be empty here: it is reached without a failure: f → after; use {{error}} only on steps that every path reaches through an onError route ({P}.steps[3].args.value)",
    ),
    case(
        "branches-missing",
        process(fork("f", "a, b").replace("branches: [a, b]", "next: end"), task("a")),
        f"step [f]: missing required key [branches] (a list of at least two steps) ({P}.steps[0].args)",
        "step [a]: no route reaches this step, so it never runs",
    ),
    case(
        "one-branch",
        process(fork("f", "a", ", next: end"), task("a")),
        f"step [f]: branches names 1 step; a parallel runs at least two branches ({P}.steps[0].args.branches)",
    ),
    case(
        "branch-names-no-step",
        process(fork("f", "a, bb", ", next: end"), task("a"), task("b")),
        f"step [f]: branch [bb] is not a step of this process; did you mean [b]? ({P}.steps[0].args.branches[1])",
        "step [b]: no route reaches this step, so it never runs",
    ),
    case(
        "branch-is-end-or-join",
        process(fork("f", "a, end, join", ", next: end"), task("a")),
        "step [f]: branch [end] names no step; a branch starts at a declared step",
        "step [f]: branch [join] names no step; a branch starts at a declared step",
    ),
    case(
        "branch-is-the-fork-itself",
        process(fork("f", "a, f", ", next: end"), task("a")),
        "step [f]: branch [f] is the parallel step itself",
    ),
    case(
        "branch-listed-twice",
        process(fork("f", "a, a, b", ", next: end"), task("a"), task("b")),
        f"step [f]: branch [a] is listed twice ({P}.steps[0].args.branches[1])",
    ),
    case(
        "top-level-fork-without-next",
        process(fork("f", "a, b"), task("a"), task("b")),
        f"step [f]: a top-level parallel needs [next]: the step (or end) its join goes on at ({P}.steps[0])",
    ),
    case(
        "branch-routes-to-end",
        process(fork("f", "a, b", ", next: end"), task("a", ", next: end"), task("b")),
        f"step [a]: routes to [end] inside branch [a] of parallel [f]; the join would wait forever: route to [join] to end the branch ({P}.steps[1].args.next)",
    ),
    case(
        "branch-routes-to-the-forks-next",
        process(
            fork("f", "a, b", ", next: c"),
            task("a", ", next: c"),
            task("b"),
            svc("c", "delegate: Ok"),
        ),
        f"step [a]: routes to [c], where parallel [f] goes on after its join; route to [join] to end the branch ({P}.steps[1].args.next)",
    ),
    case(
        "a-step-in-two-branches",
        process(
            fork("f", "a, b", ", next: end"),
            task("a", ", next: shared"),
            task("b", ", next: shared"),
            task("shared"),
        ),
        f"step [shared]: is in branch [a] of parallel [f] and in branch [b] of parallel [f]; a step belongs to one branch only ({P}.steps[3])",
    ),
    case(
        "a-step-outside-routes-into-a-branch",
        process(
            svc("start", "delegate: Ok, onError: b, next: f"),
            fork("f", "a, b", ", next: end"),
            task("a"),
            task("b"),
        ),
        f"step [start]: routes into branch [b] of parallel [f]; only its parallel starts a branch ({P}.steps[0].args.onError)",
    ),
    case(
        "a-sibling-routes-into-another-branch",
        process(fork("f", "a, b", ", next: end"), task("a", ", next: b"), task("b")),
        f"step [b]: is in branch [a] of parallel [f] and in branch [b] of parallel [f]; a step belongs to one branch only ({P}.steps[2])",
    ),
    case(
        "falls-through-into-a-branch",
        process(
            fork("f", "a, b", ", next: c"),
            svc("c", "delegate: Ok"),
            task("a"),
            task("b"),
        ),
        f"step [c]: falls through into branch [a] of parallel [f]; only its parallel starts a branch: give this step a next ({P}.steps[1])",
    ),
    case(
        "the-process-starts-in-a-branch",
        process(task("a"), task("b"), fork("f", "a, b", ", next: end")),
        f"step [a]: the process starts in branch [a] of parallel [f]; only its parallel starts a branch ({P}.steps[0])",
        "step [b]: no route reaches this step, so it never runs",
        "step [f]: no route reaches this step, so it never runs",
    ),
    case(
        "a-step-named-join",
        process(svc("join", "delegate: Ok")),
        f"step [join]: the name [join] is reserved: it routes a branch to its join ({P}.steps[0].name)",
    ),
    case(
        "join-outside-a-branch",
        process(svc("a", "delegate: Ok, next: join")),
        f"step [a]: routes to [join] outside a branch; join ends a branch of a parallel ({P}.steps[0].args.next)",
    ),
    case(
        "top-level-fork-next-is-join",
        process(fork("f", "a, b", ", next: join"), task("a"), task("b")),
        f"step [f]: routes to [join] outside a branch; join ends a branch of a parallel ({P}.steps[0].args.next)",
    ),
    case(
        "abort-then-join",
        process(
            svc("a", "delegate: Ok"),
            head="    trigger: { onCreate: Order }\n    abortOn: { status: Cancelled, then: join }\n",
        ),
        f"process [P] abortOn: then [join] names no step; name the cleanup step, or end ({P}.abortOn.then)",
    ),
    case(
        "uses-a-var-only-a-sibling-branch-produces",
        process(
            fork("f", "a, b", ", next: end"),
            svc("a", "delegate: Ok, produces: [pw]"),
            fork("b", "b1, b2"),
            svc("b1", "delegate: Ok, uses: [pw]"),
            task("b2"),
            head=VARS,
        ),
        f"step [b1]: uses [pw], which only a sibling branch of parallel [f] produces (a): whether it is set depends on which branch runs first ({P}.steps[3].args.uses[0])",
    ),
    case(
        "parallel-takes-no-other-args",
        process(fork("f", "a, b", ", next: end, onError: end"), task("a"), task("b")),
        "step [f]: declares arg [onError] but is a parallel — onError is a serviceTask argument",
    ),
]


@pytest.mark.parametrize(("text", "expected"), INVALID)
def test_each_branch_rule_is_an_error_at_its_position(
    text: str, expected: list[str], project: Path
) -> None:
    check(text, expected, project)


def test_the_ir_knows_each_branch_and_where_a_terminal_flows(project: Path) -> None:
    app, lines = diagnostics(SPEC_EXAMPLE, project)
    assert lines == [] and app is not None
    process_ = app.processes[0]
    reviews, commercial = process_.step("reviews"), process_.step("commercial")
    assert isinstance(reviews, ParallelStep) and isinstance(commercial, ParallelStep)
    assert reviews.branches == ("techReview", "commercial") and reviews.next == "consolidate"
    assert reviews.members == (("techReview", "techSignoff"), ("commercial",))
    assert commercial.next is None and commercial.members == (("escalate", "pricing"), ("legal",))
    # inside a branch nothing falls through by position: a terminal flows into the join
    assert process_.fall_through("techSignoff") == JOIN
    assert process_.fall_through("commercial") == JOIN
    assert process_.fall_through("escalate") == JOIN
    assert process_.fall_through("reviews") == "techReview"  # outside: declaration order
