"""Events from the outside world: envelopes, validation against manifests, correlation keys.

Everything here is pure. The engine accepts an event in one transaction (``Engine.send_event``):
validate → store (deduplicated by id) → look up the waits on ``(type, keys)`` → deliver → start
the flows it triggers.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from procflow.errors import EventError, ExprError
from procflow.model.values import describe, literal_mismatch
from procflow.runtime.data.user_json import json_problems, shown, text_problem

if TYPE_CHECKING:
    from procflow.model.ir import EventSpec

# Accepted events are kept at least this long, so a late wait's `lookback` can find them.
MIN_RETENTION_SECONDS = 24 * 3600
CLOUDEVENTS_VERSION = "1.0"  # the one CloudEvents spec version whose envelope procflow reads


@dataclass(frozen=True)
class Event:
    type: str
    data: dict[str, Any]
    id: str


def envelope(obj: Any) -> Event:
    """``{type, data, id?}`` or a CloudEvents JSON envelope (``specversion``, ``type``, ``id``,
    ``data``) → an :class:`Event`."""
    if not isinstance(obj, Mapping):
        raise EventError("an event must be a JSON object: {type, data, id} or a CloudEvent")
    type_ = obj.get("type")
    if "specversion" in obj:
        _check_spec_version(obj["specversion"])
        missing = [k for k in ("type", "id", "source") if not obj.get(k)]
        if missing:
            named = type_ if isinstance(type_, str) and type_ else None
            message = f"CloudEvent without [{', '.join(missing)}]"
            raise EventError(message, event_type=named, field=missing[0])
    if not isinstance(type_, str) or not type_:
        raise EventError("an event needs a [type] such as slack.approval", field="type")
    return make_event(type_, obj.get("data", {}), obj.get("id"))


def _check_spec_version(version: Any) -> None:
    if version == CLOUDEVENTS_VERSION and isinstance(version, str):
        return
    if isinstance(version, str):
        message = f"CloudEvent specversion [{shown(version)}] is not supported: only 1.0 is"
    else:
        message = f'CloudEvent specversion must be the text "1.0", got {describe(version)}'
    raise EventError(message, field="specversion")


def make_event(type_: str, data: Any, id_: Any = None) -> Event:
    """An event from its parts, each checked: text that is valid Unicode, a data object of JSON
    values only (no NaN or Infinity), a non-empty text id; the id is minted when not given."""
    problem = text_problem(type_)
    if problem is not None:
        raise EventError(f"the event type is text that is not valid Unicode ({problem})")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise EventError(
            f"event [{type_}]: data must be a JSON object, got {_kind(data)}",
            event_type=type_,
            field="data",
        )
    if id_ is not None and (not isinstance(id_, str) or not id_):
        raise EventError(
            f"event [{type_}]: id must be a non-empty string", event_type=type_, field="id"
        )
    _check_data(type_, data, id_)
    return Event(type_, data, id_ or f"pf-{uuid.uuid4().hex}")


def _check_data(type_: str, data: dict[str, Any], id_: str | None) -> None:
    problem = text_problem(id_) if id_ is not None else None
    if problem is not None:
        message = f"event [{type_}]: the event id is text that is not valid Unicode ({problem})"
        raise EventError(message, event_type=type_, field="id")
    found = json_problems(data)
    if found:
        message = f"event [{type_}]: " + "; ".join(
            f"data field [{p.where}] {p.problem}" if p.where else f"data {p.problem}" for p in found
        )
        raise EventError(message, event_type=type_, field=found[0].where)


def check_payload(type_: str, spec: EventSpec, data: Mapping[str, Any]) -> None:
    """Every problem of ``data`` against the manifest's payload schema, at once: a missing
    correlation key or required field, a field of the wrong type. Undeclared fields are kept."""
    problems: list[tuple[str, str]] = []  # (the payload field, the problem)
    for key in spec.correlate_on:
        if lookup(data, key) is None:
            problems.append((key, f"missing correlation key [{key}] (correlate_on)"))
    for name, field in spec.payload.items():
        value = data.get(name)
        if value is None:
            if field.required and name not in spec.correlate_on:
                problems.append((name, f"missing required field [{name}] ({field.type})"))
            continue
        wrong = literal_mismatch(value, field.type)
        if wrong is not None:
            problems.append((name, f"field [{name}] {wrong}"))
    if problems:
        message = f"event [{type_}]: " + "; ".join(text for _, text in problems)
        raise EventError(message, event_type=type_, field=problems[0][0])


def lookup(data: Mapping[str, Any], dotted: str) -> Any:
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def correlation_keys(spec: EventSpec, values: Mapping[str, Any]) -> str:
    """The canonical text of the correlation values, in ``correlate_on`` order: equal JSON
    values give equal text (``1`` and ``1.0`` alike), so matching is one indexed lookup."""
    return json.dumps(
        [_normal(values.get(key)) for key in spec.correlate_on],
        sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    )  # fmt: skip


def event_keys(spec: EventSpec, data: Mapping[str, Any]) -> str:
    return correlation_keys(spec, {key: lookup(data, key) for key in spec.correlate_on})


def _normal(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _kind(value: Any) -> str:
    from procflow.expr import kind_of

    try:
        return kind_of(value)
    except ExprError:  # a Python object no JSON holds
        return f"a value of type {type(value).__name__}"
