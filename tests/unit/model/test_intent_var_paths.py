"""A var a step ``uses`` that is set on some paths to it but not all (behind a decision, across a
fork's join, after a failure, or after its clearAfter step): a warning at the ``uses`` value that
shows one path on which it is unset (docs/reference/intent.md, "vars" and "parallel")."""

# ruff: noqa: E501 -- the case tables quote whole messages; unbroken they can be grepped

from __future__ import annotations

from pathlib import Path

import pytest
from diagnostic_cases import case
from test_intent_parallel_rules import decide, fork, task
from test_intent_process import check, diagnostics, process, project, svc

__all__ = ["project"]  # the shared project fixture

P = "processes[0]"
VARS = "    trigger: { onCreate: Order }\n    vars: [ { name: pw } ]\n"
UNSET = "uses [pw], which is not set on every path to this step"
FAILS = "reading it unset fails the step"


def make(name: str, more: str = "") -> str:
    return svc(name, f"delegate: Ok, produces: [pw]{more}")


def use(name: str, more: str = "") -> str:
    return svc(name, f"delegate: Ok, uses: [pw]{more}")


SET_ON_EVERY_PATH = [
    case(
        "both-arms-of-a-decision-produce-it",
        process(
            decide("d", "a", "b"),
            make("a", ", next: u"),
            make("b", ", next: u"),
            use("u"),
            head=VARS,
        ),
    ),
    case(
        "one-branch-produces-it-before-the-join",
        process(fork("f", "a, b", ", next: u"), make("a"), task("b"), use("u"), head=VARS),
    ),
    case(
        "a-nested-branch-produces-it-before-the-outer-join",
        process(
            fork("f", "a, c", ", next: u"),
            task("a"),
            fork("c", "p, q"),
            make("p"),
            task("q"),
            use("u"),
            head=VARS,
        ),
    ),
    case(
        "a-loop-back-to-a-step-after-the-producer",
        process(make("m"), task("t"), use("u"), decide("again", "t", "end"), head=VARS),
    ),
    case(
        "a-timer-route-after-the-producer",
        process(
            make("m"),
            task("t", ", timeout: { after: P1D, then: late }, next: end"),
            use("late"),
            head=VARS,
        ),
    ),
    case(
        "clear-after-the-last-use",
        process(make("m"), use("u1"), use("u2"), head=VARS.replace("pw }", "pw, clearAfter: u2 }")),
    ),
]


@pytest.mark.parametrize(("text", "expected"), SET_ON_EVERY_PATH)
def test_a_var_set_on_every_path_is_not_warned_of(
    text: str, expected: list[str], project: Path
) -> None:
    check(text, expected, project)


SET_ON_SOME_PATHS = [
    case(
        "one-arm-of-a-decision-produces-it",
        process(
            decide("d", "a", "b"),
            make("a", ", next: u"),
            svc("b", "delegate: Ok, next: u"),
            use("u"),
            head=VARS,
        ),
        f"step [u]: {UNSET} (not on d → b → u); {FAILS} ({P}.steps[3].args.uses[0])",
    ),
    case(
        "a-branch-produces-it-on-one-arm-only",
        process(
            fork("f", "a, b", ", next: u"),
            decide("a", "m", "join"),
            make("m"),
            task("b"),
            use("u"),
            head=VARS,
        ),
        f"step [u]: {UNSET} (not on f → a → join → u); {FAILS} ({P}.steps[4].args.uses[0])",
    ),
    case(
        "the-producer-failed",
        process(make("m", ", onError: h, next: end"), use("h"), head=VARS),
        f"step [h]: {UNSET} (not on m → h); {FAILS} ({P}.steps[1].args.uses[0])",
    ),
    case(
        "used-after-its-clear-after-step",
        process(make("m"), use("u1"), use("u2"), head=VARS.replace("pw }", "pw, clearAfter: u1 }")),
        f"step [u2]: {UNSET} (not on m → u1 → u2: clearAfter erases it after [u1]); {FAILS} ({P}.steps[2].args.uses[0])",
    ),
    case(
        "a-long-path-shows-its-ends",
        process(
            decide("d", "m", "s1"),
            make("m", ", next: u"),
            *(svc(f"s{i}", f"delegate: Ok, next: s{i + 1}") for i in range(1, 9)),
            svc("s9", "delegate: Ok, next: u"),
            use("u"),
            head=VARS,
        ),
        f"step [u]: {UNSET} (not on d → s1 → … → s8 → s9 → u); {FAILS} ({P}.steps[11].args.uses[0])",
    ),
]


@pytest.mark.parametrize(("text", "expected"), SET_ON_SOME_PATHS)
def test_a_var_set_on_some_paths_only_is_a_warning_with_a_path(
    text: str, expected: list[str], project: Path
) -> None:
    check(text, expected, project)


def test_the_warning_is_a_warning(project: Path) -> None:
    text = str(SET_ON_SOME_PATHS[0].values[0])
    app, lines = diagnostics(text, project)
    assert app is not None  # a warning does not stop the file from being used
    assert [line.split(": ")[1] for line in lines] == ["warning"]


def test_a_var_erased_in_a_sibling_branch_is_a_race(project: Path) -> None:
    text = process(
        make("m"), fork("f", "a, b", ", next: end"), use("a"), use("b"),
        head=VARS.replace("pw }", "pw, clearAfter: a }"),
    )  # fmt: skip
    check(
        text,
        [
            f"error: process [P] step [b]: uses [pw], which clearAfter erases after [a] in a sibling branch of parallel [f]: whether it is still set depends on which branch runs first ({P}.steps[3].args.uses[0])"
        ],
        project,
    )
