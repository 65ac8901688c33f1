"""An intent ``parallel`` step in the web UI: the definition's diagram (its page and the API's
``diagram.svg``) draws the fork and its join as gateways, with the edges into the branches and
out of the join; a forked run's page lists each branch token's why-waiting and highlights every
step a token waits at, the join gateways included, as the branches arrive one by one."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from web_site import Web

# A top-level fork whose second branch is a nested fork without next; in it, a decision routes
# to the nested fork's join (a small order is priced without escalation).
REVIEWS = """\
name: quotes
entities:
  - name: Quote
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: amount, type: integer }
      - { name: state, type: string, length: 20 }
processes:
  - name: QuoteReview
    trigger: { onCreate: Quote }
    steps:
      - { name: reviews, kind: parallel, args: { branches: [techReview, commercial], next: consolidate } }
      - { name: techReview, kind: userTask, args: { assignee: engineer, next: techSignoff } }
      - { name: techSignoff, kind: serviceTask, args: { setField: state, value: tech } }
      - { name: commercial, kind: parallel, args: { branches: [pricing, legal] } }
      - { name: pricing, kind: decision, args: { if: "amount > 1000", then: escalate, else: join } }
      - { name: escalate, kind: userTask, args: { assignee: manager } }
      - { name: legal, kind: userTask, args: { assignee: lawyer } }
      - { name: consolidate, kind: serviceTask, args: { setField: state, value: done } }
"""  # noqa: E501 -- one step a line, as the files are written

SVG = "{http://www.w3.org/2000/svg}"
STATES = ("is-done", "is-active", "is-failed")


@dataclass
class Drawing:
    """What a diagram's SVG says: each node group by its DOT id (``<title>``), and each edge as
    (from, to) -> its label."""

    nodes: dict[str, ET.Element] = field(default_factory=dict)
    edges: dict[tuple[str, str], str] = field(default_factory=dict)

    def texts(self, node: str) -> list[str]:
        return [t.text or "" for t in self.nodes[node].iter(f"{SVG}text")]

    def state(self, kind: str, name: str) -> str | None:
        """The one state class of the step (``kind`` step) or fork's join (``join``) ``name``."""
        found = [n for n in self.nodes.values() if n.get(f"data-{kind}") == name]
        assert len(found) == 1, (kind, name, len(found))
        classes = (found[0].get("class") or "").split()
        assert classes[:2] == ["node", kind], classes
        states = [c for c in classes if c in STATES]
        assert len(states) <= 1, (name, states)
        return states[0] if states else None


def drawing(svg: str) -> Drawing:
    drawn = Drawing()
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        title = group.findtext(f"{SVG}title") or ""
        if (group.get("class") or "").startswith("node"):
            drawn.nodes[title] = group
        elif group.get("class") == "edge":
            src, dst = title.split("->")
            drawn.edges[(src, dst)] = " ".join(t.text or "" for t in group.iter(f"{SVG}text"))
    return drawn


def page_drawing(html: str) -> Drawing:
    """The diagram inlined in a UI page."""
    found = re.search(r'<svg [^>]*aria-label="Diagram of[\s\S]*?</svg>', html)
    assert found is not None, "the page shows a diagram"
    return drawing(found.group(0))


def widths(node: ET.Element) -> tuple[float, float]:
    """A gateway's polygon: its width at the top and at the bottom (SVG's y grows downwards)."""
    polygon = node.find(f"{SVG}polygon")
    assert polygon is not None
    points = [tuple(map(float, p.split(","))) for p in (polygon.get("points") or "").split()]
    top, bottom = min(y for _, y in points), max(y for _, y in points)
    xs_at = {y: [x for x, py in points if py == y] for y in (top, bottom)}
    return max(xs_at[top]) - min(xs_at[top]), max(xs_at[bottom]) - min(xs_at[bottom])


def deploy(web: Web) -> None:
    path = web.tmp / "quotes.intent"
    path.write_text(REVIEWS)
    web.engine.deploy(str(path))


