"""The flow constructs that suspend a run: ``wait``, ``wait_for`` and ``repeat``.

Private to :mod:`procflow.model.flow.compiler` (the rules: docs/reference/flow.md, "wait",
"wait_for", "repeat").
"""

from __future__ import annotations

from collections.abc import Callable

from procflow.expr import ANY, Shape, Template
from procflow.expr.values import years_problem
from procflow.model.flow.core import REPEAT_KEYS, WAIT_KEYS, Body, StepCore, closed, iterations
from procflow.model.flow.exprs import Scope
from procflow.model.ir import EventSpec, FlowStep, RepeatStep, SchemaField, WaitForStep, WaitStep
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, kind_name
from procflow.model.source import listing, suggest
from procflow.model.values import is_instant, literal_mismatch


class SeedConstructs(StepCore):
    def c_wait(self, b: Body) -> tuple[FlowStep | None, Shape]:
        shape = closed({"until": ANY}, b.optional)
        mods = self.modifiers(b)
        node = self.r.map(b.body.get("wait"), b.ctx, "wait")
        if node is None:
            return None, shape
        self.r.keys(node, WAIT_KEYS, f"{b.ctx} wait")
        for_node, until_node = node.get("for"), node.get("until")
        if for_node is not None and until_node is not None:
            self.r.error(
                node.entries["until"].key_pos,
                b.ctx,
                "wait has both [for] and [until]; give exactly one",
            )
            self.wait_value(for_node, b, "wait.for", self._check_for)  # each is checked still
            self.wait_value(until_node, b, "wait.until", self._check_until)
            return None, shape
        if for_node is None and until_node is None:
            self.r.error(
                node.pos,
                b.ctx,
                "wait needs exactly one of [for] (a duration) or [until] (a timestamp)",
            )
            return None, shape
        if for_node is not None:
            for_ = self.wait_value(for_node, b, "wait.for", self._check_for)
            return (WaitStep(b.id, b.pos, for_=for_, mods=mods) if for_ else None), shape
        assert until_node is not None
        until = self.wait_value(until_node, b, "wait.until", self._check_until)
        return (WaitStep(b.id, b.pos, until=until, mods=mods) if until else None), shape

    def wait_value(
        self, node: YNode, b: Body, what: str, literal: Callable[[YScalar, str], bool]
    ) -> Template | None:
        if isinstance(node, YScalar) and isinstance(node.value, str) and "{{" not in node.value:
            if not literal(node, b.ctx):
                return None
        elif not (isinstance(node, YScalar) and isinstance(node.value, str)):
            hint = "a duration such as 2d or P2D" if what == "wait.for" else "an ISO-8601 timestamp"
            self.r.error(node.pos, b.ctx, f"{what} must be {hint}, got {kind_name(node)}")
            return None
        return self.x.template(node, b.scope, b.ctx, what)

    def _check_for(self, node: YScalar, context: str) -> bool:
        return self.duration(node, context, "wait.for") is not None

    def _check_until(self, node: YScalar, context: str) -> bool:
        if is_instant(str(node.value)):
            return True
        beyond = years_problem(str(node.value))
        self.r.error(
            node.pos,
            context,
            f"wait.until: {beyond}"
            if beyond
            else f"wait.until [{node.value}] is not an ISO-8601 timestamp with an offset "
            "(2027-01-10T09:00:00Z) or a date (2027-01-10)",
        )
        return False

    def c_wait_for(self, b: Body) -> tuple[FlowStep | None, Shape]:
        shape = closed({"status": ANY, "event": ANY}, b.optional)
        mods = self.modifiers(b)
        event_node = b.body.entries["wait_for"]
        event = self.event(event_node.value, b.ctx)
        match = self.match(b, event)
        timeout_node = self.r.require(b.body, "timeout", b.ctx, "how long to wait, e.g. 24h")
        timeout = self.duration(timeout_node, b.ctx, "timeout")
        lookback = self.duration(b.body.get("lookback"), b.ctx, "lookback")
        if event is None or match is None or timeout is None:
            return None, shape
        text = self.r.string(event_node.value, b.ctx, "wait_for")
        assert text is not None
        return WaitForStep(b.id, text, match, timeout, b.pos, lookback, mods), shape

    def event(self, node: YNode, context: str) -> EventSpec | None:
        """``<connector>.<event>`` resolved against the manifests (also used by trigger)."""
        text = self.r.string(node, context, "the event")
        if text is None:
            return None
        connector, dot, name = text.partition(".")
        if not dot:
            self.r.error(node.pos, context, f"[{text}] is not <connector>.<event>")
            return None
        manifest = self.connector(connector, node.pos, context)
        if manifest is None:
            return None
        spec = manifest.events.get(name)
        if spec is None:
            hint = (
                f"; [{name}] is an action, call it as a step `{text}: {{ ... }}`"
                if name in manifest.actions
                else suggest(name, manifest.events)
            )
            self.r.error(node.pos, context, f"connector [{connector}] has no event [{name}]{hint}")
        return spec

    def match(self, b: Body, event: EventSpec | None) -> dict[str, Template] | None:
        node = b.body.get("match")
        keys = event.correlate_on if event else ()
        name = b.body.entries["wait_for"].value
        event_text = str(name.value) if isinstance(name, YScalar) else "the event"
        if node is None:
            if keys:
                self.r.error(
                    b.body.pos,
                    b.ctx,
                    f"missing required key [match]: {event_text} correlates on "
                    + ", ".join(f"[{k}]" for k in keys),
                )
                return None
            return {}
        match = self.r.map(node, b.ctx, "match")
        if match is None:
            return None
        ok = self.match_keys(match, keys, event_text, b.ctx) if event else True
        out: dict[str, Template] = {}
        for key, entry in match.entries.items():
            template = self.match_value(entry.value, b, f"match.{key}")
            field = event.payload.get(key) if event else None
            if template is not None and not _is_templated(entry.value):
                ok = self.match_literal(entry.value, field, f"match.{key}", b.ctx) and ok
            if template is None:
                ok = False
            else:
                out[key] = template
        return out if ok else None

    def match_literal(
        self, node: YNode, field: SchemaField | None, what: str, context: str
    ) -> bool:
        """A literal match value of the wrong type would silently never match."""
        if field is None:
            return True
        problem = literal_mismatch(Reader.plain(node), field.type)
        if problem:
            self.r.error(node.pos, context, f"{what} {problem} (the payload field's type)")
        return problem is None

    def match_keys(self, match: YMap, keys: tuple[str, ...], event: str, context: str) -> bool:
        ok = True
        for key in keys:
            if key not in match.entries:
                self.r.error(
                    match.pos,
                    context,
                    f"match is missing [{key}], a correlate_on key of {event}",
                )
                ok = False
        correlated = set(keys)
        declared = listing([f"[{k}]" for k in keys]) or "nothing"
        for key, entry in match.entries.items():
            if key not in correlated:
                self.r.error(
                    entry.key_pos,
                    context,
                    f"match key [{key}] is not a correlate_on key of {event}"
                    f"{suggest(key, keys)} (it correlates on {declared})",
                )
                ok = False
        return ok

    def match_value(self, node: YNode, b: Body, what: str) -> Template | None:
        if isinstance(node, YScalar) and isinstance(node.value, bool | int | float):
            # a literal number or boolean correlates by JSON equality like any value
            literal = (
                "true" if node.value is True else "false" if node.value is False else node.value
            )
            return self.x.parse(YScalar(node.pos, f"{{{{ {literal} }}}}"), None, b.ctx, what)
        if isinstance(node, YScalar) and node.value is None:
            self.r.error(node.pos, b.ctx, f"{what} is null; a correlation value is never null")
            return None
        return self.x.template(node, b.scope, b.ctx, what)

    def c_repeat(self, b: Body) -> tuple[FlowStep | None, Shape]:
        node = self.r.map(b.body.get("repeat"), b.ctx, "repeat")
        steps, bound, base = self.inner(b)
        shape = iterations(bound, b.optional)
        recover = self.recover(b, base, bound)
        mods = self.modifiers(b, recover)
        if node is None:
            return None, shape
        self.r.keys(node, REPEAT_KEYS, f"{b.ctx} repeat")
        every = self.duration(
            self.r.require(node, "every", b.ctx + " repeat", "a duration"), b.ctx, "repeat.every"
        )
        count = self.repeat_max(node, b.ctx)
        until_scope = Scope({**base.visible, **bound}, base.later, base.hidden, base.loops)
        until_node = self.r.require(node, "until", b.ctx + " repeat", "a condition")
        until = self.x.condition(until_node, until_scope, b.ctx, "repeat.until", allow_bool=False)
        if every is None or count is None or until is None:
            return None, shape
        return RepeatStep(b.id, every, count, until, steps, b.pos, mods), shape

    def repeat_max(self, node: YMap, context: str) -> int | None:
        max_node = self.r.require(node, "max", context + " repeat", "a positive integer bound")
        if max_node is None:
            return None
        value = max_node.value if isinstance(max_node, YScalar) else None
        if not isinstance(value, int) or isinstance(value, bool):
            self.r.error(
                max_node.pos,
                context,
                f"repeat.max must be a positive integer, got {kind_name(max_node)}",
            )
            return None
        if value < 1:
            self.r.error(
                max_node.pos,
                context,
                f"repeat.max must be a positive integer, got {value}; max bounds the polling "
                "loop, there is no unbounded form",
            )
            return None
        return value


def _is_templated(node: YNode) -> bool:
    return isinstance(node, YScalar) and isinstance(node.value, str) and "{{" in node.value
