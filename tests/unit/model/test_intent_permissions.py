"""Intent permissions: the ``permissions:`` block's rules and messages, and the grants it compiles
into (``Application.permissions``, ``guarded_entities``, ``roles_for``).

Each case lists the exact set of diagnostics the file must produce (every expected substring
matches a line; every line is expected).
"""

# ruff: noqa: E501 -- the case tables quote whole messages; unbroken they can be grepped

from __future__ import annotations

from pathlib import Path

import pytest
from diagnostic_cases import assert_exactly, case

from procflow.model.ir import Application, Permission, RecordAction
from procflow.model.reading.yamlsrc import read_yaml
from procflow.model.validate import load_text

BASE = """\
name: t
entities:
  - name: Order
    fields: [ { name: id, type: integer, primaryKey: true } ]
  - name: Customer
    fields: [ { name: id, type: integer, primaryKey: true } ]
"""


def perms(*lines: str) -> str:
    """BASE with a permissions block of these lines (the first is line 8)."""
    return BASE + "permissions:\n" + "".join(f"  {line}\n" for line in lines)


def load(text: str, tmp_path: Path) -> tuple[Application | None, list[str]]:
    loaded = load_text(text, "t.intent", project_dir=str(tmp_path))
    app = loaded.definition
    assert app is None or isinstance(app, Application)
    return app, [d.format() for d in loaded.diagnostics]


