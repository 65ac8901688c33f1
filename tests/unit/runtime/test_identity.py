"""Users, roles and API tokens: the token table's two forms, every refusal, constant-time lookup,
and that no token is ever shown; the actor's completion rule."""

from __future__ import annotations

import hmac
from pathlib import Path

import pytest

from procflow.config import Config
from procflow.errors import ConfigError, UsageError
from procflow.runtime.data import identity
from procflow.runtime.data.identity import ADMINISTRATOR, Actor, TokenTable, checked_name

ALICE = "alice-token-" + "a" * 24
BOB = "bob-token-" + "b" * 24
PADDED = "c" * 30 + "=="  # base64 padding: the user follows the last "="
VAR = "PROCFLOW_API_TOKENS"
FILE = "PROCFLOW_API_TOKENS_FILE"


def parse(text: str) -> TokenTable:
    return TokenTable.parse(text, source=VAR)


def refusal(text: str, source: str = VAR) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        TokenTable.parse(text, source=source)
    return refused.value


# --- the actor -------------------------------------------------------------------------------


def test_the_administrator_is_an_actor_with_the_admin_role() -> None:
    assert Actor("administrator", frozenset({"admin"})) == ADMINISTRATOR
    assert ADMINISTRATOR.is_admin
    assert not Actor("alice", frozenset({"manager"})).is_admin
    assert not Actor("admin").is_admin  # a user named admin is not the role


@pytest.mark.parametrize(
    ("actor", "assignee", "kind", "allowed"),
    [
        (Actor("alice"), "alice", "user", True),
        (Actor("bob"), "alice", "user", False),
        (Actor("alice", frozenset({"alice"})), "bob", "user", False),
        (Actor("alice", frozenset({"manager", "cfo"})), "manager", "role", True),
        (Actor("alice", frozenset({"cfo"})), "manager", "role", False),
        (Actor("manager"), "manager", "role", False),  # a user named like the role is no member
        (Actor("root", frozenset({"admin"})), "alice", "user", True),
        (Actor("root", frozenset({"admin"})), "manager", "role", True),
    ],
)
def test_who_may_complete(actor: Actor, assignee: str, kind: str, allowed: bool) -> None:
    assert actor.may_complete(assignee, kind) is allowed


def test_a_named_user_is_checked() -> None:
    assert checked_name(None) is None
    assert checked_name("alice") == "alice"
    for empty in ("", "  "):
        with pytest.raises(UsageError, match=r"^the user name is empty$"):
            checked_name(empty)
    with pytest.raises(UsageError) as refused:
        checked_name("al\ud800ice")
    assert str(refused.value) == (
        "the user name is text that is not valid Unicode (a lone surrogate \\ud800 at character 3)"
    )


# --- parsing ---------------------------------------------------------------------------------


def test_the_variable_form() -> None:
    table = parse(f" {ALICE}=alice:manager, cfo ; {BOB}=bob: ;{PADDED}=carol:admin;")
    assert table.actor_for_token(ALICE) == Actor("alice", frozenset({"manager", "cfo"}))
    assert table.actor_for_token(BOB) == Actor("bob", frozenset())
    assert table.actor_for_token(PADDED) == Actor("carol", frozenset({"admin"}))
    assert table.actor_for_token(PADDED[:-1]) is None
    assert table.actor_for_token("") is None
    assert table.actor_for_token("x\ud800") is None  # any text is looked up, none raises
    assert table.users() == ["alice", "bob", "carol"]
    assert len(table) == 3


def test_a_user_may_have_several_tokens_with_the_same_roles() -> None:
    table = parse(f"{ALICE}=alice:cfo,manager;{BOB}=alice:manager,cfo")
    assert (
        table.actor_for_token(BOB)
        == table.actor_for_token(ALICE)
        == Actor("alice", frozenset({"cfo", "manager"}))
    )
    assert table.users() == ["alice"]


def test_the_roles_of_a_user_by_name() -> None:
    table = parse(f"{ALICE}=alice:manager;{BOB}=bob:")
    assert table.actor_for_user("alice") == Actor("alice", frozenset({"manager"}))
    assert table.actor_for_user("bob") == Actor("bob", frozenset())
    assert table.actor_for_user("mallory") == Actor("mallory", frozenset())


