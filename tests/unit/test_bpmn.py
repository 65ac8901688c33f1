"""procflow.graph.bpmn: BPMN 2.0 XML with its diagram, checked against the OMG BPMN 2.0 XSD.

The XSDs are the ones SpiffWorkflow ships (a test dependency; nothing is fetched at test time).
Every definition of ``bpmn_files.definitions()`` (the examples, and ``tests/bpmn_cases``) must
validate. bpmn-js's import of the same files is ``tests/browser/test_bpmn_js.py``.
"""

from __future__ import annotations

import importlib.resources
import re
import shutil
from functools import cache

import bpmn_files
import pytest
from bpmn_files import ROOT, definitions
from click.testing import CliRunner
from lxml import etree

from procflow import graph
from procflow.cli import cli
from procflow.errors import UsageError
from procflow.graph.bpmn_model import BpmnIds, ncname
from procflow.model.ir import Application
from procflow.model.validate import compile_file

NS = {
    "bpmn": "http://www.omg.org/spec/BPMN/20100524/MODEL",
    "bpmndi": "http://www.omg.org/spec/BPMN/20100524/DI",
    "dc": "http://www.omg.org/spec/DD/20100524/DC",
    "di": "http://www.omg.org/spec/DD/20100524/DI",
}
XSI_TYPE = "{http://www.w3.org/2001/XMLSchema-instance}type"
NCNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
FLOW_NODES = (
    "startEvent", "endEvent", "intermediateCatchEvent", "boundaryEvent", "userTask",
    "serviceTask", "sendTask", "scriptTask", "callActivity", "subProcess", "exclusiveGateway",
    "parallelGateway",
)  # fmt: skip


@cache
def schema() -> etree.XMLSchema:
    folder = importlib.resources.files("SpiffWorkflow") / "bpmn" / "parser" / "schema"
    with importlib.resources.as_file(folder / "BPMN20.xsd") as xsd:
        return etree.XMLSchema(etree.parse(str(xsd)))


@cache
def exported(file: str, name: str | None = None) -> str:
    return bpmn_files.exported(file, name)


def tree(file: str, name: str | None = None) -> etree._Element:
    return etree.fromstring(exported(file, name).encode())


def element(root: etree._Element, eid: str) -> etree._Element:
    [found] = root.xpath(f"//bpmn:*[@id='{eid}']", namespaces=NS)
    assert isinstance(found, etree._Element)
    return found


def local(el: etree._Element) -> str:
    return etree.QName(el).localname


@pytest.mark.parametrize(("file", "name"), definitions())
def test_every_example_and_case_validates_against_the_omg_bpmn_xsd(file: str, name: str) -> None:
    document = etree.fromstring(exported(file, name).encode())
    valid = schema().validate(document)
    assert valid, "\n".join(str(e) for e in schema().error_log)


def test_the_examples_and_cases_are_all_there() -> None:
    found = definitions()
    assert len(found) >= 10
    assert ("tests/bpmn_cases/every-construct.flow.yaml", "every-construct") in found
    assert ("tests/bpmn_cases/names.intent", "Triage_di") in found


def test_a_flow_s_steps_are_the_elements_the_mapping_names() -> None:
    root = tree("tests/bpmn_cases/every-construct.flow.yaml")
    kinds = {
        "fetch": "serviceTask", "tolerant": "serviceTask", "child": "callActivity",
        "detached": "callActivity", "pause": "intermediateCatchEvent",
        "until_noon": "intermediateCatchEvent", "hear": "intermediateCatchEvent",
        "poll": "subProcess", "each": "subProcess", "grp": "subProcess", "probe": "serviceTask",
        "inner_set": "scriptTask", "stop": "endEvent", "tell": "serviceTask",
    }  # fmt: skip
    assert {eid: local(element(root, eid)) for eid in kinds} == kinds
    assert element(root, "child").get("calledElement") == "helper-flow"
    assert element(root, "detached").get("name") == "detached (detached)"
    assert element(root, "fetch").findtext("bpmn:documentation", namespaces=NS) == (
        "fetch the page\nhttp.request\nretry 2 × 10s\ntimeout 30s per attempt"
    )
    pause = element(root, "pause").find("bpmn:timerEventDefinition/bpmn:timeDuration", NS)
    assert pause is not None and pause.text == "1h"
    noon = element(root, "until_noon").find("bpmn:timerEventDefinition/bpmn:timeDate", NS)
    assert noon is not None and noon.text == "run.started_at | plus(1d)"
    stop = element(root, "stop")
    assert stop.find("bpmn:errorEventDefinition", NS) is not None


