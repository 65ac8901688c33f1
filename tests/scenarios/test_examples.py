"""Every example ships scenarios that pass and take every route of its definition (the
tenant-onboarding example's flows call one another: its children run for real or faked)."""

from __future__ import annotations

from scenario_helpers import EXAMPLES

from procflow.testing import run_scenarios, run_suite


def test_every_example_has_scenarios() -> None:
    definitions = [*EXAMPLES.glob("*/*.intent"), *EXAMPLES.glob("*/*.flow.yaml")]
    tested = {p.parent for p in EXAMPLES.glob("*/*.test.yaml")}
    assert definitions
    assert {d.parent for d in definitions} <= tested


def test_the_examples_scenarios_pass() -> None:
    results = run_scenarios(str(EXAMPLES))
    failed = [(r.name, r.failure) for r in results if not r.passed]
    assert len(results) >= 4 * 3
    assert not failed


def test_the_examples_scenarios_take_every_route() -> None:
    suite = run_suite([str(EXAMPLES)])
    assert suite.ok
    # orders, order-review, provisioning, onboarding, reminders, nightly-report,
    # tenant-onboarding's three, customer-sync
    assert len(suite.coverage) == 10
    for one in suite.coverage:
        assert one.percent == 100.0, "\n".join(r.describe() for r in one.untaken)
        assert one.steps_hit == set(one.steps)
