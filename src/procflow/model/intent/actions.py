"""Step actions: ``setField``, ``setRelationField``, ``notify`` and ``delegate``."""

from __future__ import annotations

import re
from typing import Any

from procflow.expr import Placeholders, parse_placeholders
from procflow.model.intent.delegate import split_ref
from procflow.model.intent.expr import Record, at, no_trigger, path_problem, placeholders
from procflow.model.intent.graph import StepNode
from procflow.model.intent.proc import Proc, key_pos
from procflow.model.intent.values import TEXT_TYPES, a_type, value_problem
from procflow.model.ir import Delegate, Field, Notify, Recipient, SetField, SetRelationField
from procflow.model.reading.reader import IDENT
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, kind_name
from procflow.model.source import suggest

ERROR_TOKEN = "{error}"
_BRACES = re.compile(r"\{[^{}]*\}")


def set_field(args: YMap, proc: Proc, step: StepNode) -> SetField | None:
    reader, context = proc.reader, step.context
    name = reader.string(args.get("setField"), context, "setField")
    value_node = reader.require(args, "value", context, "the value setField writes")
    proc.writes(key_pos(args, "setField"), context, "setField")
    entity = proc.needs_record(key_pos(args, "setField"), context, "setField")
    field = entity.field(name) if entity is not None and name is not None else None
    if entity is not None and name is not None and field is None:
        hint = (
            "; it is a relation — use setRelationField"
            if entity.relation(name) is not None
            else suggest(name, (f.name for f in entity.fields))
        )
        reader.error(
            args.entries["setField"].value.pos,
            context,
            f"setField [{name}] is not a field of [{entity.name}]{hint}",
        )
    if value_node is None:
        return None
    value, is_error, ok = _value(value_node, proc, step)
    # A value with its own problem is not checked further: its type or length would be noise.
    problem = _fit(field, value, is_error) if ok and field is not None else None
    if problem:
        reader.error(value_node.pos, context, problem)
    return SetField(name, value, is_error) if name is not None else None


def _fit(field: Field, value: Any, is_error: bool) -> str | None:
    """Why ``value`` cannot be written to ``field`` (``{error}`` is text of any length)."""
    if is_error:
        if field.type in TEXT_TYPES:
            return None
        return f"{{error}} is text, but [{field.name}] is {a_type(field.type)} field"
    if value is None and field.required:
        return f"value for [{field.name}] is required, so it cannot be set to null"
    problem = value_problem(field.type, field.length, value)
    return f"value for [{field.name}] {problem}" if problem else None


def _value(node: YNode, proc: Proc, step: StepNode) -> tuple[Any, bool, bool]:
    """The literal value, whether it is exactly ``{error}``, and whether it is usable at all.

    Braces anywhere else are errors: nothing fills them in, and a literal ``{total}`` written to
    the record is surely not what was meant.
    """
    reader, context = proc.reader, step.context
    if isinstance(node, YMap) and list(node.entries) == ["error"] and node.get("error") is not None:
        error_value = node.entries["error"].value
        if isinstance(error_value, YScalar) and error_value.value is None:
            reader.error(
                node.pos,
                context,
                'write the value as "{error}" in quotes; unquoted, {error} is a YAML mapping',
            )
            return None, False, False
    if not isinstance(node, YScalar):
        reader.scalar(node, context, "value")
        return None, False, False
    value = node.value
    if not isinstance(value, str):
        return value, False, True
    if value == ERROR_TOKEN:
        step.error_value = node.pos
        return value, True, True
    ok = True
    for match in _BRACES.finditer(value):
        if match.group() == ERROR_TOKEN:
            step.error_value = node.pos
            message = f"{{error}} must be the whole value, not part of [{value}]"
        else:
            message = (
                f"{match.group()} is not filled in: a setField value is a literal; only a value "
                "that is exactly {error} is replaced"
            )
        reader.error(at(node, match.start()), context, message)
        ok = False
    return value, False, ok


def set_relation(args: YMap, proc: Proc, step: StepNode) -> SetRelationField | None:
    reader, context = proc.reader, step.context
    name = reader.string(args.get("setRelationField"), context, "setRelationField")
    value_node = reader.require(args, "value", context, "the seed id or seeded name to set")
    proc.writes(key_pos(args, "setRelationField"), context, "setRelationField")
    entity = proc.needs_record(key_pos(args, "setRelationField"), context, "setRelationField")
    if entity is None or name is None:
        return None
    rel = entity.relation(name)
    name_pos = args.entries["setRelationField"].value.pos
    if rel is None or not rel.to_one:
        if rel is not None:
            hint = f"; it is a {rel.kind} relation"
        elif entity.field(name) is not None:
            hint = "; it is a field — use setField"
        else:
            hint = suggest(name, (r.name for r in entity.relations if r.to_one))
        reader.error(
            name_pos,
            context,
            f"setRelationField [{name}] is not a to-one relation of [{entity.name}]{hint}",
        )
        return None
    if value_node is None or rel.to not in proc.env.catalog.declared:
        return None
    resolved = proc.env.catalog.resolve(rel.to, value_node, context, "value")
    return SetRelationField(name, resolved) if resolved is not None else None


