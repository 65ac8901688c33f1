"""An intent file's permissions survive a deploy: a deployed version is stored as its source and
compiled again by every process that reads it, so a fresh engine on the same store must find the
same grants (on both store backends)."""

from __future__ import annotations

from pathlib import Path

from procflow.model.ir import Application, Permission, RecordAction
from procflow.runtime.engine import Engine

LOANS = """\
name: loans
entities:
  - name: Member
    fields: [ { name: id, type: integer, primaryKey: true, generated: true } ]
  - name: Loan
    fields: [ { name: id, type: integer, primaryKey: true, generated: true } ]
  - name: Branch
    fields: [ { name: id, type: integer, primaryKey: true, generated: true } ]
processes:
  - name: Review
    trigger: { onCreate: Loan }
    steps: [ { name: check, kind: userTask, args: { assignee: Clerk } } ]
permissions:
  - { role: Clerk, can: [Member:read, Loan:create] }
  - { role: tenant-admins, can: [Loan:write] }
  - { role: Clerk, can: [Loan:read] }
"""
R, C, U, D = RecordAction.READ, RecordAction.CREATE, RecordAction.UPDATE, RecordAction.DELETE


def deployed_app(db_url: str, entity: str) -> Application:
    """The application declaring ``entity`` as a new engine compiles it from the store."""
    fresh = Engine(db_url)
    try:
        return fresh.catalog.application_of(entity)
    finally:
        fresh.close()


def test_permissions_round_trip_through_a_deploy(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "loans.intent"
    path.write_text(LOANS)
    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(path))
    finally:
        engine.close()
    app = deployed_app(db_url, "Loan")
    assert app.permissions == (
        Permission("Clerk", "Member", R),
        Permission("Clerk", "Loan", C),
        Permission("tenant-admins", "Loan", C),
        Permission("tenant-admins", "Loan", U),
        Permission("tenant-admins", "Loan", D),
        Permission("Clerk", "Loan", R),
    )
    assert app.guarded_entities() == frozenset({"Member", "Loan"})
    assert app.roles_for("Loan", C) == frozenset({"Clerk", "tenant-admins"})
    assert app.roles_for("Loan", R) == frozenset({"Clerk"})
    assert app.roles_for("Branch", R) == frozenset()


def test_a_redeploy_changing_only_permissions_is_what_the_store_serves(
    tmp_path: Path, db_url: str
) -> None:
    path = tmp_path / "loans.intent"
    path.write_text(LOANS)
    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(path))
        path.write_text(LOANS.replace("[Loan:write]", "[Branch:read]"))
        (done,) = engine.deploy(str(path))
        assert done.created and done.version == 2  # a new version: the store serves the new grants
    finally:
        engine.close()
    app = deployed_app(db_url, "Loan")
    assert app.roles_for("Loan", C) == frozenset({"Clerk"})
    assert app.roles_for("Branch", R) == frozenset({"tenant-admins"})
    assert app.guarded_entities() == frozenset({"Member", "Loan", "Branch"})


def test_a_file_without_processes_keeps_its_permissions(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "members.intent"
    path.write_text(
        "name: members\n"
        "entities:\n"
        "  - name: Member\n"
        "    fields: [ { name: id, type: integer, primaryKey: true, generated: true } ]\n"
        "permissions: [ { role: Clerk, can: [Member:read] } ]\n"
    )
    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(path))
    finally:
        engine.close()
    assert deployed_app(db_url, "Member").permissions == (Permission("Clerk", "Member", R),)
