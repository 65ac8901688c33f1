"""Flow steps: the action, for_each, group, set and fail constructs; the full compiler.

Private to :mod:`procflow.model.flow.compiler`. :class:`StepCompiler` is the step compiler the flow
compiler uses: the core (``flow_core``) plus the seed's constructs (``flow_waits``), ``call``
(``calls``) and these.
"""

from __future__ import annotations

from typing import Any

from procflow.errors import ExprSyntaxError
from procflow.expr import ANY, ObjectShape, Shape, parse_template
from procflow.expr.hints import close_match
from procflow.model.flow.calls import CallConstructs
from procflow.model.flow.core import Body, closed, iterations
from procflow.model.flow.exprs import shape_of_type
from procflow.model.flow.ids import RESERVED
from procflow.model.flow.waits import SeedConstructs
from procflow.model.ir import (
    ActionSpec,
    ActionStep,
    FailStep,
    FlowStep,
    ForEachStep,
    GroupStep,
    Schema,
    SetStep,
)
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YEntry, YMap, YScalar, kind_name
from procflow.model.source import did_you_mean, listing, suggest
from procflow.model.values import literal_mismatch


class StepCompiler(CallConstructs, SeedConstructs):
    """Compiles step lists; ``used`` collects the manifests of the connectors called."""

    def c_action(self, b: Body) -> tuple[FlowStep | None, Shape]:
        entry = b.body.entries[b.key]
        spec = self.action_spec(entry, b.ctx)
        args = self.args(entry, spec, b)
        mods = self.modifiers(b)
        shape = (
            closed(_schema_shapes(spec.result), b.optional)
            if spec and spec.result is not None
            else ANY
        )
        if spec is None or args is None:
            return None, shape
        connector, action = b.key.split(".", 1)
        return ActionStep(b.id, connector, action, args, b.pos, mods), shape

    def action_spec(self, entry: YEntry, ctx: str) -> ActionSpec | None:
        connector, action = entry.key.split(".", 1)
        manifest = self.connector(connector, entry.key_pos, ctx)
        if manifest is None:
            return None
        spec = manifest.actions.get(action)
        if spec is None:
            hint = (
                f"; [{action}] is an event, wait for it with `wait_for: {entry.key}`"
                if action in manifest.events
                else suggest(action, manifest.actions)
            )
            self.r.error(
                entry.key_pos, ctx, f"connector [{connector}] has no action [{action}]{hint}"
            )
        return spec

    def args(self, entry: YEntry, spec: ActionSpec | None, b: Body) -> dict[str, Any] | None:
        node = entry.value
        if isinstance(node, YScalar) and node.value is None:
            node = YMap(node.pos)
        args = self.r.map(node, b.ctx, f"the args of {b.key}")
        if args is None:
            return None
        if spec is not None:
            self.check_args(args, spec.args, entry, b.ctx)
        out: dict[str, Any] = {}
        ok = True
        for name, arg in args.entries.items():
            tree, compiled = self.x.value(arg.value, b.scope, b.ctx, f"{b.key}.{name}")
            ok = ok and compiled
            out[name] = tree
        return out if ok else None

    def check_args(self, args: YMap, schema: Schema, entry: YEntry, context: str) -> None:
        typos: set[str] = set()  # required args already named by a did-you-mean
        for name, arg in args.entries.items():
            field = schema.get(name)
            if field is None:
                near = close_match(name, schema)
                if near is not None:
                    typos.add(near.name)
                self.r.error(
                    arg.key_pos,
                    context,
                    f"{entry.key} has no arg [{name}]{did_you_mean(near)}"
                    + (f" (args: {listing(schema)})" if schema else " (it takes no args)"),
                )
                continue
            value = arg.value
            # a single {{ }} renders to any type: only the runtime can check it
            if isinstance(value, YScalar) and _is_single(value.value):
                continue
            problem = literal_mismatch(Reader.plain(value), field.type)
            if problem:
                self.r.error(value.pos, context, f"{entry.key} arg [{name}] {problem}")
        pos = args.pos if args.entries else entry.key_pos
        for name, field in schema.items():
            if field.required and name not in args.entries and name not in typos:
                self.r.error(pos, context, f"{entry.key} is missing required arg [{name}]")

    def c_for_each(self, b: Body) -> tuple[FlowStep | None, Shape]:
        items_node = b.body.entries["for_each"].value
        items = None
        if isinstance(items_node, YScalar) and isinstance(items_node.value, str):
            items = self.x.single(items_node, b.scope, b.ctx, "for_each", "the list to iterate")
        else:
            self.r.error(
                items_node.pos,
                b.ctx,
                "for_each must be exactly one {{ expression }} giving a list, e.g. "
                f'"{{{{ [1, 2] }}}}", got {kind_name(items_node)}',
            )
        loop = self.loop_name(b)
        steps, bound, base = self.inner(b, {loop: ANY}, loop)
        shape = iterations(bound, b.optional)
        mods = self.modifiers(b, self.recover(b, base, bound))
        if items is None or not steps:
            return None, shape
        return ForEachStep(b.id, items, steps, b.pos, loop, mods), shape

    def loop_name(self, b: Body) -> str:
        node = b.body.get("as")
        name = self.r.ident(node, b.ctx, "as") if node is not None else "item"
        if name is None:
            return "item"
        if node is None:  # the default name collides like a written one; say how to rename
            node = YScalar(b.body.entries["for_each"].key_pos, "item")
        problem = None
        if name in RESERVED:
            problem = f"[{name}] is a reserved name ({', '.join(RESERVED)})"
        elif name in self.inputs:
            problem = f"the loop name [{name}] is also an input"
        elif name in self.ids:
            problem = f"the loop name [{name}] is also a step id"
        elif name in b.scope.loops:
            problem = f"the loop name [{name}] is already the name of an enclosing loop"
        if problem and "as" not in b.body.entries:
            problem += " (for_each's default loop name); name this loop with `as:`"
        if problem:
            self.r.error(node.pos, b.ctx, f"{problem}; step ids, inputs and loop names must differ")
        return name

    def c_group(self, b: Body) -> tuple[FlowStep | None, Shape]:
        steps, bound, base = self.inner(b)
        mods = self.modifiers(b, self.recover(b, base, bound))
        shape = ObjectShape(bound, open=True)
        return (GroupStep(b.id, steps, b.pos, mods) if steps else None), shape

    def c_set(self, b: Body) -> tuple[FlowStep | None, Shape]:
        mods = self.modifiers(b)
        node = self.r.map(b.body.get("set"), b.ctx, "set")
        if node is None:
            return None, ANY
        values = {}
        ok = True
        for key, entry in node.entries.items():
            if self.r.ident(YScalar(entry.key_pos, key), b.ctx, "a set name") is None:
                ok = False
                continue
            tree, compiled = self.x.value(entry.value, b.scope, b.ctx, f"set.{key}")
            ok = ok and compiled
            values[key] = tree
        shape = closed(dict.fromkeys(node.entries, ANY), b.optional)
        return (SetStep(b.id, values, b.pos, mods) if ok else None), shape

    def c_fail(self, b: Body) -> tuple[FlowStep | None, Shape]:
        mods = self.modifiers(b)
        message = self.x.template(b.body.get("fail"), b.scope, b.ctx, "fail")
        # fail binds nothing; it is only ever read when skipped (null) or optional ({ error })
        shape = closed({}, True)
        return (FailStep(b.id, message, b.pos, mods) if message else None), shape


def _is_single(value: Any) -> bool:
    if not isinstance(value, str) or "{{" not in value:
        return False
    try:
        return parse_template(value).kind == "single"
    except ExprSyntaxError:
        return True  # reported where the value is parsed; not a literal to type-check


def _schema_shapes(schema: Schema | None) -> dict[str, Shape]:
    return {name: shape_of_type(f.type) for name, f in (schema or {}).items()}
