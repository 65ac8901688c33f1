"""Records of intent entities: a page of an entity's records (newest, i.e. highest id, first),
and create, read, change (PATCH: the fields to change) and delete one. A record is answered as
record JSON, the shape ``records get --json`` prints. A write fires the entity's lifecycle
event; the caller is the record's owner (create) and the ``by`` of the runs a delete cancels."""

from __future__ import annotations

from urllib.parse import quote

from starlette.responses import Response

from procflow.server.idempotency import HEADER_PARAM, REPLAYED_HEADERS, Created, idempotent
from procflow.server.inputs import JSON_OBJECT, id_param, json_object, path_number
from procflow.server.paging import PAGE_PARAMS, int_page, page_json, page_schema
from procflow.server.routing import Call, Endpoint, json_response

__all__ = ["ENDPOINTS"]


def list_records(call: Call) -> Response:
    asked = int_page(call.query, "records")
    page = call.engine.records_page(
        call.params["entity"], limit=asked.limit, before=asked.before, user=call.actor
    )
    return json_response(page_json(asked, page))


def create_record(call: Call) -> Response:
    entity = call.params["entity"]
    body = json_object(call)

    def create() -> Created:
        record = call.engine.create_record(entity, body, user=call.actor)
        record_id = record[call.engine.record_key(entity)]
        return Created(record, 201, {"Location": f"/entities/{quote(entity)}/{record_id}"})

    return idempotent(call, body, create)


def get_record(call: Call) -> Response:
    entity, record_id = _record(call)
    return json_response(call.engine.get_record(entity, record_id, user=call.actor))


def update_record(call: Call) -> Response:
    entity, record_id = _record(call)
    patch = json_object(call)
    return json_response(call.engine.update_record(entity, record_id, patch, user=call.actor))


def delete_record(call: Call) -> Response:
    entity, record_id = _record(call)
    call.engine.delete_record(entity, record_id, user=call.actor)
    return Response(status_code=204)


def _record(call: Call) -> tuple[str, int]:
    entity = call.params["entity"]
    return entity, path_number(call, "id", lambda text: f"no [{entity}] record with id {text}")


_ENTITY = id_param("entity", "The entity's name.")
_ID = id_param("id", "The record's id (its primary key).", number=True)
_RECORD = {
    "schema": {
        **JSON_OBJECT,
        "description": "Record JSON: every field, then every to-one relation, null when absent.",
    }
}
_UNKNOWN = {"description": "no such entity or record"}
_REFUSED = {"description": "a value the entity's declaration refuses (each field named)"}

ENDPOINTS = [
    Endpoint(
        "GET", "/entities/{entity}", list_records, "An entity's records, newest first.",
        params=(_ENTITY, *PAGE_PARAMS),
        responses={"200": {"description": "a page of records",
                           "schema": page_schema(_RECORD["schema"])},
                   "404": {"description": "no such entity"}},
    ),
    Endpoint(
        "POST", "/entities/{entity}", create_record,
        "Create a record (fires onCreate; the caller owns it).",
        params=(_ENTITY, HEADER_PARAM),
        body={"application/json": {"schema": {**JSON_OBJECT,
                                              "description": "The record's fields."}}},
        responses={
            "201": {"description": "created: the record", **_RECORD,
                    "headers": {"Location": {"schema": {"type": "string"},
                                             "description": "/entities/{entity}/{id}"},
                                **REPLAYED_HEADERS}},
            "404": {"description": "no such entity"}, "422": _REFUSED,
        },
    ),
    Endpoint(
        "GET", "/entities/{entity}/{id}", get_record, "One record.",
        params=(_ENTITY, _ID),
        responses={"200": {"description": "the record", **_RECORD}, "404": _UNKNOWN},
    ),
    Endpoint(
        "PATCH", "/entities/{entity}/{id}", update_record,
        "Change fields of a record (fires onUpdate).",
        params=(_ENTITY, _ID),
        body={"application/json": {"schema": {**JSON_OBJECT,
                                              "description": "The fields to change."}}},
        responses={"200": {"description": "changed: the record", **_RECORD}, "404": _UNKNOWN,
                   "422": _REFUSED},
    ),
    Endpoint(
        "DELETE", "/entities/{entity}/{id}", delete_record,
        "Delete a record (fires onDelete; the runs about it are cancelled).",
        params=(_ENTITY, _ID),
        responses={"204": {"description": "deleted"}, "404": _UNKNOWN,
                   "422": {"description": "another record refers to it, or it is seeded"}},
    ),
]  # fmt: skip