def test_messages_are_declared_once_and_caught_by_the_start_and_wait_for() -> None:
    root = tree("tests/bpmn_cases/every-construct.flow.yaml")
    [message] = root.findall("bpmn:message", NS)
    assert message.get("name") == "slack.approval"
    for eid in ("start", "hear"):
        caught = element(root, eid).find("bpmn:messageEventDefinition", NS)
        assert caught is not None and caught.get("messageRef") == message.get("id")
    assert element(root, "start").get("name") == "on slack.approval when click.approved"


def test_repeat_is_a_standard_loop_and_for_each_a_sequential_multi_instance() -> None:
    root = tree("tests/bpmn_cases/every-construct.flow.yaml")
    loop = element(root, "poll").find("bpmn:standardLoopCharacteristics", NS)
    assert loop is not None and loop.get("loopMaximum") == "5"
    assert loop.findtext("bpmn:loopCondition", namespaces=NS) == "probe.status == 200"
    multi = element(root, "each").find("bpmn:multiInstanceLoopCharacteristics", NS)
    assert multi is not None and multi.get("isSequential") == "true"
    assert element(root, "grp").find("bpmn:standardLoopCharacteristics", NS) is None
    inner = [local(c) for c in element(root, "poll") if local(c) in FLOW_NODES]
    assert inner == ["startEvent", "serviceTask", "endEvent"]


def flows_from(root: etree._Element, source: str) -> list[etree._Element]:
    return list(root.xpath(f"//bpmn:sequenceFlow[@sourceRef='{source}']", namespaces=NS))


def target(root: etree._Element, source: str) -> str:
    [flow] = flows_from(root, source)
    return str(flow.get("targetRef"))


def boundary(root: etree._Element, host: str) -> list[etree._Element]:
    return list(root.xpath(f"//bpmn:boundaryEvent[@attachedToRef='{host}']", namespaces=NS))


def test_if_is_an_exclusive_gateway_whose_default_flow_skips_the_step() -> None:
    root = tree("tests/bpmn_cases/every-construct.flow.yaml")
    gate = element(root, "until_noon_if")
    assert local(gate) == "exclusiveGateway"
    yes, skip = flows_from(root, "until_noon_if")
    assert (yes.get("targetRef"), yes.get("name")) == ("until_noon", "yes")
    condition = yes.find("bpmn:conditionExpression", NS)
    assert condition is not None and condition.text == "fetch.status == 200"
    assert condition.get(XSI_TYPE) == "bpmn:tFormalExpression"
    assert gate.get("default") == skip.get("id")
    assert (skip.get("targetRef"), skip.get("name")) == ("hear", "skip")


def test_failure_routes_are_boundary_events() -> None:
    root = tree("tests/bpmn_cases/every-construct.flow.yaml")
    # timeout, not optional: a timer to an error end event (the failure goes on up)
    [timer] = boundary(root, "fetch")
    duration = timer.find("bpmn:timerEventDefinition/bpmn:timeDuration", NS)
    assert duration is not None and duration.text == "PT30S"
    ended = element(root, target(root, timer.get("id")))
    assert local(ended) == "endEvent"
    assert ended.find("bpmn:errorEventDefinition", NS) is not None
    # optional: the error and the timer both lead where the step itself goes
    caught = boundary(root, "tolerant")  # an event's definition is its last child
    assert sorted(local(b[-1]) for b in caught) == ["errorEventDefinition", "timerEventDefinition"]
    assert {target(root, str(b.get("id"))) for b in caught} == {target(root, "tolerant")}
    # recover: an error boundary to a sub-process of the recover steps, then on
    [failed] = boundary(root, "each")
    recovered = element(root, target(root, failed.get("id")))
    assert local(recovered) == "subProcess"
    assert element(root, "mend").getparent() is recovered
    assert target(root, recovered.get("id")) == target(root, "each") == "grp"
    # the flow's recover: an event sub-process started by an error
    holder = element(root, "tell").getparent()
    assert holder is not None and holder.get("triggeredByEvent") == "true"
    [start] = holder.findall("bpmn:startEvent", NS)
    assert start.find("bpmn:errorEventDefinition", NS) is not None


