"""Record writes checked against the entity declaration, and the record JSON shape."""

# ruff: noqa: E501 -- the case tables quote whole messages; unbroken they can be grepped

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, get_args

import pytest

from procflow.errors import RecordError, UsageError
from procflow.model.ir import Application, Entity, Field, FieldType, Relation, Seed
from procflow.model.source import UNKNOWN_POS
from procflow.runtime.data.records import (
    coerce_value,
    new_record,
    patch_record,
    record_json,
    resolve_status,
    seed_rows,
)

P = UNKNOWN_POS


def fld(name: str, type_: FieldType, **kw: Any) -> Field:
    return Field(name, type_, P, **kw)


STATUS = Entity(
    "TenantStatus",
    P,
    (
        fld("id", "integer", primary_key=True, generated=True),
        fld("name", "string", required=True, length=50),
    ),
    function="Setting",
)
OWNER = Entity("Owner", P, (fld("id", "integer", primary_key=True, generated=True),))
APP_ENTITY = Entity(
    "TenantApplication",
    P,
    (
        fld("id", "integer", primary_key=True, generated=True),
        fld("title", "string", required=True, length=20),
        fld("failureMessage", "text"),
        fld("seats", "integer", default=5),
        fld("amount", "decimal"),
        fld("approved", "boolean"),
        fld("due", "date"),
        fld("decidedAt", "timestamp"),
        fld("ref", "uuid"),
    ),
    (
        Relation("ProvisioningStatus", "manyToOne", "TenantStatus", P, "EntityStatus", init=1),
        Relation("Owner", "manyToOne", "Owner", P),
        Relation("Notes", "oneToMany", "Note", P),
    ),
)
MANUAL = Entity(
    "Manual",
    P,
    (fld("code", "long", primary_key=True), fld("label", "string")),
    (Relation("Owner", "oneToOne", "Owner", P, required=True),),
)
SEED = Seed(
    "tenant-statuses",
    "TenantStatus",
    (
        {"id": 1, "name": "Requested"},
        {"id": 2, "name": "Provisioned"},
        {"id": 3, "name": "Failed"},
        {"id": 4, "name": "Withdrawn"},
    ),
    P,
)
APP = Application(
    "t", "t.intent", ".", P, entities=(STATUS, OWNER, APP_ENTITY, MANUAL), seeds=(SEED,)
)

EXISTING = {("TenantStatus", i) for i in (1, 2, 3, 4)} | {("Owner", 7)}


def exists(entity: str, id_: int) -> bool:
    return (entity, id_) in EXISTING


def create(data: Mapping[str, Any], entity: Entity = APP_ENTITY) -> dict[str, Any]:
    return new_record(APP, entity, data, exists=exists)


def create_error(data: Mapping[str, Any], entity: Entity = APP_ENTITY) -> RecordError:
    with pytest.raises(RecordError) as info:
        create(data, entity)
    return info.value


# --- coercion of single values ---------------------------------------------------------------

COERCE_OK: list[tuple[FieldType, Any, Any]] = [
    ("string", "héllo", "héllo"),
    ("string", "", ""),
    ("text", "x" * 10_000, "x" * 10_000),
    ("integer", 42, 42),
    ("int", -3, -3),
    ("long", 2**63 - 1, 2**63 - 1),
    ("long", -(2**63), -(2**63)),
    ("decimal", 12.5, 12.5),
    ("decimal", 12, 12),
    ("decimal", Decimal("12.50"), 12.5),
    ("decimal", Decimal("12.00"), 12),
    ("double", -0.25, -0.25),
    ("boolean", True, True),
    ("boolean", False, False),
    ("date", "2027-01-10", "2027-01-10"),
    ("date", date(2027, 1, 10), "2027-01-10"),
    ("timestamp", "2027-01-10T09:30:00Z", "2027-01-10T09:30:00Z"),
    ("timestamp", "2027-01-10T11:30:00+02:00", "2027-01-10T09:30:00Z"),
    ("timestamp", "2027-01-10 09:30+00:00", "2027-01-10T09:30:00Z"),
    ("timestamp", "2027-01-10T09:30:00.250-01:00", "2027-01-10T10:30:00.250000Z"),
    ("timestamp", "2027-01-01T00:30:00+01:00", "2026-12-31T23:30:00Z"),
    ("timestamp", datetime(2027, 1, 10, 9, 30, tzinfo=UTC), "2027-01-10T09:30:00Z"),
    (
        "timestamp",
        datetime(2027, 1, 10, 9, 30, tzinfo=timezone(timedelta(hours=-5))),
        "2027-01-10T14:30:00Z",
    ),
    (
        "uuid",
        "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        "6f9619ff-8b86-d011-b42d-00c04fc964ff",
    ),
    (
        "uuid",
        "{6f9619ff8b86d011b42d00c04fc964ff}",
        "6f9619ff-8b86-d011-b42d-00c04fc964ff",
    ),
    (
        "uuid",
        uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff"),
        "6f9619ff-8b86-d011-b42d-00c04fc964ff",
    ),
]
COERCE_OK += [(type_, None, None) for type_ in get_args(FieldType)]  # null passes every type


