"""The ``call`` construct: a step that starts a run of another flow (docs/reference/calls.md).

:class:`CallConstructs` compiles one call step on its own; whether the called flow exists and
takes the inputs given is known only beside the other flows (the files validated or deployed
together, the flows already deployed): :func:`check_calls` checks that afterwards.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from procflow.errors import ExprSyntaxError
from procflow.expr import ANY, Shape, parse_template
from procflow.expr.hints import close_match
from procflow.model.flow.core import Body, StepCore, closed, context_of
from procflow.model.ir import CallInput, CallStep, Flow, FlowStep, InputDecl
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YScalar, kind_name
from procflow.model.source import Diagnostic, Pos, did_you_mean, listing, suggest
from procflow.model.values import literal_mismatch

__all__ = ["CallConstructs", "Signatures", "call_steps", "check_calls"]

FLOW_NAME_HINT = "a flow's name, e.g. `call: provision-tenant`"

Signatures = Mapping[str, Mapping[str, InputDecl] | None]
"""The flows a call may name, each with its declared inputs (None: not known, as of a file with
errors, so only the name is checked)."""


class CallConstructs(StepCore):
    def c_call(self, b: Body) -> tuple[FlowStep | None, Shape]:
        node = b.body.entries["call"].value
        detach = bool(self.r.boolean(b.body.get("detach"), b.ctx, "detach"))
        mods = self.modifiers(b)
        shape: Shape = (
            closed({"run_id": ANY}, b.optional)
            if detach
            else closed({"run_id": ANY, "status": ANY, "output": ANY}, b.optional)
        )
        if detach:
            for key in ("retry", "timeout"):
                if key in b.body.entries:
                    self.r.error(
                        b.body.entries[key].key_pos,
                        b.ctx,
                        f"[{key}] does not apply to a detached call: it goes on as soon as the "
                        "child has started",
                    )
        name = None
        if isinstance(node, YScalar) and isinstance(node.value, str) and node.value:
            if "{{" in node.value:
                self.r.error(
                    node.pos, b.ctx, f"call must name a flow, not an expression ({FLOW_NAME_HINT})"
                )
            else:
                name = node.value
        else:
            self.r.error(node.pos, b.ctx, f"call must be {FLOW_NAME_HINT}, got {kind_name(node)}")
        inputs = self.call_inputs(b)
        if name is None or inputs is None:
            return None, shape
        values, written = inputs
        return CallStep(b.id, name, values, b.pos, node.pos, written, detach, mods), shape

    def call_inputs(self, b: Body) -> tuple[dict[str, Any], dict[str, CallInput]] | None:
        node = b.body.get("inputs")
        if node is None or (isinstance(node, YScalar) and node.value is None):
            return {}, {}
        args = self.r.map(node, b.ctx, "inputs")
        if args is None:
            return None
        values: dict[str, Any] = {}
        written: dict[str, CallInput] = {}
        ok = True
        for name, entry in args.entries.items():
            tree, compiled = self.x.value(entry.value, b.scope, b.ctx, f"inputs.{name}")
            ok = ok and compiled
            values[name] = tree
            plain = Reader.plain(entry.value)
            checkable = not (isinstance(entry.value, YScalar) and _is_single(entry.value.value))
            written[name] = CallInput(entry.key_pos, entry.value.pos, plain, checkable)
        return (values, written) if ok else None


def _is_single(value: Any) -> bool:
    if not isinstance(value, str) or "{{" not in value:
        return False
    try:
        return parse_template(value).kind == "single"
    except ExprSyntaxError:
        return True  # reported where the value is parsed


def call_steps(steps: tuple[FlowStep, ...]) -> Iterator[CallStep]:
    """Every call step of ``steps``, nested ones and recover steps included."""
    for step in steps:
        if isinstance(step, CallStep):
            yield step
        inner = getattr(step, "steps", None)
        if inner:
            yield from call_steps(inner)
        recover = step.mods.recover
        if recover:
            yield from call_steps(recover)


def check_calls(flow: Flow, known: Signatures, intents: Collection[str] = ()) -> list[Diagnostic]:
    """The problems of ``flow``'s call steps against the flows ``known``: an unknown flow (with
    the nearest name), one of the intent processes ``intents`` (call starts flows only), an
    unknown input, a missing required input, a literal of the wrong type."""
    out: list[Diagnostic] = []
    steps = call_steps(flow.steps + (flow.recover or ()))
    for step in steps:
        where = context_of(step.id)
        if step.flow in intents:
            message = f"call: [{step.flow}] is an intent process; call starts flows only"
            out.append(_error(step.flow_pos, where, message))
            continue
        if step.flow not in known:
            message = f"call: no flow [{step.flow}] is deployed or validated with this file"
            out.append(_error(step.flow_pos, where, message + suggest(step.flow, known)))
            continue
        inputs = known[step.flow]
        if inputs is not None:
            out.extend(_check_inputs(step, inputs, where))
    return out


def _check_inputs(step: CallStep, inputs: Mapping[str, InputDecl], where: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    typos: set[str] = set()
    for name, given in step.written.items():
        decl = inputs.get(name)
        if decl is None:
            near = close_match(name, inputs)
            if near is not None:
                typos.add(near.name)
            takes = f" (its inputs: {listing(inputs)})" if inputs else " (it takes no inputs)"
            message = f"flow [{step.flow}] has no input [{name}]{did_you_mean(near)}{takes}"
            out.append(_error(given.key_pos, where, message))
            continue
        if given.checkable:
            problem = literal_mismatch(given.literal, decl.type)
            if problem:
                message = f"input [{name}] of flow [{step.flow}] {problem}"
                out.append(_error(given.value_pos, where, message))
    for name, decl in inputs.items():
        missing = name not in step.written and name not in typos
        if decl.required and not decl.has_default and missing:
            message = f"call of flow [{step.flow}] is missing required input [{name}]"
            out.append(_error(step.flow_pos, where, message))
    return out


def _error(pos: Pos, where: str, message: str) -> Diagnostic:
    return Diagnostic("error", f"{where}: {message}", pos)
