"""procflow.graph: a ``parallel`` step is drawn as a fork gateway and a join gateway."""

from __future__ import annotations

from procflow import graph
from procflow.model.ir import JOIN, Assignee, ParallelStep, Process, ServiceTask, SetField, UserTask
from procflow.model.source import Pos

P = Pos("t", 1, 1, "")


def reviews() -> Process:
    """The spec's shape: a fork whose second branch is a nested fork without next."""
    steps = (
        ParallelStep("reviews", ("tech", "commercial"), P, "done", (("tech",), ("commercial",))),
        UserTask("tech", Assignee("role", role="engineer"), P),
        ParallelStep("commercial", ("pricing", "legal"), P, None, (("pricing",), ("legal",))),
        ServiceTask("pricing", "serviceTask", SetField("x", 1), P, next=JOIN),
        UserTask("legal", Assignee("role", role="lawyer"), P),
        ServiceTask("done", "serviceTask", SetField("x", 2), P),
    )
    return Process("p", steps, P)


def test_a_fork_and_its_join_are_gateways_and_branches_flow_into_the_join() -> None:
    text = graph.render(reviews(), "mermaid")
    assert 's_reviews[/"reviews<br/>parallel"\\]' in text
    assert 'j_reviews[\\"join"/]' in text
    assert "s_reviews --> s_tech" in text and "s_reviews --> s_commercial" in text
    assert "s_tech --> j_reviews" in text  # a terminal: no route, so into its join
    assert "s_pricing --> j_commercial" in text  # an explicit join
    assert "s_legal --> j_commercial" in text
    assert "j_commercial --> j_reviews" in text  # a nested join flows into the enclosing one
    assert "j_reviews --> s_done" in text  # the join goes on at the fork's next
    assert "s_commercial --> s_pricing" in text


def test_dot_draws_the_gateways_as_trapezia() -> None:
    text = graph.render(reviews(), "dot")
    assert '"s_reviews" [shape=trapezium, label="reviews\\nparallel"];' in text
    assert '"j_reviews" [shape=invtrapezium, label="join"];' in text
    assert '"j_commercial" -> "j_reviews";' in text