def test_an_intent_process_maps_tasks_decisions_waits_timers_and_abort() -> None:
    root = tree("examples/orders/orders.intent")
    kinds = {
        "review": "userTask", "outcome": "exclusiveGateway", "askCustomer": "sendTask",
        "awaitReply": "intermediateCatchEvent", "approve": "serviceTask",
        "markVoid": "serviceTask",
    }  # fmt: skip
    assert {eid: local(element(root, eid)) for eid in kinds} == kinds
    no = element(root, str(element(root, "outcome").get("default")))
    assert (no.get("name"), no.get("targetRef")) == ("no", "rejectedOrAsk")
    timers = {b.get("id"): b for b in boundary(root, "review")}
    assert timers["review_timeout"].get("cancelActivity") == "false"  # the task stays open
    assert timers["review_expire"].get("cancelActivity") is None  # withdrawn: interrupting
    assert target(root, "review_timeout") == "remind"
    date = timers["review_expire"].find("bpmn:timerEventDefinition/bpmn:timeDate", NS)
    assert date is not None and date.text == "validUntil"
    abort = element(root, "aborted")
    assert abort.findtext("bpmn:conditionalEventDefinition/bpmn:condition", namespaces=NS) == (
        "status in [Cancelled(5)]"  # the seeded status by name, as on the SVG
    )
    assert target(root, "aborted") == "markVoid"
    waits = element(root, "awaitReply").find("bpmn:messageEventDefinition", NS)
    assert waits is not None
    assert element(root, str(waits.get("messageRef"))).get("name") == "onCreate OrderMessage"


def test_on_error_is_an_error_boundary_event_and_end_steps_are_end_events() -> None:
    root = tree("examples/provisioning/app.intent")
    [caught] = boundary(root, "createSchema")
    assert caught.get("name") == "on error (after 3 retries)"
    assert caught.find("bpmn:errorEventDefinition", NS) is not None
    assert target(root, caught.get("id")) == "recordFailure"
    assert local(element(root, "done")) == "endEvent"


def test_a_step_keeps_its_name_as_id_and_the_export_s_own_elements_give_way() -> None:
    root = tree("tests/bpmn_cases/names.intent", "Triage")
    assert local(element(root, "start")) == "userTask"
    assert local(element(root, "end")) == "endEvent"  # the step called end
    assert local(element(root, "Definitions")) == "sendTask"
    assert root.get("id") == "Definitions_2"
    [start] = root.findall("bpmn:process/bpmn:startEvent", NS)
    assert start.get("id") == "start_2"
    other = tree("tests/bpmn_cases/names.intent", "Triage_di")
    assert local(element(other, "Triage_di")) == "serviceTask"
    [process] = other.findall("bpmn:process", NS)
    assert process.get("id") == "Triage_di_2"
    for doc in (root, other):
        ids = [str(i) for i in doc.xpath("//@id")]
        assert len(ids) == len(set(ids))
        assert all(NCNAME.fullmatch(i) for i in ids)


def test_names_that_are_not_ncnames_get_a_prefix() -> None:
    assert ncname("greet", "Process") == "greet"
    assert ncname("9-lives.v2", "Process") == "Process_9-lives.v2"
    assert ncname("a b", "id") == "id_a_b"
    ids = BpmnIds(["start"])
    assert (ids.step("start"), ids.new("start"), ids.new("start")) == (
        "start",
        "start_2",
        "start_3",
    )


def shapes(root: etree._Element) -> dict[str, tuple[float, float, float, float]]:
    out = {}
    for shape in root.iterfind(".//bpmndi:BPMNShape", NS):
        bounds = shape.find("dc:Bounds", NS)
        assert bounds is not None
        out[str(shape.get("bpmnElement"))] = tuple(
            float(bounds.get(k, "nan")) for k in ("x", "y", "width", "height")
        )
    return out


def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


@pytest.mark.parametrize(("file", "name"), definitions())
def test_the_diagram_draws_every_element_laid_out_without_overlap(file: str, name: str) -> None:
    root = tree(file, name)
    drawn = shapes(root)
    nodes = root.xpath("//bpmn:*[@id and not(self::bpmn:process or self::bpmn:message)]"
                       "[ancestor::bpmn:process]", namespaces=NS)  # fmt: skip
    semantic = {str(n.get("id")) for n in nodes if local(n) in FLOW_NODES}
    assert set(drawn) == semantic
    flows = {str(f.get("id")) for f in root.iterfind(".//bpmn:sequenceFlow", NS)}
    edges = {str(e.get("bpmnElement")): e for e in root.iterfind(".//bpmndi:BPMNEdge", NS)}
    assert set(edges) == flows
    assert all(len(e.findall("di:waypoint", NS)) >= 2 for e in edges.values())
    for parent in root.iter(f"{{{NS['bpmn']}}}process", f"{{{NS['bpmn']}}}subProcess"):
        siblings = [str(c.get("id")) for c in parent if local(c) in FLOW_NODES]
        placed = [s for s in siblings if local(element(root, s)) != "boundaryEvent"]
        for i, a in enumerate(placed):
            for b in placed[i + 1 :]:
                assert not overlap(drawn[a], drawn[b]), f"{a} and {b} overlap"
            if parent.get("id") in drawn:  # inside its sub-process's box
                x, y, w, h = drawn[parent.get("id")]
                ax, ay, aw, ah = drawn[a]
                assert x <= ax and ax + aw <= x + w and y <= ay and ay + ah <= y + h