def test_the_definition_diagram_draws_each_fork_and_its_join_as_gateways(web: Web) -> None:
    deploy(web)
    api = web.client.get("/definitions/QuoteReview/diagram.svg")
    assert api.status_code == 200
    for drawn in (drawing(api.text), page_drawing(web.page("/ui/definitions/QuoteReview"))):
        for fork in ("reviews", "commercial"):
            split, join = drawn.nodes[f"s_{fork}"], drawn.nodes[f"j_{fork}"]
            assert (split.get("class"), split.get("data-step")) == ("node step", fork)
            assert (join.get("class"), join.get("data-join")) == ("node join", fork)
            assert drawn.texts(f"s_{fork}") == [fork, "parallel"]
            assert drawn.texts(f"j_{fork}") == ["join"]
            top, bottom = widths(split)
            assert top < bottom, "a fork is a trapezium wider below"
            top, bottom = widths(join)
            assert top > bottom, "a join is a trapezium wider above"
        edges = set(drawn.edges)
        # The forks split into their branches' first steps...
        assert {("s_reviews", "s_techReview"), ("s_reviews", "s_commercial")} <= edges
        assert {("s_commercial", "s_pricing"), ("s_commercial", "s_legal")} <= edges
        # ...each branch's last step (or its route to join) flows into the innermost join...
        assert {("s_techSignoff", "j_reviews"), ("s_legal", "j_commercial")} <= edges
        assert {("s_escalate", "j_commercial"), ("s_pricing", "j_commercial")} <= edges
        assert drawn.edges[("s_pricing", "j_commercial")] == "no"  # the decision's else: join
        # ...the nested join into the enclosing one, and that one goes on at the fork's next.
        assert {("j_commercial", "j_reviews"), ("j_reviews", "s_consolidate")} <= edges
        assert not any(src == "s_reviews" and dst == "s_consolidate" for src, dst in edges)


def why_lines(html: str) -> set[str]:
    found = re.search(r'<ul class="why">(.*?)</ul>', html, re.S)
    return set(re.findall(r"<li>(.*?)</li>", found.group(1))) if found else set()


def task_of(web: Web, assignee: str) -> int:
    [task] = [t for t in web.engine.list_tasks() if t["assignee"] == assignee]
    return int(task["id"])


def test_a_forked_runs_page_shows_each_branch_token_and_highlights_where_they_wait(
    web: Web,
) -> None:
    deploy(web)
    quote = web.engine.create_record("Quote", {"amount": 10})
    web.work()
    run_id = web.engine.runs_for_record("Quote", quote["id"])[0].id
    engineer, lawyer = task_of(web, "engineer"), task_of(web, "lawyer")

    # Two user tasks wait side by side, each fork's token at its join for the branches still out.
    html = web.page(f"/ui/runs/{run_id}")
    assert why_lines(html) == {
        "reviews: join waiting for branches techReview, commercial",
        f"techReview: user task {engineer} for engineer",
        "commercial: join waiting for branches legal",
        f"legal: user task {lawyer} for lawyer",
    }
    assert why_lines(web.page(f"/ui/runs/{run_id}/live")) == why_lines(html)
    drawn = page_drawing(html)
    steps = ("reviews", "techReview", "techSignoff", "commercial", "pricing", "escalate", "legal")
    assert {s: drawn.state("step", s) for s in (*steps, "consolidate")} == {
        "reviews": "is-done", "techReview": "is-active", "techSignoff": None,
        "commercial": "is-done", "pricing": "is-done", "escalate": None, "legal": "is-active",
        "consolidate": None,
    }  # fmt: skip
    assert drawn.state("join", "reviews") == drawn.state("join", "commercial") == "is-active"
    row = re.search(rf'<a href="/ui/runs/{run_id}">.*?</tr>', web.page("/ui/runs"), re.S)
    assert row is not None and '<td data-label="Waiting for">join, task</td>' in row.group(0)

    # The lawyer's branch arrives: the nested join goes on, the outer join waits for the other.
    web.engine.complete_task(lawyer)
    web.work()
    html = web.page(f"/ui/runs/{run_id}")
    assert why_lines(html) == {
        "reviews: join waiting for branches techReview",
        f"techReview: user task {engineer} for engineer",
    }
    drawn = page_drawing(html)
    assert (drawn.state("step", "legal"), drawn.state("step", "techReview")) == (
        "is-done", "is-active",
    )  # fmt: skip
    assert drawn.state("join", "commercial") == "is-done"
    assert drawn.state("join", "reviews") == "is-active"

    # The engineer's arrives too: the join goes on at consolidate and the run ends.
    web.engine.complete_task(engineer)
    web.work()
    html = web.page(f"/ui/runs/{run_id}")
    assert "The run has ended (completed)." in html and why_lines(html) == set()
    drawn = page_drawing(html)
    for step in ("reviews", "techReview", "techSignoff", "commercial", "legal", "consolidate"):
        assert drawn.state("step", step) == "is-done", step
    assert drawn.state("step", "escalate") is None  # the small quote was not escalated
    assert drawn.state("join", "reviews") == drawn.state("join", "commercial") == "is-done"