@pytest.mark.parametrize(("type_", "value", "stored"), COERCE_OK)
def test_coerce_value_accepts(type_: FieldType, value: Any, stored: Any) -> None:
    result = coerce_value(fld("f", type_), value)
    assert result == stored
    assert type(result) is type(stored)


COERCE_BAD: list[tuple[FieldType, Any, str]] = [
    ("string", 5, "must be text, got the integer [5]"),
    ("text", ["a"], "must be text, got a list"),
    ("string", "a\x00b", "must not contain NUL characters"),
    ("integer", True, "must be an integer, got the boolean [true]"),
    ("integer", 1.0, "must be an integer, got the number [1.0]"),
    ("int", 1.5, "must be an integer, got the number [1.5]"),
    ("long", "12", "must be an integer, got the text [12]"),
    ("long", 2**63, "is out of range: 9223372036854775808 does not fit in 64 bits"),
    ("decimal", "12.5", "must be a number, got the text [12.5]"),
    ("decimal", False, "must be a number, got the boolean [false]"),
    ("double", float("nan"), "must be a finite number, got nan"),
    ("double", float("inf"), "must be a finite number, got inf"),
    ("decimal", Decimal("NaN"), "must be a number, got a Decimal"),
    ("boolean", 1, "must be true or false, got the integer [1]"),
    ("boolean", "true", "must be true or false, got the text [true]"),
    ("date", "2027-02-30", "must be a date written YYYY-MM-DD, got the text [2027-02-30]"),
    ("date", "20270110", "must be a date written YYYY-MM-DD, got the text [20270110]"),
    (
        "date",
        "2027-01-10T09:30:00Z",
        "must be a date written YYYY-MM-DD, got the text [2027-01-10T09:30:00Z]",
    ),
    (
        "date",
        datetime(2027, 1, 10, tzinfo=UTC),
        "must be a date written YYYY-MM-DD, got a datetime",
    ),
    ("date", 20270110, "must be a date written YYYY-MM-DD, got the integer [20270110]"),
    (
        "timestamp",
        "2027-01-10T09:30:00",
        "must name its time zone (add Z for UTC, or an offset like +02:00), got the text [2027-01-10T09:30:00]",
    ),
    (
        "timestamp",
        datetime(2027, 1, 10, 9, 30),
        "must name its time zone (add Z for UTC, or an offset like +02:00), got a datetime",
    ),
    (
        "timestamp",
        "2027-01-10",
        "must be an ISO-8601 timestamp with a zone (2027-01-10T09:30:00Z), got the text [2027-01-10]",
    ),
    (
        "timestamp",
        "2027-13-10T09:30:00Z",
        "must be an ISO-8601 timestamp with a zone (2027-01-10T09:30:00Z), got the text [2027-13-10T09:30:00Z]",
    ),
    (
        "timestamp",
        1700000000,
        "must be an ISO-8601 timestamp with a zone (2027-01-10T09:30:00Z), got the integer [1700000000]",
    ),
    (
        "timestamp",
        "0001-01-01T00:00:00+01:00",
        "is out of range in UTC, got the text [0001-01-01T00:00:00+01:00]",
    ),
    ("uuid", "not-a-uuid", "must be a UUID, got the text [not-a-uuid]"),
    ("uuid", 12, "must be a UUID, got the integer [12]"),
]


@pytest.mark.parametrize(("type_", "value", "problem"), COERCE_BAD)
def test_coerce_value_rejects(type_: FieldType, value: Any, problem: str) -> None:
    with pytest.raises(RecordError) as info:
        coerce_value(fld("f", type_), value)
    assert info.value.problems == (("f", problem),)
    assert info.value.field == "f"
    assert str(info.value) == f"invalid value: [f]: {problem}"
    assert isinstance(info.value, UsageError)