def test_the_file_form(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(
        f"# who may do what\n\n{ALICE}=alice:manager\n   # indented comment\n{BOB}=bob:admin\n"
    )
    table = TokenTable.from_config(Config(api_tokens_file=str(path)))
    assert table is not None
    assert table.actor_for_token(BOB) == Actor("bob", frozenset({"admin"}))
    assert table.users() == ["alice", "bob"]
    assert table.source == f"{FILE} [{path}]"


def test_from_config_reads_the_settings(tmp_path: Path) -> None:
    assert TokenTable.from_config(Config()) is None
    table = TokenTable.from_config(Config.from_environ({VAR: f"{ALICE}=alice:x"}))
    assert table is not None and table.users() == ["alice"]
    path = tmp_path / "tokens"
    path.write_text(f"{ALICE}=alice:x\n")
    both = Config.from_environ({VAR: f"{ALICE}=alice:x", FILE: str(path)})
    with pytest.raises(ConfigError) as refused:
        TokenTable.from_config(both)
    assert str(refused.value) == (
        "set PROCFLOW_API_TOKENS or PROCFLOW_API_TOKENS_FILE, not both: they are one token table"
    )
    assert refused.value.setting == VAR


# --- refusals: each names the place, never the token -----------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("short-token=alice:x", "entry 1: the token is shorter than 24 characters; make a long "
         "random one (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"),
        (f"{ALICE}=alice:x;{'s' * 23}=bob:y", "entry 2: the token is shorter than 24 characters"),
        (f"{ALICE}=alice:x;{BOB}", "entry 2: expected token=user:role1,role2 (the roles may be "
         "empty)"),
        (f"{ALICE}:manager", "entry 1: expected token=user:role1,role2"),
        (f"={ALICE}:manager", "entry 1: expected token=user:role1,role2"),
        (f"{ALICE}= :manager", "entry 1: the user name is empty; expected token=user:"),
        (f"{ALICE} x=alice:m", "entry 1: the token has a character a bearer token cannot carry "
         "(use A-Z a-z 0-9 - . _ ~ + / and a trailing =)"),
        (f"{ALICE}é=alice:m", "entry 1: the token has a character a bearer token cannot carry"),
        (f"{ALICE}=alice:m;{ALICE}=bob:n", "entry 2: the token of user [bob] is the same as the "
         "one on entry 1; every token must be different"),
        (f"{ALICE}=alice:m;{BOB}=alice:m,n", "entry 2: user [alice] has roles [m, n] here but "
         "[m] on entry 1; give every token of a user the same roles"),
    ],
)  # fmt: skip
def test_a_bad_variable_is_refused_naming_the_entry(text: str, message: str) -> None:
    refused = refusal(text)
    assert str(refused).startswith(f"{VAR}, {message}")
    assert refused.setting == VAR
    for token in (ALICE, BOB, "short-token", "s" * 23):
        assert token not in str(refused)


@pytest.mark.parametrize("text", ["", ";", " ; ;", "# only a comment"])
def test_a_table_without_a_token_is_refused(text: str) -> None:
    assert str(refusal(text)) == (
        "PROCFLOW_API_TOKENS holds no token: give token=user:role1,role2 entries"
    )


def test_a_bad_file_is_refused_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    source = f"{FILE} [{path}]"
    path.write_text(f"# staff\n{ALICE}=alice:m\n\nbad-token-{'z' * 4}=bob:m\n")
    with pytest.raises(ConfigError) as refused:
        TokenTable.from_config(Config(api_tokens_file=str(path)))
    assert str(refused.value) == (
        f"{source}, line 4: the token is shorter than 24 characters; make a long random one "
        "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
    )
    assert refused.value.setting == FILE
    assert "bad-token" not in str(refused.value)
    two = refusal(f"{ALICE}=alice:m\n{BOB}=bob:m;{ALICE}=carol:m\n", source)
    assert str(two) == (
        f"{source}, line 2, entry 2: the token of user [carol] is the same as the one on line 1; "
        "every token must be different"
    )


def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError) as refused:
        TokenTable.from_config(Config(api_tokens_file=str(missing)))
    assert str(refused.value) == (f"{FILE} [{missing}] cannot be read: No such file or directory")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe" + ALICE.encode() + b"=alice:m")
    with pytest.raises(ConfigError) as refused:
        TokenTable.from_config(Config(api_tokens_file=str(binary)))
    assert str(refused.value) == f"{FILE} [{binary}] is not UTF-8 text"


# --- secrecy and constant time ---------------------------------------------------------------


def test_no_token_in_the_repr_or_str() -> None:
    table = parse(f"{ALICE}=alice:manager;{BOB}=bob:")
    for shown in (repr(table), str(table), f"{table}", repr(table._entries)):
        assert ALICE not in shown and BOB not in shown
        assert "a" * 24 not in shown
    assert repr(table) == "<TokenTable from PROCFLOW_API_TOKENS: 2 token(s) of alice, bob>"


def test_every_entry_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookup compares the presented token with every entry through hmac.compare_digest,
    and goes on after a match: the time taken says nothing about which entry matched."""
    table = parse(";".join(f"token-{n}-{'t' * 24}=user{n}:r" for n in range(5)))
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(identity.hmac, "compare_digest", counting)
    for presented, expected in [
        (f"token-0-{'t' * 24}", "user0"),  # the first entry matches: the rest are still compared
        (f"token-4-{'t' * 24}", "user4"),
        ("no-such-token-" + "t" * 24, None),
        ("x", None),  # a short one is compared too (its digest has the entries' length)
    ]:
        calls.clear()
        actor = table.actor_for_token(presented)
        assert (actor.user if actor else None) == expected
        assert len(calls) == len(table) == 5
        assert {len(a) for a, _ in calls} == {len(b) for _, b in calls} == {32}
