"""The flow dialect (``*.flow.yaml``) compiler: YAML node tree → :class:`procflow.model.ir.Flow`.

Every rule of docs/reference/flow.md is checked here (steps and expressions in the private
``flow_steps`` / ``flow_exprs`` / ``flow_ids`` modules), and every problem is reported at once
with its position. The IR is returned only for a file without errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

from procflow.expr import ANY, Shape, ValueTree
from procflow.model.connectors.registry import ConnectorRegistry
from procflow.model.flow import control
from procflow.model.flow.exprs import (
    ERROR_SHAPE,
    RUN_SHAPE,
    Exprs,
    Scope,
    input_shape,
)
from procflow.model.flow.ids import RESERVED, collect_ids
from procflow.model.flow.schedules import SCHEDULE_KEYS, ScheduleCompiler, check_inputs
from procflow.model.flow.steps import StepCompiler
from procflow.model.intent.values import a_type
from procflow.model.ir import Flow, FlowStep, FlowTrigger, InputDecl, InputType
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, YSeq, kind_name
from procflow.model.schedule import Schedule
from procflow.model.source import Diagnostics, suggest
from procflow.model.values import literal_mismatch

TOP_KEYS = (
    "flow", "description", "version", "trigger", "inputs", "concurrency", "steps", "recover",
    "output",
)  # fmt: skip
INPUT_KEYS = ("type", "required", "default", "description")
INPUT_TYPES = ("string", "integer", "number", "boolean", "object", "array", "timestamp")
TRIGGER_KEYS = ("event", "as", "when")
# a schedule's keys written straight into an event trigger: say where they belong
SCHEDULE_HINTS = {
    k: f"[{k}] belongs to a schedule: trigger: {{ schedule: {{ {k}: ... }} }}"
    for k in SCHEDULE_KEYS
    if k != "name"
}
FLOW_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
TOP = "flow"


def compile_flow(
    root: YNode, file: str, project_dir: str, diags: Diagnostics, registry: ConnectorRegistry
) -> Flow | None:
    """Compile one flow file as far as it goes: every problem goes to ``diags``, and a file with
    errors still gives its flow without the steps that had them (the calls of files validated
    together are checked on it); ``None`` when not even its name and a step compiled. Only a
    flow without errors may be deployed or run: the caller decides by ``diags``."""
    reader = Reader(diags)
    top = reader.map(root, TOP, "a flow file")
    if top is None:
        return None
    compiler = _FlowCompiler(reader, registry, file, project_dir)
    flow = compiler.flow(top)
    # manifest problems are reported in the manifests' own files, for the connectors used
    for name in sorted(compiler.looked_up):
        diags.extend(registry.diagnostics_for(name))
    return flow


class _FlowCompiler:
    def __init__(
        self, reader: Reader, registry: ConnectorRegistry, file: str, project_dir: str
    ) -> None:
        self.r = reader
        self.registry = registry
        self.file = file
        self.project_dir = project_dir
        self.x = Exprs(reader)
        self.looked_up: set[str] = set()
        # inputs whose declaration is wrong: still names, so reading one is no second error
        self.broken_inputs: set[str] = set()

    def flow(self, top: YMap) -> Flow | None:
        self.r.keys(top, TOP_KEYS, TOP)
        name = self.name(top)
        description = self.r.string(top.get("description"), TOP, "description")
        version = self.version(top.get("version"))
        inputs = self.inputs(top.get("inputs"))
        ids = collect_ids(top, self.r)
        steps_c = StepCompiler(self.r, self.x, self.registry, ids, inputs)
        self.looked_up = steps_c.looked_up
        trigger, schedules = self.triggers(top.get("trigger"), name, inputs, steps_c)
        visible = self.input_shapes(inputs)
        limit = None
        if "concurrency" in top.entries:
            ids_ = {i: "" for i in ids}
            limit = control.concurrency(self.r, self.x, top.get("concurrency"), visible, ids_)
        base = Scope({**visible, "run": RUN_SHAPE}, hidden=steps_c.hidden)
        steps_node = self.r.require(top, "steps", TOP, "the steps the flow runs")
        steps, bound = steps_c.steps(steps_node, base, TOP, "steps")
        recover = self.recover(top.get("recover"), base, bound, steps_c)
        control.check_shared(self.r, steps + (recover or ()))
        output = self.output(top.get("output"), base, bound)
        if name is None or not steps:
            return None
        return Flow(
            name=name,
            steps=steps,
            file=self.file,
            project_dir=self.project_dir,
            pos=top.pos,
            description=description,
            version=version,
            trigger=trigger,
            inputs=inputs,
            recover=recover,
            output=output,
            connectors=dict(sorted(steps_c.used.items())),
            schedules=schedules,
            concurrency=limit,
        )

    # --- header ----------------------------------------------------------------------------

    def name(self, top: YMap) -> str | None:
        node = self.r.require(top, "flow", TOP, "the flow's name")
        name = self.r.string(node, TOP, "flow")
        if name is not None and node is not None and not FLOW_NAME.match(name):
            self.r.error(
                node.pos,
                TOP,
                f"the flow name [{name}] may hold letters, digits, '_', '-' and '.' only",
            )
            return None
        return name

    def version(self, node: YNode | None) -> str | None:
        value = self.r.scalar(node, TOP, "version")
        if isinstance(value, bool) or value is None:
            if value is not None and node is not None:
                self.r.error(node.pos, TOP, "version must be a label such as 1.2 or 2024-06")
            return None
        return str(value)

    # --- inputs ----------------------------------------------------------------------------

    def inputs(self, node: YNode | None) -> dict[str, InputDecl]:
        section = self.r.map(node, TOP, "inputs")
        if section is None:
            return {}
        out = {}
        for name, entry in section.entries.items():
            ctx = f"input [{name}]"
            if self.r.ident(YScalar(entry.key_pos, name), ctx, "an input name") is None:
                continue
            if name in RESERVED:
                self.r.error(
                    entry.key_pos,
                    ctx,
                    f"[{name}] is a reserved name ({', '.join(RESERVED)}); choose another name",
                )
            decl = self.input(name, entry.value, ctx)
            if decl is not None:
                out[name] = decl
            else:
                self.broken_inputs.add(name)
        return out

    def input_shapes(self, inputs: Mapping[str, InputDecl]) -> dict[str, Shape]:
        shapes = {n: input_shape(d.type) for n, d in inputs.items()}
        return {**dict.fromkeys(self.broken_inputs, ANY), **shapes}

    def input(self, name: str, node: YNode, ctx: str) -> InputDecl | None:
        body = self.r.map(node, ctx, "an input declaration")
        if body is None:
            return None
        self.r.keys(body, INPUT_KEYS, ctx)
        type_node = self.r.require(body, "type", ctx, " | ".join(INPUT_TYPES))
        type_ = self.r.string(type_node, ctx, "type")
        if type_ is not None and type_node is not None and type_ not in INPUT_TYPES:
            self.r.error(
                type_node.pos,
                ctx,
                f"unknown type [{type_}]{suggest(type_, INPUT_TYPES)} "
                f"(one of {', '.join(INPUT_TYPES)})",
            )
            type_ = None  # the rest of the declaration is checked still
        required = bool(self.r.boolean(body.get("required"), ctx, "required"))
        default_node = body.get("default")
        default = self.default(default_node, type_, required, ctx)
        if type_ is None:
            return None
        return InputDecl(
            name=name,
            type=cast(InputType, type_),
            pos=body.pos,
            required=required,
            default=default,
            has_default=default_node is not None,
            description=self.r.string(body.get("description"), ctx, "description"),
        )

    def default(self, node: YNode | None, type_: str | None, required: bool, ctx: str) -> Any:
        """The default's value; its type is judged only when ``type_`` is known."""
        if node is None:
            return None
        value = Reader.plain(node)
        if required:
            self.r.error(
                node.pos,
                ctx,
                "a required input never uses its default; drop [required] or [default]",
            )
        problem = literal_mismatch(value, type_) if type_ else None
        if problem:
            self.r.error(node.pos, ctx, f"default {problem}")
        elif isinstance(value, str) and "{{" in value:
            self.r.error(node.pos, ctx, "default is a literal value; {{ }} is not evaluated here")
        return value

    # --- trigger ---------------------------------------------------------------------------

    def triggers(
        self,
        node: YNode | None,
        flow_name: str | None,
        inputs: Mapping[str, InputDecl],
        steps: StepCompiler,
    ) -> tuple[FlowTrigger | None, tuple[Schedule, ...]]:
        """``trigger``: one event trigger or schedule, or a list of at most one event trigger
        and any number of named schedules."""
        if node is None:
            return None, ()
        lone = not isinstance(node, YSeq)
        items = [node] if lone else self.r.seq(node, "trigger", "trigger")
        if not items:
            self.r.error(node.pos, "trigger", "the list is empty; give a trigger or drop [trigger]")
        compiler = ScheduleCompiler(self.r, steps, flow_name)
        schedule_items = [i for i in items if isinstance(i, YMap) and "schedule" in i.entries]
        event: FlowTrigger | None = None
        first_event: YMap | None = None
        schedules: list[Schedule] = []
        for item in items:
            body = self.trigger_body(item, lone)
            if body is None:
                continue
            if "schedule" in body.entries:
                schedule = self.schedule(body, lone, compiler)
                schedules += [schedule] if schedule else []
            elif first_event is None:
                first_event = body
                event = self.trigger(body, inputs, steps, scheduled=bool(schedule_items))
            else:
                self.r.error(
                    body.pos,
                    "trigger",
                    "a flow has at most one event trigger; the first is at line "
                    f"{first_event.pos.line}",
                )
        if schedule_items:
            named = schedules[0].name if schedules else self.written_name(schedule_items[0])
            check_inputs(self.r, inputs, named or flow_name)
        return event, tuple(schedules)

    def trigger_body(self, item: YNode, lone: bool) -> YMap | None:
        if isinstance(item, YMap):
            return item
        what = "a mapping (an event trigger or a schedule) or a list of them"
        self.r.error(
            item.pos,
            "trigger",
            f"{'trigger' if lone else 'each trigger'} must be "
            f"{what if lone else 'a mapping'}, got {kind_name(item)}",
        )
        return None

    def schedule(self, body: YMap, lone: bool, compiler: ScheduleCompiler) -> Schedule | None:
        for key, entry in body.entries.items():
            if key == "schedule":
                continue
            if key in TRIGGER_KEYS and lone:
                why = "an event trigger and a schedule together are a list: trigger: [ { event: "
                why += "..., as: ... }, { schedule: { name: ..., ... } } ]"
            elif key in SCHEDULE_KEYS:
                why = f"[{key}] belongs inside [schedule]"
            else:
                why = f"unknown key [{key}] beside [schedule]; a schedule is `schedule: {{...}}`"
            self.r.error(entry.key_pos, "trigger", why)
        node = body.entries["schedule"].value
        return compiler.lone(node) if lone else compiler.named(node)

    @staticmethod
    def written_name(item: YMap) -> str | None:
        inner = item.entries["schedule"].value
        name = inner.get("name") if isinstance(inner, YMap) else None
        return str(name.value) if isinstance(name, YScalar) else None

    def trigger(
        self, body: YMap, inputs: Mapping[str, InputDecl], steps: StepCompiler, scheduled: bool
    ) -> FlowTrigger | None:
        ctx = "trigger"
        self.r.keys(body, (*TRIGGER_KEYS, "schedule"), ctx, hint=SCHEDULE_HINTS)
        event_node = self.r.require(body, "event", ctx, "<connector>.<event>")
        event = steps.event(event_node, ctx) if event_node is not None else None
        as_ = self.trigger_as(body, inputs, ctx, scheduled)
        # the guard sees the inputs (the payload under its `as` name); no run exists yet
        scope = Scope(self.input_shapes(inputs), hidden=steps.hidden)
        when = self.x.condition(body.get("when"), scope, ctx, "when", allow_bool=False)
        if event is None or as_ is None or event_node is None:
            return None
        if "when" in body.entries and when is None:
            return None
        assert isinstance(event_node, YScalar)
        return FlowTrigger(str(event_node.value), as_, body.pos, when)

    def trigger_as(
        self, body: YMap, inputs: Mapping[str, InputDecl], ctx: str, scheduled: bool
    ) -> str | None:
        node = self.r.require(body, "as", ctx, "the object input that receives the payload")
        name = self.r.ident(node, ctx, "as")
        if name is None or node is None:
            return None
        decl = inputs.get(name)
        if decl is None:
            self.r.error(
                node.pos, ctx, f"as [{name}] is not a declared input{suggest(name, inputs)}"
            )
            return None
        if decl.type != "object":
            self.r.error(
                node.pos,
                ctx,
                f"as [{name}] must name an object input, but it is {a_type(decl.type)}",
            )
        for other in () if scheduled else inputs.values():  # a schedule's rule covers them all
            if other.name != name and not other.has_default:
                self.r.error(
                    other.pos,
                    f"input [{other.name}]",
                    f"needs a default: a run started by the trigger only supplies [{name}]",
                )
        return name

    # --- recover, output -------------------------------------------------------------------

    def recover(
        self, node: YNode | None, base: Scope, bound: Mapping[str, Shape], steps: StepCompiler
    ) -> tuple[FlowStep, ...] | None:
        if node is None:
            return None
        scope = Scope({**base.visible, **bound, "error": ERROR_SHAPE}, {}, base.hidden)
        out, _ = steps.steps(node, scope, TOP, "recover")
        return out

    def output(
        self, node: YNode | None, base: Scope, bound: Mapping[str, Shape]
    ) -> ValueTree | None:
        if node is None:
            return None
        scope = Scope({**base.visible, **bound}, {}, base.hidden)
        tree, _ = self.x.value(node, scope, TOP, "output")  # a failure is reported
        return tree