CASES = [
    case("flow-style", perms("- { role: Clerk, can: [Order:read, Order:create, Customer:read] }")),
    case("block-style", perms("- role: Clerk", "  can:", "    - Order:read", "    - Order:write")),
    case("block-map-flow-list", perms("- role: Clerk", "  can: [Order:read]")),
    case("quoted-tokens", perms("- { role: Clerk, can: ['Order:read', \"Customer:delete\"] }")),
    case(
        "role-like-a-claim",
        perms(
            "- { role: realm:x, can: [Order:read] }",
            "- { role: tenant-admins, can: [Order:read] }",
            "- { role: ops.lead, can: [Order:read] }",
        ),
    ),
    case("empty-block", BASE + "permissions:\n"),
    case("empty-can", perms("- { role: Clerk, can: [] }")),
    case(
        "not-a-list",
        BASE + "permissions: { role: Clerk }\n",
        "t.intent:7:14: error: file: permissions must be a list, got a mapping (permissions)",
    ),
    case(
        "entry-not-a-mapping",
        perms("- Clerk"),
        "t.intent:8:5: error: permission #1: each permission must be a mapping, got a string (permissions[0])",
    ),
    case(
        "unknown-key-suggests",
        perms("- { role: Clerk, can: [Order:read], cna: x }"),
        "t.intent:8:39: error: role [Clerk]: unknown key [cna]; did you mean [can]? (permissions[0].cna)",
    ),
    case(
        "unknown-key-case-hint",
        perms("- { Role: Clerk, can: [Order:read] }"),
        "t.intent:8:5: error: permission #1: missing required key [role] (the role these permissions are granted to) (permissions[0])",
        "t.intent:8:7: error: permission #1: unknown key [Role]; did you mean [role]? (names are case-sensitive) (permissions[0].Role)",
    ),
    case(
        "description-is-not-a-key",
        perms("- { role: Clerk, can: [Order:read], description: clerks }"),
        "t.intent:8:39: error: role [Clerk]: unknown key [description] (permissions[0].description)",
    ),
    case(
        "missing-can",
        perms("- { role: Clerk }"),
        "t.intent:8:5: error: role [Clerk]: missing required key [can] (a list of Entity:action, such as Order:read) (permissions[0])",
    ),
    case(
        "role-not-a-string",
        perms("- { role: 12, can: [Order:read] }"),
        "t.intent:8:13: error: permission #1: role must be a string, got an integer (permissions[0].role)",
    ),
    case(
        "role-empty",
        perms("- { role: '', can: [Order:read] }"),
        "t.intent:8:13: error: permission #1: role must not be empty (permissions[0].role)",
    ),
    case(
        "role-with-a-space",
        perms("- { role: Sales Team, can: [Order:read] }"),
        "t.intent:8:13: error: permission #1: role [Sales Team] is not a role name: a role is one word, without spaces or commas (permissions[0].role)",
    ),
    case(
        "role-with-a-comma",
        perms("- { role: 'a,b', can: [Order:read] }"),
        "t.intent:8:13: error: permission #1: role [a,b] is not a role name",
    ),
    case(
        "can-a-single-token",
        perms("- { role: Clerk, can: Order:read }"),
        "t.intent:8:25: error: role [Clerk]: can must be a list; write [Order:read] (permissions[0].can)",
    ),
    case(
        "can-a-mapping",
        perms("- { role: Clerk, can: { Order: read } }"),
        "t.intent:8:25: error: role [Clerk]: can must be a list of Entity:action, such as Order:read, got a mapping (permissions[0].can)",
    ),
    case(
        "can-empty-value",
        perms("- { role: Clerk, can: }"),
        "t.intent:8:25: error: role [Clerk]: can must be a list of Entity:action, such as Order:read, got null (permissions[0].can)",
    ),
    case(
        "token-space-after-colon-flow",
        perms("- { role: Clerk, can: [Order: read] }"),
        "t.intent:8:26: error: role [Clerk]: [Order: read] is a mapping, not Entity:action: the space after the colon makes it one; write Order:read (permissions[0].can[0])",
    ),
    case(
        "token-space-after-colon-block",
        perms("- role: Clerk", "  can:", "    - Order: write"),
        "t.intent:10:9: error: role [Clerk]: [Order: write] is a mapping, not Entity:action: the space after the colon makes it one; write Order:write (permissions[0].can[0])",
    ),
    case(
        "token-not-text",
        perms("- { role: Clerk, can: [3, [Order:read]] }"),
        "t.intent:8:26: error: role [Clerk]: each entry of can must be Entity:action, such as Order:read, got an integer (permissions[0].can[0])",
        "t.intent:8:29: error: role [Clerk]: each entry of can must be Entity:action, such as Order:read, got a list (permissions[0].can[1])",
    ),
    case(
        "token-malformed",
        perms("- { role: Clerk, can: [Order, 'Order:', ':read', Order:read:x, 'Order :read'] }"),
        "t.intent:8:26: error: role [Clerk]: [Order] is not Entity:action (one colon, no spaces), such as Order:read (permissions[0].can[0])",
        "t.intent:8:33: error: role [Clerk]: [Order:] is not Entity:action",
        "t.intent:8:43: error: role [Clerk]: [:read] is not Entity:action",
        "t.intent:8:52: error: role [Clerk]: [Order:read:x] is not Entity:action",
        "t.intent:8:66: error: role [Clerk]: [Order :read] is not Entity:action",
    ),
    case(
        "unknown-entity-suggests",
        perms("- { role: Clerk, can: [Ordr:read, Nothing:read] }"),
        "t.intent:8:26: error: role [Clerk]: [Ordr] is not a declared entity; did you mean [Order]? (permissions[0].can[0])",
        "t.intent:8:37: error: role [Clerk]: [Nothing] is not a declared entity (permissions[0].can[1])",
    ),
    case(
        "unknown-action-at-its-column",
        perms("- { role: Clerk, can: [Order:reed, 'Customer:Write', Order:edit] }"),
        "t.intent:8:32: error: role [Clerk]: [reed] is not an action (read, create, update, delete, write); did you mean [read]? (permissions[0].can[0])",
        "t.intent:8:48: error: role [Clerk]: [Write] is not an action (read, create, update, delete, write); did you mean [write]? (names are case-sensitive) (permissions[0].can[1])",
        "t.intent:8:62: error: role [Clerk]: [edit] is not an action (read, create, update, delete, write) (permissions[0].can[2])",
    ),
    case(
        "unknown-entity-and-action",
        perms("- { role: Clerk, can: [Ordr:reed] }"),
        "t.intent:8:26: error: role [Clerk]: [Ordr] is not a declared entity; did you mean [Order]?",
        "t.intent:8:31: error: role [Clerk]: [reed] is not an action",
    ),
    case(
        "tokens-checked-without-a-role",
        perms("- { can: [Ordr:read] }"),
        "t.intent:8:5: error: permission #1: missing required key [role]",
        "t.intent:8:13: error: permission #1: [Ordr] is not a declared entity; did you mean [Order]?",
    ),
    case(
        "duplicate-token-warns",
        perms("- { role: Clerk, can: [Order:read, Order:read] }"),
        "t.intent:8:38: warning: role [Clerk]: [Order:read] is listed twice for [Clerk] (first at line 8) (permissions[0].can[1])",
    ),
    case(
        "token-covered-by-write-warns",
        perms(
            "- { role: Clerk, can: [Order:write] }",
            "- { role: Clerk, can: [Order:update, Customer:read] }",
        ),
        "t.intent:9:26: warning: role [Clerk]: [Order:update] grants [Clerk] nothing new: [Order:write] (line 8) already grants it (permissions[1].can[0])",
    ),
    case(
        "write-after-create-adds-the-rest",
        perms("- { role: Clerk, can: [Order:create, Order:write] }"),
    ),
    case(
        "role-differing-only-in-case-warns",
        perms("- { role: Clerk, can: [Order:read] }", "- { role: clerk, can: [Order:read] }"),
        "t.intent:9:13: warning: role [clerk]: differs from role [Clerk] (line 8) only in case; roles are case-sensitive, so these are two roles (permissions[1].role)",
    ),
    case(
        "every-problem-at-once",
        perms(
            "- { role: Clerk, can: [Ordr:read, Order:reed] }", "- 7", "- { role: 'a b', can: x }"
        ),
        "t.intent:8:26: error: role [Clerk]: [Ordr] is not a declared entity",
        "t.intent:8:43: error: role [Clerk]: [reed] is not an action",
        "t.intent:9:5: error: permission #2: each permission must be a mapping, got an integer",
        "t.intent:10:13: error: permission #3: role [a b] is not a role name",
        "t.intent:10:25: error: permission #3: can must be a list; write [x]",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_permission_rules(tmp_path: Path, text: str, expected: list[str]) -> None:
    _, lines = load(text, tmp_path)
    assert_exactly(lines, expected)


# --- what they compile into ----------------------------------------------------------------

R, C, U, D = RecordAction.READ, RecordAction.CREATE, RecordAction.UPDATE, RecordAction.DELETE
SPELLINGS = {
    "flow": perms(
        "- { role: Clerk, can: [Order:read, Order:write, Customer:read] }",
        "- { role: Auditor, can: [Order:read] }",
        "- { role: Clerk, can: [Customer:create] }",
    ),
    "block": perms(
        "- role: Clerk",
        "  can:",
        "    - Order:read",
        "    - Order:write",
        "    - Customer:read",
        "- role: Auditor",
        "  can: [ 'Order:read' ]",
        "- role: Clerk",
        "  can:",
        "    - Customer:create",
    ),
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_grants_are_flat_with_write_expanded_and_a_role_merged(
    tmp_path: Path, spelling: str
) -> None:
    app, lines = load(SPELLINGS[spelling], tmp_path)
    assert lines == [] and app is not None
    assert app.permissions == (
        Permission("Clerk", "Order", R),
        Permission("Clerk", "Order", C),
        Permission("Clerk", "Order", U),
        Permission("Clerk", "Order", D),
        Permission("Clerk", "Customer", R),
        Permission("Auditor", "Order", R),
        Permission("Clerk", "Customer", C),
    )
    assert app.guarded_entities() == frozenset({"Order", "Customer"})
    assert app.roles_for("Order", R) == frozenset({"Clerk", "Auditor"})
    assert app.roles_for("Order", D) == frozenset({"Clerk"})
    assert app.roles_for("Customer", U) == frozenset()


def test_a_repeated_grant_is_kept_once(tmp_path: Path) -> None:
    app, lines = load(
        perms("- { role: Clerk, can: [Order:read, Order:write, Order:create] }"), tmp_path
    )
    assert len(lines) == 1 and "grants [Clerk] nothing new" in lines[0]
    assert app is not None and app.permissions == (
        Permission("Clerk", "Order", R),
        Permission("Clerk", "Order", C),
        Permission("Clerk", "Order", U),
        Permission("Clerk", "Order", D),
    )


def test_a_file_without_permissions_guards_nothing(tmp_path: Path) -> None:
    app, lines = load(BASE, tmp_path)
    assert lines == [] and app is not None
    assert app.permissions == () and app.guarded_entities() == frozenset()
    assert app.roles_for("Order", R) == frozenset()


def test_a_bad_entry_grants_nothing_and_the_good_ones_stand(tmp_path: Path) -> None:
    text = perms(
        "- { role: Clerk, can: [Order:read, Ordr:write, Order:reed] }",
        "- { role: 'a b', can: [Customer:read] }",
        "- { can: [Customer:read] }",
    )
    app, lines = load(text, tmp_path)
    assert len(lines) == 4
    assert app is not None and app.permissions == (Permission("Clerk", "Order", R),)


# --- the two parser paths: a flow list with Entity:action needs the pure parser ------------


def test_the_same_block_reads_alike_on_either_parser(tmp_path: Path) -> None:
    """Quoted tokens are read by libyaml, bare ones (YAML 1.2) by the pure parser: the grants
    are the same, and an unknown action is pointed at on either."""
    quoted = perms("- { role: Clerk, can: ['Order:read', 'Order:reed'] }")
    bare = perms("- { role: Clerk, can: [Order:read, Order:reed] }")
    assert not read_yaml(quoted, "t.intent", pure=False).flow_colon
    assert read_yaml(bare, "t.intent", pure=False).flow_colon
    _, quoted_lines = load(quoted, tmp_path)
    _, bare_lines = load(bare, tmp_path)
    message = "error: role [Clerk]: [reed] is not an action (read, create, update, delete, write); did you mean [read]? (permissions[0].can[1])"
    assert quoted_lines == [f"t.intent:8:47: {message}"]  # the column of reed, after a quote
    assert bare_lines == [f"t.intent:8:44: {message}"]
