"""Entity records: checking writes against the declaration, and the record JSON shape.

Pure: no I/O. The store keeps records in their **record JSON form** — a dict holding every declared
field (``None`` when empty) and each to-one relation under its own name as the related id — and
calls into this module to build that form from a create, a partial update or a seed row. Every
problem of one write is collected and raised together in one :class:`RecordError`, so a rejected
write names everything wrong with it and nothing is half-written.

Decisions (normative for the store and the docs):

- ``integer``/``int``/``long``: a Python/JSON integer in the signed 64-bit range; a boolean or a
  float (even ``1.0``) is rejected.
- ``decimal``/``double``: a finite JSON number (int or float); booleans and numeric strings are
  rejected. ``precision``/``scale`` are not checked on writes.
- ``boolean``: ``true``/``false`` only (no ``0``/``1``, no ``"yes"``).
- ``string``/``text``: text without NUL characters (PostgreSQL cannot store them), at most
  ``length`` characters when declared. The empty string is a value, not null.
- ``date``: ``"YYYY-MM-DD"`` (or a ``datetime.date`` from Python code); a date-time is rejected.
- ``timestamp``: ISO-8601 with a zone offset or ``Z`` (or an aware ``datetime``), stored as UTC
  ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``; a naive timestamp is rejected.
- ``uuid``: any form :class:`uuid.UUID` parses, stored canonical lowercase with hyphens.
- A generated primary key may be given on create (an integer; the store checks it is free);
  absent, it is ``None`` in the returned record and the store assigns it. A non-generated primary
  key is required. The primary key never changes on update (repeating the same value is allowed).
- Absent fields take their ``defaultValue``; absent status relations take their ``init``. An
  explicit ``null`` is a value: it is not replaced by the default, and is an error on a required
  field or relation.
- A to-one relation value is the related id; for a status relation it may also be a seeded name
  (the ``name`` column of the setting entity's seed rows). Every given, non-null relation id is
  checked with ``exists``; an ``init`` (a seed id, loaded at deploy) is not.
- ``oneToMany``/``manyToMany`` relations store nothing and are rejected in writes.
- Text that is not valid Unicode (a lone surrogate), in a value or a key, and a NaN or infinite
  number anywhere in the write are refused before anything else is checked, each problem naming
  where it is (:mod:`procflow.runtime.data.user_json`); the other checks then do not run, as their
  messages would have to show that text.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from procflow.errors import RecordError
from procflow.model.source import suggest
from procflow.model.values import describe
from procflow.runtime.data.user_json import json_problems

if TYPE_CHECKING:
    from procflow.model.ir import Application, Entity, Field, Relation, Seed

Exists = Callable[[str, int], bool]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_INTEGER_TYPES = frozenset({"integer", "int", "long"})
_NUMBER_TYPES = frozenset({"decimal", "double"})
_TEXT_TYPES = frozenset({"string", "text"})


class _Problem(Exception):
    """One field's problem, collected by the record-level functions."""


# --- single values ---------------------------------------------------------------------------


def coerce_value(field: Field, value: Any) -> Any:
    """``value`` in the stored (record JSON) form of ``field``; ``None`` stays ``None``.

    Raises :class:`RecordError` naming the field. Whether ``None`` is allowed (``required``) is
    a record-level question: see :func:`new_record` / :func:`patch_record`.
    """
    try:
        return _coerce(field, value)
    except _Problem as e:
        raise RecordError([(field.name, str(e))]) from None


def _coerce(field: Field, value: Any) -> Any:
    if value is None:
        return None
    type_ = field.type
    if type_ in _TEXT_TYPES:
        return _text(field, value)
    if type_ in _INTEGER_TYPES:
        return _integer(value)
    if type_ in _NUMBER_TYPES:
        return _number(value)
    if type_ == "boolean":
        if isinstance(value, bool):
            return value
        raise _Problem(f"must be true or false, got {_describe(value)}")
    if type_ == "date":
        return _date(value)
    if type_ == "timestamp":
        return _timestamp(value)
    if type_ == "uuid":
        return _uuid(value)
    raise _Problem(f"has the unknown type [{type_}]")  # pragma: no cover - the compiler checks