@pytest.mark.parametrize(("file", "name"), definitions())
def test_a_boundary_event_sits_on_its_host_s_border(file: str, name: str) -> None:
    root = tree(file, name)
    drawn = shapes(root)
    for event in root.iterfind(".//bpmn:boundaryEvent", NS):
        x, y, w, h = drawn[str(event.get("attachedToRef"))]
        ex, ey, ew, eh = drawn[str(event.get("id"))]
        cx, cy = ex + ew / 2, ey + eh / 2
        assert x - 0.1 <= cx <= x + w + 0.1 and y - 0.1 <= cy <= y + h + 0.1
        assert min(abs(cx - x), abs(cx - x - w), abs(cy - y), abs(cy - y - h)) < 0.2


def test_boundary_events_on_one_host_are_drawn_apart() -> None:
    """The review task's timer and expiry leave it at about the same point of its border: the
    second is moved along the border rather than drawn over the first."""
    root = tree("examples/orders/orders.intent")
    drawn = shapes(root)
    assert not overlap(drawn["review_timeout"], drawn["review_expire"])


def test_graph_format_bpmn_prints_the_document() -> None:
    done = CliRunner().invoke(
        cli, ["graph", str(ROOT / "examples/orders/orders.intent"), "--format", "bpmn"]
    )
    assert done.exit_code == 0, done.output
    assert done.output.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<bpmn:definitions')
    assert done.output == exported("examples/orders/orders.intent") + "\n"


def test_bpmn_without_graphviz_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _: None)
    definition = compile_file(str(ROOT / "examples/orders/orders.intent"))
    assert isinstance(definition, Application)
    with pytest.raises(UsageError, match=r"--format bpmn needs Graphviz's `dot` on PATH"):
        graph.draw(definition, None, "bpmn")


def test_an_unknown_format_names_bpmn_among_the_choices() -> None:
    definition = compile_file(str(ROOT / "examples/orders/orders.intent"))
    with pytest.raises(UsageError, match=r"unknown graph format \[bpm\].*bpmn"):
        graph.draw(definition, None, "bpm")


def test_a_fork_and_its_join_are_parallel_gateways() -> None:
    root = tree("tests/bpmn_cases/parallel.intent", "Review")
    gateways = {g.get("id") for g in root.xpath("//bpmn:parallelGateway", namespaces=NS)}
    assert gateways == {"reviews", "reviews_join", "commercial", "commercial_join"}
    flows = {
        (f.get("sourceRef"), f.get("targetRef"))
        for f in root.xpath("//bpmn:sequenceFlow", namespaces=NS)
    }
    assert {("reviews", "techReview"), ("reviews", "commercial")} <= flows
    assert {("commercial", "pricing"), ("commercial", "legal")} <= flows
    # a branch's last step and a decision's `join` go to the innermost fork's join, through an
    # exclusive gateway where the branch has more than one way in (pricing's: straight, or
    # after escalate); the nested join goes on to the enclosing one, which goes on to `next`
    assert {("techSignoff", "reviews_join"), ("legal", "commercial_join")} <= flows
    assert {("pricing", "pricing_merge"), ("escalate", "pricing_merge")} <= flows
    assert ("pricing_merge", "commercial_join") in flows
    assert {("commercial_join", "reviews_join"), ("reviews_join", "consolidate")} <= flows
    merges = {g.get("id") for g in root.xpath("//bpmn:exclusiveGateway", namespaces=NS)}
    assert merges == {"pricing", "pricing_merge"}


FORKED = [(f, n) for f, n in definitions() if "kind: parallel" in (ROOT / f).read_text()]


@pytest.mark.parametrize(("file", "name"), FORKED)
def test_a_parallel_join_has_one_flow_in_per_branch(file: str, name: str) -> None:
    """A BPMN parallel join waits for a token on each flow into it: one flow per branch, or
    an engine running the file would wait forever for the branch's arms not taken."""
    root = tree(file, name)
    flows = [
        (f.get("sourceRef"), f.get("targetRef")) for f in root.iterfind(".//bpmn:sequenceFlow", NS)
    ]
    gateways = {g.get("id") for g in root.iterfind(".//bpmn:parallelGateway", NS)}
    forks = [g for g in gateways if f"{g}_join" in gateways]
    assert forks
    for fork in forks:
        branches = sum(1 for src, _ in flows if src == fork)
        assert sum(1 for _, dst in flows if dst == f"{fork}_join") == branches, fork