# --- delegate --------------------------------------------------------------------------------


def delegate(args: YMap, proc: Proc, step: StepNode) -> Delegate | None:
    reader, context = proc.reader, step.context
    node = args.get("delegate")
    ref = reader.string(node, context, "delegate")
    fields = _delegate_fields(args, proc, step)
    if ref is None or node is None:
        return None
    target = split_ref(ref)
    if target is None:
        reader.error(
            node.pos,
            context,
            f"delegate [{ref}] is not a Python name "
            "(e.g. SchemaProvisioner or custom.SchemaProvisioner)",
        )
        return None
    problem = proc.env.resolver.problem(target)
    if problem:
        reader.error(node.pos, context, f"delegate [{ref}]: {problem}")
        return None
    return Delegate(ref, target.module, target.attr, fields)


def _delegate_fields(args: YMap, proc: Proc, step: StepNode) -> dict[str, Any]:
    reader, context = proc.reader, step.context
    node = reader.map(args.get("fields"), context, "fields")
    if node is None:
        return {}
    out: dict[str, Any] = {}
    for key, entry in node.entries.items():
        if not IDENT.match(key):
            reader.error(
                entry.key_pos,
                context,
                f"delegate field [{key}] must be an identifier (it becomes an attribute)",
            )
        elif not isinstance(entry.value, YScalar):
            reader.error(
                entry.value.pos,
                context,
                f"delegate field [{key}] must be a single value (text, number, boolean or null), "
                f"got {kind_name(entry.value)}",
            )
        else:
            out[key] = entry.value.value
    return out


# --- notify ----------------------------------------------------------------------------------


def notify(args: YMap, proc: Proc, step: StepNode) -> Notify | None:
    reader, context = proc.reader, step.context
    node = reader.map(args.get("notify"), context, "notify")
    if node is None:
        return None
    reader.keys(node, ("to", "subject", "body"), context)
    to_node = reader.require(node, "to", context, "an address, a field or relation.field")
    recipient = _recipient(to_node, proc, step)
    subject = _text(node.get("subject"), proc, step, "subject")
    body = _text(node.get("body"), proc, step, "body")
    if recipient is None:
        return None
    return Notify(recipient, subject, body)


def _recipient(node: YNode | None, proc: Proc, step: StepNode) -> Recipient | None:
    reader, context = proc.reader, step.context
    to = reader.string(node, context, "notify to")
    if to is None or not isinstance(node, YScalar):
        return None
    if "@" in to:
        return Recipient(address=to)
    path = tuple(to.split("."))
    record = proc.record()
    if not proc.has_trigger:
        reader.error(node.pos, context, no_trigger(f"notify to [{to}]"))
        return None
    if record is None:
        return Recipient(path=path)
    problem = path_problem(path[0], list(path[1:]), record)
    if problem is None and (len(path) == 1 or path[0] in record.related):
        ftype = _path_type(path, proc)
        if ftype is None:
            problem = f"[{to}] is a relation (an id); name a text field of it, e.g. {to}.email"
        elif ftype not in TEXT_TYPES:
            problem = f"[{to}] is {a_type(ftype)} field; an address is text"
    if problem:
        reader.error(
            node.pos,
            context,
            f"notify to is neither an address (with @) nor a text field: {problem}",
        )
        return None
    return Recipient(path=path)


def _path_type(path: tuple[str, ...], proc: Proc) -> str | None:
    record = proc.record()
    if record is None:
        return None
    if len(path) == 1:
        f = record.entity.field(path[0])
    else:
        target = record.related.get(path[0])
        f = target.field(path[1]) if target is not None else None
    return f.type if f is not None else None


def _text(node: YNode | None, proc: Proc, step: StepNode, what: str) -> Placeholders:
    text = proc.reader.string(node, step.context, f"notify {what}")
    if text is None or not isinstance(node, YScalar):
        return parse_placeholders("")
    record: Record | bool | None = proc.record()
    if record is None and proc.has_trigger:
        record = False  # the trigger's unknown entity was reported; nothing to check against
    parsed = placeholders(node, text, record, step.context, f"notify {what}", proc.reader)
    if parsed is None:
        return parse_placeholders("")
    return parsed