def test_length_limit_names_field_and_limit() -> None:
    f = fld("title", "string", length=3)
    assert coerce_value(f, "abc") == "abc"
    with pytest.raises(
        RecordError, match=r"\[title\]: is 4 characters long; the field holds at most 3"
    ):
        coerce_value(f, "abcd")


# --- create ----------------------------------------------------------------------------------


def blank(**values: Any) -> dict[str, Any]:
    record: dict[str, Any] = {f.name: None for f in APP_ENTITY.fields}
    record.update(ProvisioningStatus=None, Owner=None)
    record.update(values)
    return record


def test_create_fills_every_field_default_and_init() -> None:
    assert create({"title": "Acme"}) == blank(title="Acme", seats=5, ProvisioningStatus=1)


def test_create_coerces_every_value() -> None:
    data = {
        "title": "Acme",
        "failureMessage": None,
        "seats": 0,
        "amount": 10.5,
        "approved": False,
        "due": "2027-01-10",
        "decidedAt": "2027-01-10T10:30:00+01:00",
        "ref": "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        "ProvisioningStatus": 3,
        "Owner": 7,
    }
    assert create(data) == blank(
        title="Acme",
        seats=0,
        amount=10.5,
        approved=False,
        due="2027-01-10",
        decidedAt="2027-01-10T09:30:00Z",
        ref="6f9619ff-8b86-d011-b42d-00c04fc964ff",
        ProvisioningStatus=3,
        Owner=7,
    )


def test_create_keys_in_declaration_order() -> None:
    record = create({"Owner": 7, "title": "Acme"})
    assert list(record) == [f.name for f in APP_ENTITY.fields] + ["ProvisioningStatus", "Owner"]


def test_explicit_null_is_not_replaced_by_default() -> None:
    assert create({"title": "Acme", "seats": None})["seats"] is None


def test_status_by_seeded_name() -> None:
    assert create({"title": "Acme", "ProvisioningStatus": "Failed"})["ProvisioningStatus"] == 3


def test_status_null_overrides_init() -> None:
    assert create({"title": "Acme", "ProvisioningStatus": None})["ProvisioningStatus"] is None


def test_generated_id_may_be_given() -> None:
    assert create({"id": 99, "title": "Acme"})["id"] == 99
    assert create({"id": None, "title": "Acme"})["id"] is None


def test_non_generated_primary_key_and_required_relation() -> None:
    assert create({"code": 3, "Owner": 7}, MANUAL) == {"code": 3, "label": None, "Owner": 7}