def _describe(value: Any) -> str:
    if isinstance(value, (str, int, float, bool, list, dict)) or value is None:
        return describe(value)
    return f"a {type(value).__name__}"


def _text(field: Field, value: Any) -> str:
    if not isinstance(value, str):
        raise _Problem(f"must be text, got {_describe(value)}")
    if "\x00" in value:
        raise _Problem("must not contain NUL characters")
    if field.length is not None and len(value) > field.length:
        raise _Problem(f"is {len(value)} characters long; the field holds at most {field.length}")
    return value


def _integer(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Problem(f"must be an integer, got {_describe(value)}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise _Problem(f"is out of range: {value} does not fit in 64 bits")
    return value


def _number(value: Any) -> int | float:
    if isinstance(value, Decimal) and value.is_finite():
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise _Problem(f"must be a finite number, got {value}")
        return value
    raise _Problem(f"must be a number, got {_describe(value)}")


def _date(value: Any) -> str:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str) and len(value) == 10 and value[4] == "-" and value[7] == "-":
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise _Problem(f"must be a date written YYYY-MM-DD, got {_describe(value)}")


def _timestamp(value: Any) -> str:
    bad = (
        f"must be an ISO-8601 timestamp with a zone (2027-01-10T09:30:00Z), got {_describe(value)}"
    )
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and len(value) > 10 and value[10] in "Tt ":
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise _Problem(bad) from None
    else:
        raise _Problem(bad)
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise _Problem(
            f"must name its time zone (add Z for UTC, or an offset like +02:00), "
            f"got {_describe(value)}"
        )
    try:
        return utc_text(moment)
    except OverflowError:
        raise _Problem(f"is out of range in UTC, got {_describe(value)}") from None


def utc_text(moment: datetime) -> str:
    """An aware datetime as stored: ISO-8601 UTC with ``Z`` (microseconds only when non-zero)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def _uuid(value: Any) -> str:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    raise _Problem(f"must be a UUID, got {_describe(value)}")


# --- relations -------------------------------------------------------------------------------


def resolve_status(app: Application, relation: Relation, value: Any) -> int:
    """A status relation value → the related id.

    An integer is an id, returned as is (whether it exists is the caller's ``exists`` check). A
    string is a seeded name of the related setting entity (its seed rows' ``name`` column).
    Raises :class:`RecordError` naming the relation, with a did-you-mean for a near name.
    """
    try:
        return _relation_id(app, relation, value)
    except _Problem as e:
        raise RecordError([(relation.name, str(e))]) from None


def _relation_id(app: Application, relation: Relation, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return _integer(value)
    if not isinstance(value, str) or not relation.is_status:
        wanted = "the related id or a seeded name" if relation.is_status else "the related id"
        raise _Problem(f"must be {wanted} of [{relation.to}], got {_describe(value)}")
    seeded = seeded_names(app, relation.to)
    if value in seeded:
        return seeded[value]
    if not seeded:
        raise _Problem(f"[{value}] is not a seeded name of [{relation.to}] (it has no seeds)")
    hint = suggest(value, seeded) or f" (seeded names: {', '.join(seeded)})"
    raise _Problem(f"[{value}] is not a seeded name of [{relation.to}]{hint}")


def seeded_names(app: Application, entity: str) -> dict[str, int]:
    """Seeded name → id for ``entity``, in seed order (rows with a text ``name`` and an id)."""
    target = app.entity(entity)
    pk = _primary_key(target) if target is not None else None
    names: dict[str, int] = {}
    for seed in app.seeds:
        if seed.entity != entity or pk is None:
            continue
        for row in seed.rows:
            name, row_id = row.get("name"), row.get(pk.name)
            if isinstance(name, str) and isinstance(row_id, int) and not isinstance(row_id, bool):
                names.setdefault(name, row_id)
    return names


# --- records ---------------------------------------------------------------------------------


def new_record(
    app: Application, entity: Entity, data: Mapping[str, Any], *, exists: Exists
) -> dict[str, Any]:
    """A create: ``data`` checked and completed into the stored record (see the module notes)."""
    return _build(app, entity, data, exists, action="create")


def seed_rows(app: Application, seed: Seed) -> list[dict[str, Any]]:
    """The seed's rows as stored records, in order: checked like a create, relations unchecked."""
    entity = app.entity(seed.entity)
    if entity is None:
        problem = ("entity", f"[{seed.entity}] is not a declared entity")
        raise RecordError([problem], entity=seed.entity, action="seed", where=f"seed [{seed.name}]")
    pk = _primary_key(entity)
    rows: list[dict[str, Any]] = []
    for i, row in enumerate(seed.rows):
        where = f"seed [{seed.name}] row {i + 1}"
        if pk is not None and row.get(pk.name) is None:
            problem = (pk.name, "is missing; seed rows are loaded by id")
            raise RecordError([problem], entity=entity.name, action="seed", where=where)
        rows.append(_build(app, entity, row, None, action="seed", where=where))
    return rows


def patch_record(
    app: Application,
    entity: Entity,
    current: Mapping[str, Any],
    patch: Mapping[str, Any],
    *,
    exists: Exists,
) -> dict[str, Any]:
    """A partial update: the given keys checked and merged over ``current`` (a stored record)."""
    pk = _primary_key(entity)
    record_id = current.get(pk.name) if pk is not None else None
    _refuse_unreadable(entity, patch, action="update", record_id=record_id)
    problems: dict[str, str] = {}
    values: dict[str, Any] = {}
    for f in entity.fields:
        if f.name not in patch:
            continue
        try:
            value = _coerce(f, patch[f.name])
        except _Problem as e:
            problems[f.name] = str(e)
            continue
        if f is pk:
            if value != current.get(f.name):
                problems[f.name] = (
                    f"is the primary key and cannot change (it is {current.get(f.name)})"
                )
            continue
        if value is None and f.required:
            problems[f.name] = "is required and cannot be set to null"
            continue
        values[f.name] = value
    for rel in entity.relations:
        if rel.to_one and rel.name in patch:
            _relation(app, rel, patch[rel.name], exists, values, problems)
    _unknown_keys(entity, patch, problems)
    if problems:
        raise RecordError(
            list(problems.items()), entity=entity.name, action="update", record_id=record_id
        )
    merged = record_json(entity, current)
    merged.update(values)
    return merged


def _build(
    app: Application,
    entity: Entity,
    data: Mapping[str, Any],
    exists: Exists | None,
    *,
    action: str,
    where: str | None = None,
) -> dict[str, Any]:
    _refuse_unreadable(entity, data, action=action, where=where)
    problems: dict[str, str] = {}
    record: dict[str, Any] = {}
    for f in entity.fields:
        record[f.name] = None
        if f.name in data:
            given = data[f.name]
        elif f.default is not None:
            given = f.default
        else:
            if f.primary_key and not f.generated:
                problems[f.name] = "is the primary key and is required"
            elif f.required and not f.generated:
                problems[f.name] = "is required"
            continue
        try:
            value = _coerce(f, given)
        except _Problem as e:
            problems[f.name] = str(e) if f.name in data else f"defaultValue {e}"
            continue
        if value is None and (f.required or f.primary_key) and not f.generated:
            problems[f.name] = "is required and cannot be null"
            continue
        record[f.name] = value
    for rel in entity.relations:
        if not rel.to_one:
            continue
        record[rel.name] = None
        if rel.name in data:
            _relation(app, rel, data[rel.name], exists, record, problems)
        elif rel.is_status and rel.init is not None:
            record[rel.name] = rel.init
        elif rel.required:
            problems[rel.name] = f"is required (the id of a [{rel.to}] record)"
    _unknown_keys(entity, data, problems)
    if problems:
        raise RecordError(list(problems.items()), entity=entity.name, action=action, where=where)
    return record


def _refuse_unreadable(
    entity: Entity,
    data: Mapping[str, Any],
    *,
    action: str,
    where: str | None = None,
    record_id: int | None = None,
) -> None:
    """Refuse bad text and non-finite numbers first: every later message could show them."""
    found = json_problems(data, strict=False)
    if found:
        problems = [(p.where, p.problem) for p in found]
        raise RecordError(
            problems, entity=entity.name, action=action, where=where, record_id=record_id
        )


def _relation(
    app: Application,
    rel: Relation,
    given: Any,
    exists: Exists | None,
    out: dict[str, Any],
    problems: dict[str, str],
) -> None:
    if given is None:
        if rel.required:
            problems[rel.name] = f"is required and cannot be null (the id of a [{rel.to}] record)"
        else:
            out[rel.name] = None
        return
    try:
        related = _relation_id(app, rel, given)
    except _Problem as e:
        problems[rel.name] = str(e)
        return
    if exists is not None and not exists(rel.to, related):
        problems[rel.name] = f"there is no [{rel.to}] record with id {related}"
        return
    out[rel.name] = related


def _unknown_keys(entity: Entity, data: Mapping[str, Any], problems: dict[str, str]) -> None:
    writable = [f.name for f in entity.fields] + [r.name for r in entity.relations if r.to_one]
    for key in data:
        if key in writable:
            continue
        rel = entity.relation(key) if isinstance(key, str) else None
        if rel is not None:
            problems[key] = (
                f"is a {rel.kind} relation; it stores nothing and cannot be written "
                f"(write the to-one relation on [{rel.to}] instead)"
            )
        else:
            name = str(key)
            problems[name] = f"is not a field or relation of [{entity.name}]" + suggest(
                name, writable
            )


def _primary_key(entity: Entity) -> Field | None:
    return next((f for f in entity.fields if f.primary_key), None)


# --- record JSON -----------------------------------------------------------------------------


def record_json(entity: Entity, stored: Mapping[str, Any]) -> dict[str, Any]:
    """The record JSON of a stored record: every field then every to-one relation, in
    declaration order, ``None`` when absent; other keys are dropped.

    Values already in record JSON form pass through unchanged. Native database values a store may
    hand back are normalized: ``0``/``1`` for a boolean, ``Decimal`` for a number, ``date``,
    ``datetime`` (aware, or naive meaning UTC) and ``UUID`` objects.
    """
    out: dict[str, Any] = {}
    for f in entity.fields:
        value = stored.get(f.name)
        # Text, floats, booleans and None are record JSON whatever the field's type: only
        # others are looked at (this runs for every field of every step's record).
        out[f.name] = value if type(value) in _AS_IS else _json_value(f, value)
    for rel in entity.relations:
        if rel.to_one:
            out[rel.name] = stored.get(rel.name)
    return out


_AS_IS = frozenset({str, float, bool, type(None)})


def _json_value(field: Field, value: Any) -> Any:
    if value is None:
        return None
    type_ = field.type
    if type_ == "boolean" and isinstance(value, int) and not isinstance(value, bool):
        return bool(value)
    if type_ in _NUMBER_TYPES and isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if type_ == "date" and isinstance(value, date):
        return (value.date() if isinstance(value, datetime) else value).isoformat()
    if type_ == "timestamp" and isinstance(value, datetime):
        return utc_text(value if value.tzinfo is not None else value.replace(tzinfo=UTC))
    if type_ == "uuid" and isinstance(value, uuid.UUID):
        return str(value)
    return value
