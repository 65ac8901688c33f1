"""procflow.graph: drawing processes and flows as Mermaid and DOT."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from procflow import graph
from procflow.errors import UsageError
from procflow.expr import Expr, Template, parse, parse_placeholders, parse_template
from procflow.model.ir import (
    AbortOn,
    ActionStep,
    Application,
    Assignee,
    Decision,
    Delegate,
    EndStep,
    Entity,
    Field,
    FlowTrigger,
    ForEachStep,
    GroupStep,
    Modifiers,
    Notify,
    Process,
    Recipient,
    Relation,
    RepeatStep,
    RetryPolicy,
    Seed,
    ServiceTask,
    SetField,
    SetRelationField,
    TaskExpire,
    TaskTimeout,
    Trigger,
    UserTask,
    WaitForStep,
    WaitRecord,
    WaitStep,
)
from procflow.model.ir import Flow as FlowDef
from procflow.model.source import Pos

P = Pos("t", 1, 1, "")
HAS_DOT = shutil.which("dot") is not None


def expr(text: str) -> Expr:
    return parse(text)


def template(text: str) -> Template:
    return parse_template(text)


# --- fixtures: IR built by hand ------------------------------------------------------------


def provisioning() -> tuple[Process, Application]:
    retry3 = RetryPolicy(3, timedelta(seconds=30), P)
    steps = (
        ServiceTask(
            "createSchema",
            "serviceTask",
            Delegate("SchemaProvisioner", "custom", "SchemaProvisioner"),
            P,
            retry=retry3,
            on_error="recordFailure",
            produces=("dbPassword",),
        ),
        ServiceTask(
            "provisionApp",
            "serviceTask",
            Delegate("AppProvisioner", "custom", "AppProvisioner"),
            P,
            next="done",
            retry=RetryPolicy(5, timedelta(minutes=1), P),
            on_error="recordFailure",
        ),
        ServiceTask(
            "recordFailure",
            "serviceTask",
            SetField("failureMessage", "{error}", is_error=True),
            P,
            next="markFailed",
        ),
        ServiceTask(
            "markFailed", "serviceTask", SetRelationField("ProvisioningStatus", 3), P, next="end"
        ),
        EndStep("done", P),
    )
    process = Process(
        "TenantProvisioning", steps, P, trigger=Trigger("onCreate", "TenantApplication", P)
    )
    status = Entity(
        "TenantStatus", P, (Field("id", "integer", P, primary_key=True),), function="Setting"
    )
    app_entity = Entity(
        "TenantApplication",
        P,
        (Field("id", "integer", P, primary_key=True),),
        (Relation("ProvisioningStatus", "manyToOne", "TenantStatus", P, function="EntityStatus"),),
    )
    rows = ({"id": 1, "name": "Requested"}, {"id": 3, "name": "Failed"})
    app = Application(
        "provisioning",
        "app.intent",
        ".",
        P,
        entities=(status, app_entity),
        seeds=(Seed("statuses", "TenantStatus", rows, P),),
        processes=(process,),
    )
    return process, app


def orders() -> Process:
    notify = Notify(
        Recipient(path=("customer", "email")),
        parse_placeholders("Question"),
        parse_placeholders("Reply"),
    )
    steps = (
        UserTask(
            "review",
            Assignee("role", role="manager"),
            P,
            form="ApproveOrder",
            timeout=TaskTimeout(timedelta(days=2), "remind"),
            expire=TaskExpire("validUntil", "markExpired"),
        ),
        Decision(
            "outcome", expr("action == 'approve'"), "action == 'approve'", "approve", P, else_="ask"
        ),
        ServiceTask("ask", "serviceTask", notify, P),
        WaitRecord(
            "awaitReply",
            "onCreate",
            "OrderMessage",
            P,
            via="order",
            when_source="internal == false",
            next="review",
        ),
        Decision("bigOrder", expr("total > 1000"), "total > 1000", "markVoid", P),
        ServiceTask("approve", "serviceTask", SetRelationField("Status", 2), P, next="end"),
        ServiceTask("remind", "script", SetField("note", 'say "hi"'), P, next="end"),
        ServiceTask("markExpired", "serviceTask", SetRelationField("Status", 4), P, next="end"),
        ServiceTask("markVoid", "serviceTask", SetField("note", "voided"), P),
    )
    return Process(
        "OrderApproval",
        steps,
        P,
        trigger=Trigger("onCreate", "Order", P, when_source=("total != 0",)),
        abort_on=AbortOn((5,), "markVoid", P),
    )


def onboarding() -> FlowDef:
    check = ActionStep("check", "search", "status", {"id": template("{{ ticket.id }}")}, P)
    notify = ActionStep("notify", "log", "write", {"message": template("{{ x }}")}, P)
    steps = (
        WaitStep("cooling_off", P, for_=template("2d")),
        ActionStep(
            "ask",
            "slack",
            "post",
            {},
            P,
            mods=Modifiers(retry=RetryPolicy(3, timedelta(seconds=30), P)),
        ),
        WaitForStep(
            "approval",
            "slack.approval",
            {"message": template("{{ ask.ts }}")},
            timedelta(hours=24),
            P,
        ),
        RepeatStep(
            "indexed",
            timedelta(seconds=30),
            20,
            template("{{ check.status == 'indexed' }}"),
            (check,),
            P,
            mods=Modifiers(if_=template("{{ approval.status == 'received' }}")),
        ),
        ForEachStep(
            "each",
            template("{{ ticket.tags }}"),
            (GroupStep("inner", (notify,), P),),
            P,
            as_="tag",
            mods=Modifiers(recover=(ActionStep("cleanup", "log", "write", {}, P),)),
        ),
    )
    return FlowDef(
        "hire-onboarding",
        steps,
        "onboarding.flow.yaml",
        ".",
        P,
        trigger=FlowTrigger("crm.deal_won", "deal", P),
        recover=(ActionStep("note", "log", "write", {}, P),),
    )


def edges_mermaid(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "-->" in line or "-.->" in line]


def assert_dot_parses(text: str) -> None:
    if not HAS_DOT:
        return
    done = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "error" not in done.stderr.lower() and "warning" not in done.stderr.lower(), done.stderr


def assert_balanced(text: str) -> None:
    for open_, close in ("{}", "[]", "()"):
        assert text.count(open_) == text.count(close), (open_, close)


# --- intent processes ----------------------------------------------------------------------


def test_every_step_is_a_node_in_both_formats() -> None:
    process, app = provisioning()
    mermaid = graph.render(process, "mermaid", application=app)
    dot = graph.render(process, "dot", application=app)
    for step in process.steps:
        assert re.search(rf"^\s+s_{step.name}\W", mermaid, re.M), step.name
        assert f'"s_{step.name}" [' in dot, step.name
    assert mermaid.startswith("flowchart TD\n")
    assert dot.startswith('digraph "process TenantProvisioning" {')


def test_on_error_is_a_dashed_edge_naming_the_retries() -> None:
    process, app = provisioning()
    mermaid = graph.render(process, "mermaid", application=app)
    dot = graph.render(process, "dot", application=app)
    assert 's_createSchema -.->|"on error (after 3 retries)"| s_recordFailure' in mermaid
    assert 's_provisionApp -.->|"on error (after 5 retries)"| s_recordFailure' in mermaid
    assert (
        '"s_createSchema" -> "s_recordFailure" [label="on error (after 3 retries)", style=dashed];'
        in dot
    )


def test_on_error_without_retry_and_with_one_retry() -> None:
    plain = ServiceTask("a", "serviceTask", Delegate("A", "custom", "A"), P, on_error="b")
    once = ServiceTask(
        "b",
        "serviceTask",
        Delegate("B", "custom", "B"),
        P,
        retry=RetryPolicy(1, timedelta(minutes=1), P),
        on_error="end",
    )
    text = graph.render(Process("p", (plain, once), P), "mermaid")
    assert 's_a -.->|"on error"| s_b' in text
    assert 's_b -.->|"on error (after 1 retry)"| end_node' in text
    assert "retry 1 × PT1M" in text


def test_task_labels_show_action_and_retry() -> None:
    process, app = provisioning()
    text = graph.render(process, "mermaid", application=app)
    assert (
        's_createSchema["createSchema<br/>delegate SchemaProvisioner<br/>retry 3 × PT30S"]' in text
    )
    assert "set failureMessage = {error}" in text
    assert "set ProvisioningStatus = Failed(3)" in text
    assert "retry 5 × PT1M" in text


def test_seed_ids_without_the_application() -> None:
    process, _ = provisioning()
    assert "set ProvisioningStatus = 3" in graph.render(process, "mermaid")


def test_routes_to_end_share_one_end_node_and_end_steps_are_terminals() -> None:
    process, app = provisioning()
    text = graph.render(process, "mermaid", application=app)
    assert "s_markFailed --> end_node" in text
    assert "s_provisionApp --> s_done" in text
    assert 'end_node((("end")))' in text
    assert 's_done((("done")))' in text
    assert "s_recordFailure --> s_markFailed" in text
    assert 'start_node -->|"onCreate TenantApplication"| s_createSchema' in text


def test_an_end_step_named_end_is_the_end_node() -> None:
    steps = (ServiceTask("a", "serviceTask", SetField("x", 1), P, next="end"), EndStep("end", P))
    text = graph.render(Process("p", steps, P), "mermaid")
    assert "s_a --> s_end" in text
    assert "end_node" not in text


def test_decision_edges_say_yes_and_no() -> None:
    text = graph.render(orders(), "mermaid")
    assert 's_outcome -->|"yes"| s_approve' in text
    assert 's_outcome -->|"no"| s_ask' in text
    # without else, false falls through to the next step in declaration order
    assert 's_bigOrder -->|"yes"| s_markVoid' in text
    assert 's_bigOrder -->|"no"| s_approve' in text
    assert "s_outcome{\"outcome<br/>action == 'approve'\"}" in text


def test_user_task_timers() -> None:
    mermaid = graph.render(orders(), "mermaid")
    dot = graph.render(orders(), "dot")
    assert 's_review -.->|"after P2D (task stays open)"| s_remind' in mermaid
    assert 's_review -.->|"expires at validUntil"| s_markExpired' in mermaid
    assert '"s_review" -> "s_remind" [label="after P2D (task stays open)", style=dotted];' in dot
    assert '"s_review" -> "s_markExpired" [label="expires at validUntil", style=dotted];' in dot
    assert 's_review("review<br/>assignee: manager<br/>form ApproveOrder")' in mermaid
    assert "linkStyle " in mermaid


def test_abort_on_is_a_dashed_edge_from_an_abort_node() -> None:
    mermaid = graph.render(orders(), "mermaid")
    dot = graph.render(orders(), "dot")
    assert 'abort_node(["aborted: status in [5]"])' in mermaid
    assert 'abort_node -.->|"then"| s_markVoid' in mermaid
    assert '"abort_node" -> "s_markVoid" [label="then", style=dashed];' in dot


def test_wait_notify_script_and_trigger_guard() -> None:
    text = graph.render(orders(), "mermaid")
    assert 's_awaitReply{{"awaitReply<br/>wait for onCreate OrderMessage via order' in text
    assert "when internal == false" in text
    assert "s_awaitReply --> s_review" in text
    assert "notify customer.email" in text
    assert "remind (script)" in text
    assert 'start_node -->|"onCreate Order when total != 0"| s_review' in text


def test_quotes_are_escaped() -> None:
    mermaid = graph.render(orders(), "mermaid")
    dot = graph.render(orders(), "dot")
    assert "set note = #quot;say #quot;hi#quot;#quot;" in mermaid
    assert r"set note = \"say \"hi\"\"" in dot
    for line in mermaid.splitlines():  # labels are quoted once: quotes come in pairs
        assert line.count('"') % 2 == 0, line
    for line in dot.splitlines():
        assert line.replace('\\"', "").count('"') % 2 == 0, line


def test_odd_names_get_sanitized_ids() -> None:
    steps = (ServiceTask("my-step x", "serviceTask", SetField("x", "<b> & #1 | `"), P),)
    text = graph.render(Process("p", steps, P), "mermaid")
    assert "s_my_step_x[" in text
    assert "#lt;b#gt; #38; #35;1 #124; #96;" in text
    assert_dot_parses(graph.render(Process("p", steps, P), "dot"))


def test_long_labels_are_cut() -> None:
    long = "x == '" + "a" * 200 + "'"
    steps = (Decision("d", expr(long), long, "end", P),)
    text = graph.render(Process("p", steps, P), "dot")
    assert "…" in text and "a" * 100 not in text


# --- flows ---------------------------------------------------------------------------------


def test_flow_nodes_and_sequence() -> None:
    text = graph.render(onboarding(), "mermaid")
    assert 's_cooling_off{{"cooling_off<br/>wait 2d"}}' in text
    assert "wait for slack.approval (timeout 24h)" in text
    assert "slack.post<br/>retry 3 × 30s" in text
    assert 'start_node -->|"on crm.deal_won as deal"| s_cooling_off' in text
    assert "s_cooling_off --> s_ask" in text
    assert "s_ask --> s_approval" in text
    for step in ("cooling_off", "ask", "approval", "check", "notify", "cleanup", "note"):
        assert re.search(rf"^\s+s_{step}\W", text, re.M), step


def test_flow_containers_are_subgraphs() -> None:
    mermaid = graph.render(onboarding(), "mermaid")
    dot = graph.render(onboarding(), "dot")
    assert (
        'subgraph cluster_indexed["indexed: repeat every 30s, max 20, '
        "until check.status == 'indexed'\"]"
    ) in mermaid
    assert 'subgraph cluster_each["each: for each tag in ticket.tags"]' in mermaid
    assert 'subgraph cluster_inner["inner: group"]' in mermaid
    subgraphs = len(re.findall(r"^\s*subgraph ", mermaid, re.M))
    ends = len(re.findall(r"^\s*end$", mermaid, re.M))
    assert subgraphs == ends == 5  # indexed, each, inner, recover each, recover flow
    for cid in ("cluster_indexed", "cluster_each", "cluster_inner", "cluster_recover_flow"):
        assert f'subgraph "{cid}" {{' in dot


def test_flow_if_is_an_edge_label_with_a_skip_edge() -> None:
    mermaid = graph.render(onboarding(), "mermaid")
    dot = graph.render(onboarding(), "dot")
    assert "s_approval -->|\"if approval.status == 'received'\"| cluster_indexed" in mermaid
    assert 's_approval -.->|"skip"| cluster_each' in mermaid
    assert "cluster_indexed --> cluster_each" in mermaid
    assert (
        '"s_approval" -> "s_check" [lhead="cluster_indexed", '
        "label=\"if approval.status == 'received'\"];"
    ) in dot


def test_flow_recover_is_a_dashed_on_failure_branch() -> None:
    mermaid = graph.render(onboarding(), "mermaid")
    dot = graph.render(onboarding(), "dot")
    assert 'cluster_each -.->|"on failure"| cluster_recover_each' in mermaid
    assert 'cluster_recover_each -->|"recovered"| end_node' in mermaid
    assert 'start_node -.->|"on failure"| cluster_recover_flow' in mermaid
    assert 'cluster_recover_flow -->|"recovered"| end_node' in mermaid
    assert (
        '"s_notify" -> "s_cleanup" [ltail="cluster_each", lhead="cluster_recover_each", '
        'label="on failure", style=dashed];'
    ) in dot


def test_flow_wait_until_and_empty_container() -> None:
    steps = (
        WaitStep("later", P, until=template("{{ run.started_at | plus(1d) }}")),
        GroupStep("nothing", (), P),
    )
    flow = FlowDef("f", steps, "f.flow.yaml", ".", P)
    text = graph.render(flow, "mermaid")
    assert "wait until run.started_at #124; plus(1d)" in text  # | is escaped for Mermaid
    assert "(no steps)" in text
    assert_dot_parses(graph.render(flow, "dot"))


# --- syntax, determinism -------------------------------------------------------------------


def all_definitions() -> list[Process | FlowDef]:
    return [provisioning()[0], orders(), onboarding()]


@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
def test_output_is_balanced_and_deterministic(fmt: graph.Format) -> None:
    for definition in all_definitions():
        text = graph.render(definition, fmt)
        assert text == graph.render(definition, fmt)
        assert_balanced(text)
        assert text.endswith("\n")


@pytest.mark.skipif(
    not HAS_DOT,
    reason="Graphviz `dot` is not installed: only the DOT syntax check is skipped "
    "(every other assertion on the DOT text still runs)",
)
def test_dot_output_parses_with_graphviz() -> None:
    for definition in all_definitions():
        assert_dot_parses(graph.render(definition, "dot"))
    assert "<svg" in graph.to_svg(graph.render(orders(), "dot"))


def test_svg_without_graphviz_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _: None)
    with pytest.raises(UsageError, match="--format dot or --format mermaid"):
        graph.to_svg("digraph {}")


def test_durations() -> None:
    assert graph.short_duration(timedelta(seconds=30)) == "30s"
    assert graph.short_duration(timedelta(hours=24)) == "24h"
    assert graph.short_duration(timedelta(days=2)) == "2d"
    assert graph.short_duration(timedelta(minutes=90)) == "1h30m"
    assert graph.short_duration(timedelta(milliseconds=500)) == "500ms"
    assert graph.short_duration(timedelta(0)) == "0s"


# --- choosing what to draw -----------------------------------------------------------------


def test_select_one_process_without_a_name() -> None:
    process, app = provisioning()
    assert graph.select(app, None) is process
    assert graph.select(app, "TenantProvisioning") is process
    assert graph.names(app) == ("TenantProvisioning",)


def test_select_several_processes_needs_a_name() -> None:
    process, _ = provisioning()
    other = Process("Other", process.steps, P)
    two = Application("a", "a.intent", ".", P, processes=(process, other))
    with pytest.raises(UsageError, match=r"--name") as info:
        graph.select(two, None)
    assert "TenantProvisioning, Other" in str(info.value)
    assert graph.select(two, "Other") is other


def test_select_unknown_name_suggests() -> None:
    _, app = provisioning()
    with pytest.raises(UsageError, match=r"did you mean \[TenantProvisioning\]") as info:
        graph.select(app, "TenantProvisionin")
    assert "available: TenantProvisioning" in str(info.value)


def test_select_no_processes() -> None:
    with pytest.raises(UsageError, match="no processes"):
        graph.select(Application("a", "a.intent", ".", P), None)


def test_select_flow() -> None:
    flow = onboarding()
    assert graph.select(flow, None) is flow
    assert graph.select(flow, "hire-onboarding") is flow
    assert graph.names(flow) == ("hire-onboarding",)
    with pytest.raises(UsageError, match=r"did you mean \[hire-onboarding\]"):
        graph.select(flow, "hire-onboardin")


def test_draw_formats() -> None:
    _, app = provisioning()
    assert graph.draw(app, None, "mermaid").startswith("flowchart TD")
    assert "Failed(3)" in graph.draw(app, None, "dot")
    with pytest.raises(UsageError, match=r"did you mean \[svg\]"):
        graph.draw(app, None, "svgg")


# --- the shipped examples ------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(relative: str) -> Application | FlowDef:
    from procflow.model.validate import compile_file

    return compile_file(str(EXAMPLES / relative))


def test_example_provisioning() -> None:
    app = example("provisioning/app.intent")
    mermaid = graph.draw(app, None, "mermaid")
    for step in ("createSchema", "provisionApp", "recordFailure", "markFailed", "done"):
        assert re.search(rf"^\s+s_{step}\W", mermaid, re.M), step
    assert 's_createSchema -.->|"on error (after 3 retries)"| s_recordFailure' in mermaid
    assert 's_provisionApp -.->|"on error (after 5 retries)"| s_recordFailure' in mermaid
    assert "retry 3 × PT30S" in mermaid
    assert "set failureMessage = {error}" in mermaid
    assert "set ProvisioningStatus = Failed(3)" in mermaid
    assert "s_markFailed --> end_node" in mermaid
    assert_dot_parses(graph.draw(app, "TenantProvisioning", "dot"))


def test_example_orders() -> None:
    app = example("orders/orders.intent")
    mermaid = graph.draw(app, None, "mermaid")
    assert 's_outcome -->|"yes"| s_bigOrder' in mermaid
    assert 's_outcome -->|"no"| s_rejectedOrAsk' in mermaid
    assert 's_review -.->|"after P2D (task stays open)"| s_remind' in mermaid
    assert 's_review -.->|"expires at validUntil"| s_markExpired' in mermaid
    assert 'abort_node(["aborted: status in [Cancelled(5)]"])' in mermaid
    assert 'abort_node -.->|"then"| s_markVoid' in mermaid
    assert "s_awaitReply --> s_review" in mermaid
    assert "notify customer.email" in mermaid
    assert "set Status = Approved(2)" in mermaid
    assert_dot_parses(graph.draw(app, None, "dot"))


def test_example_onboarding() -> None:
    flow = example("onboarding/onboarding.flow.yaml")
    mermaid = graph.draw(flow, None, "mermaid")
    assert 's_cooling_off{{"cooling_off<br/>wait 2d"}}' in mermaid
    assert "wait for slack.approval (timeout 24h)" in mermaid
    assert (
        'subgraph cluster_indexed["indexed: repeat every 30s, max 20, '
        "until check.status == 'indexed'\"]"
    ) in mermaid
    assert "s_approval -->|\"if approval.status == 'received' and " in mermaid
    assert 's_approval -.->|"skip"| end_node' in mermaid
    assert 'start_node -.->|"on failure"| cluster_recover_flow' in mermaid
    assert_dot_parses(graph.draw(flow, None, "dot"))


@pytest.mark.parametrize(
    "relative",
    ["provisioning/app.intent", "orders/orders.intent", "onboarding/onboarding.flow.yaml"],
)
@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
def test_examples_are_balanced_and_deterministic(relative: str, fmt: str) -> None:
    text = graph.draw(example(relative), None, fmt)
    assert text == graph.draw(example(relative), None, fmt)
    assert_balanced(text)