CREATE_BAD: list[tuple[str, Mapping[str, Any], Entity, list[tuple[str, str]]]] = [
    ("unknown field with suggestion", {"title": "A", "titel": "B"}, APP_ENTITY,
     [("titel", "is not a field or relation of [TenantApplication]; did you mean [title]?")]),
    ("unknown field, case", {"title": "A", "Title": "B"}, APP_ENTITY,
     [("Title", "is not a field or relation of [TenantApplication]; did you mean [title]? (names are case-sensitive)")]),
    ("unknown field, no suggestion", {"title": "A", "zzz": 1}, APP_ENTITY,
     [("zzz", "is not a field or relation of [TenantApplication]")]),
    ("required missing", {}, APP_ENTITY, [("title", "is required")]),
    ("required null", {"title": None}, APP_ENTITY, [("title", "is required and cannot be null")]),
    ("length", {"title": "x" * 21}, APP_ENTITY,
     [("title", "is 21 characters long; the field holds at most 20")]),
    ("wrong type", {"title": "A", "seats": "5"}, APP_ENTITY,
     [("seats", "must be an integer, got the text [5]")]),
    ("bad date", {"title": "A", "due": "10/01/2027"}, APP_ENTITY,
     [("due", "must be a date written YYYY-MM-DD, got the text [10/01/2027]")]),
    ("naive timestamp", {"title": "A", "decidedAt": "2027-01-10T09:30:00"}, APP_ENTITY,
     [("decidedAt", "must name its time zone (add Z for UTC, or an offset like +02:00), got the text [2027-01-10T09:30:00]")]),
    ("bad uuid", {"title": "A", "ref": "123"}, APP_ENTITY,
     [("ref", "must be a UUID, got the text [123]")]),
    ("dangling relation", {"title": "A", "Owner": 8}, APP_ENTITY,
     [("Owner", "there is no [Owner] record with id 8")]),
    ("dangling status id", {"title": "A", "ProvisioningStatus": 9}, APP_ENTITY,
     [("ProvisioningStatus", "there is no [TenantStatus] record with id 9")]),
    ("unknown status name", {"title": "A", "ProvisioningStatus": "Faild"}, APP_ENTITY,
     [("ProvisioningStatus", "[Faild] is not a seeded name of [TenantStatus]; did you mean [Failed]?")]),
    ("unknown status name, no near one", {"title": "A", "ProvisioningStatus": "Zebra"}, APP_ENTITY,
     [("ProvisioningStatus", "[Zebra] is not a seeded name of [TenantStatus] (seeded names: Requested, Provisioned, Failed, Withdrawn)")]),
    ("name for a plain relation", {"title": "A", "Owner": "Bob"}, APP_ENTITY,
     [("Owner", "must be the related id of [Owner], got the text [Bob]")]),
    ("bool as status", {"title": "A", "ProvisioningStatus": True}, APP_ENTITY,
     [("ProvisioningStatus", "must be the related id or a seeded name of [TenantStatus], got the boolean [true]")]),
    ("to-many relation", {"title": "A", "Notes": [1]}, APP_ENTITY,
     [("Notes", "is a oneToMany relation; it stores nothing and cannot be written (write the to-one relation on [Note] instead)")]),
    ("primary key missing", {"Owner": 7}, MANUAL, [("code", "is the primary key and is required")]),
    ("primary key null", {"code": None, "Owner": 7}, MANUAL, [("code", "is required and cannot be null")]),
    ("generated id of wrong type", {"id": "1", "title": "A"}, APP_ENTITY,
     [("id", "must be an integer, got the text [1]")]),
    ("required relation missing", {"code": 1}, MANUAL, [("Owner", "is required (the id of a [Owner] record)")]),
    ("required relation null", {"code": 1, "Owner": None}, MANUAL,
     [("Owner", "is required and cannot be null (the id of a [Owner] record)")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("data", "entity", "problems"),
    [pytest.param(d, e, p, id=i) for i, d, e, p in CREATE_BAD],
)
def test_create_rejects(
    data: Mapping[str, Any], entity: Entity, problems: list[tuple[str, str]]
) -> None:
    error = create_error(data, entity)
    assert list(error.problems) == problems
    assert error.field == problems[0][0]
    assert error.entity == entity.name
    name, problem = problems[0]
    assert str(error) == f"cannot create [{entity.name}] record: [{name}]: {problem}"


def test_every_problem_in_one_error() -> None:
    error = create_error(
        {"seats": 1.5, "due": "tomorrow", "Owner": 8, "ProvisioningStatus": "Nope", "extra": 1}
    )
    assert [name for name, _ in error.problems] == [
        "title", "seats", "due", "ProvisioningStatus", "Owner", "extra",
    ]  # fmt: skip
    assert str(error).splitlines() == [
        "cannot create [TenantApplication] record (6 problems):",
        "  [title]: is required",
        "  [seats]: must be an integer, got the number [1.5]",
        "  [due]: must be a date written YYYY-MM-DD, got the text [tomorrow]",
        "  [ProvisioningStatus]: [Nope] is not a seeded name of [TenantStatus] (seeded names: Requested, Provisioned, Failed, Withdrawn)",
        "  [Owner]: there is no [Owner] record with id 8",
        "  [extra]: is not a field or relation of [TenantApplication]",
    ]
    assert error.field == "title"


def test_bad_default_value_is_reported_as_such() -> None:
    entity = Entity(
        "E",
        P,
        (fld("id", "integer", primary_key=True, generated=True), fld("n", "integer", default="x")),
    )
    error = create_error({}, entity)
    assert error.problems == (("n", "defaultValue must be an integer, got the text [x]"),)


def test_default_is_coerced() -> None:
    entity = Entity(
        "E",
        P,
        (
            fld("id", "integer", primary_key=True, generated=True),
            fld("at", "timestamp", default="2027-01-10T10:00:00+01:00"),
        ),
    )
    assert new_record(APP, entity, {}, exists=exists)["at"] == "2027-01-10T09:00:00Z"


def test_exists_is_asked_only_about_given_relations() -> None:
    asked: list[tuple[str, int]] = []

    def spy(entity: str, id_: int) -> bool:
        asked.append((entity, id_))
        return True

    new_record(APP, APP_ENTITY, {"title": "A"}, exists=spy)
    assert asked == []  # init is a seed id, loaded at deploy
    new_record(
        APP, APP_ENTITY, {"title": "A", "ProvisioningStatus": "Failed", "Owner": 7}, exists=spy
    )
    assert asked == [("TenantStatus", 3), ("Owner", 7)]


def test_input_is_not_modified() -> None:
    data = {"title": "Acme", "decidedAt": "2027-01-10T10:30:00+01:00"}
    create(data)
    assert data == {"title": "Acme", "decidedAt": "2027-01-10T10:30:00+01:00"}


# --- update ----------------------------------------------------------------------------------

CURRENT = blank(id=4, title="Acme", seats=5, ProvisioningStatus=1, Owner=7)


def patch(data: Mapping[str, Any], current: Mapping[str, Any] = CURRENT) -> dict[str, Any]:
    return patch_record(APP, APP_ENTITY, current, data, exists=exists)


def test_patch_merges_given_keys_only() -> None:
    merged = patch({"failureMessage": "boom", "ProvisioningStatus": "Failed", "Owner": None})
    assert merged == CURRENT | {"failureMessage": "boom", "ProvisioningStatus": 3, "Owner": None}
    assert CURRENT["failureMessage"] is None  # not modified in place


def test_patch_empty_is_the_record() -> None:
    assert patch({}) == CURRENT


def test_patch_same_id_is_allowed() -> None:
    assert patch({"id": 4, "title": "New"})["title"] == "New"


def test_patch_applies_no_defaults_or_init() -> None:
    current = CURRENT | {"seats": None, "ProvisioningStatus": None}
    assert patch({"title": "B"}, current) == current | {"title": "B"}


def test_patch_fills_missing_keys_of_current() -> None:
    assert patch({"title": "B"}, {"id": 4, "title": "A"}) == blank(id=4, title="B")


PATCH_BAD: list[tuple[str, Mapping[str, Any], list[tuple[str, str]]]] = [
    ("cannot change id", {"id": 5}, [("id", "is the primary key and cannot change (it is 4)")]),
    ("required to null", {"title": None}, [("title", "is required and cannot be set to null")]),
    ("length", {"title": "y" * 30}, [("title", "is 30 characters long; the field holds at most 20")]),
    ("type", {"approved": "yes"}, [("approved", "must be true or false, got the text [yes]")]),
    ("dangling", {"Owner": 3}, [("Owner", "there is no [Owner] record with id 3")]),
    ("unknown", {"titl": "x"}, [("titl", "is not a field or relation of [TenantApplication]; did you mean [title]?")]),
    ("to-many", {"Notes": []}, [("Notes", "is a oneToMany relation; it stores nothing and cannot be written (write the to-one relation on [Note] instead)")]),
    ("several", {"id": 5, "title": None, "Owner": 3}, [
        ("id", "is the primary key and cannot change (it is 4)"),
        ("title", "is required and cannot be set to null"),
        ("Owner", "there is no [Owner] record with id 3"),
    ]),
]  # fmt: skip


@pytest.mark.parametrize(("data", "problems"), [pytest.param(d, p, id=i) for i, d, p in PATCH_BAD])
def test_patch_rejects(data: Mapping[str, Any], problems: list[tuple[str, str]]) -> None:
    with pytest.raises(RecordError) as info:
        patch(data)
    assert list(info.value.problems) == problems
    assert str(info.value).startswith("cannot update [TenantApplication] record")


def test_patch_required_relation_to_null() -> None:
    current = {"code": 1, "label": None, "Owner": 7}
    with pytest.raises(RecordError) as info:
        patch_record(APP, MANUAL, current, {"Owner": None}, exists=exists)
    assert info.value.problems == (
        ("Owner", "is required and cannot be null (the id of a [Owner] record)"),
    )


# --- status names ----------------------------------------------------------------------------

STATUS_REL = APP_ENTITY.relation("ProvisioningStatus")
OWNER_REL = APP_ENTITY.relation("Owner")


def test_resolve_status() -> None:
    assert STATUS_REL is not None and OWNER_REL is not None
    assert resolve_status(APP, STATUS_REL, "Withdrawn") == 4
    assert resolve_status(APP, STATUS_REL, 2) == 2
    assert resolve_status(APP, OWNER_REL, 7) == 7
    with pytest.raises(
        RecordError,
        match=r"^invalid value: \[ProvisioningStatus\]: \[requested\] is not a seeded name of \[TenantStatus\]; did you mean \[Requested\]\? \(names are case-sensitive\)$",
    ):
        resolve_status(APP, STATUS_REL, "requested")
    with pytest.raises(
        RecordError, match=r"must be the related id of \[Owner\], got the text \[x\]"
    ):
        resolve_status(APP, OWNER_REL, "x")


def test_status_name_without_seeds() -> None:
    app = Application("t", "t.intent", ".", P, entities=APP.entities)
    assert STATUS_REL is not None
    with pytest.raises(
        RecordError,
        match=r"\[Requested\] is not a seeded name of \[TenantStatus\] \(it has no seeds\)",
    ):
        resolve_status(app, STATUS_REL, "Requested")


# --- seeds -----------------------------------------------------------------------------------


def test_seed_rows() -> None:
    assert seed_rows(APP, SEED) == [
        {"id": 1, "name": "Requested"},
        {"id": 2, "name": "Provisioned"},
        {"id": 3, "name": "Failed"},
        {"id": 4, "name": "Withdrawn"},
    ]


def test_seed_rows_coerce_and_skip_exists() -> None:
    seed = Seed(
        "apps",
        "TenantApplication",
        ({"id": 1, "title": "A", "decidedAt": "2027-01-10T10:00:00+01:00", "Owner": 999},),
        P,
    )
    assert seed_rows(APP, seed) == [
        blank(
            id=1,
            title="A",
            seats=5,
            decidedAt="2027-01-10T09:00:00Z",
            ProvisioningStatus=1,
            Owner=999,
        )
    ]


def test_seed_row_errors_name_the_row() -> None:
    seed = Seed("s", "TenantStatus", ({"id": 1, "name": "ok"}, {"id": 2, "name": 5}), P)
    with pytest.raises(RecordError) as info:
        seed_rows(APP, seed)
    assert str(info.value) == (
        "cannot seed [TenantStatus] record (seed [s] row 2): [name]: must be text, got the integer [5]"
    )
    missing = Seed("s", "TenantStatus", ({"name": "x"},), P)
    with pytest.raises(
        RecordError, match=r"\(seed \[s\] row 1\): \[id\]: is missing; seed rows are loaded by id"
    ):
        seed_rows(APP, missing)
    unknown = Seed("s", "Nope", (), P)
    with pytest.raises(RecordError, match=r"\[entity\]: \[Nope\] is not a declared entity"):
        seed_rows(APP, unknown)


# --- record JSON -----------------------------------------------------------------------------


def test_record_json_order_and_blanks() -> None:
    stored = {"Owner": 7, "title": "A", "internal": "x", "id": 1}
    out = record_json(APP_ENTITY, stored)
    assert out == blank(id=1, title="A", Owner=7)
    assert list(out) == [f.name for f in APP_ENTITY.fields] + ["ProvisioningStatus", "Owner"]


def test_record_json_normalizes_native_values() -> None:
    stored = {
        "approved": 1,
        "amount": Decimal("2.50"),
        "seats": 3,
        "due": date(2027, 1, 10),
        "decidedAt": datetime(2027, 1, 10, 10, 0, tzinfo=timezone(timedelta(hours=1))),
        "ref": uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff"),
    }
    out = record_json(APP_ENTITY, stored)
    assert (out["approved"], out["amount"], out["seats"]) == (True, 2.5, 3)
    assert (out["due"], out["decidedAt"]) == ("2027-01-10", "2027-01-10T09:00:00Z")
    assert out["ref"] == "6f9619ff-8b86-d011-b42d-00c04fc964ff"
    naive = record_json(APP_ENTITY, {"decidedAt": datetime(2027, 1, 10, 9, 0)})
    assert naive["decidedAt"] == "2027-01-10T09:00:00Z"


def test_record_json_round_trips_a_created_record() -> None:
    record = create({"title": "Acme", "decidedAt": "2027-01-10T09:30:00Z", "amount": 3})
    assert record_json(APP_ENTITY, record) == record
