"""Who acts: users, their roles, and the API tokens that name them.

The token table (``PROCFLOW_API_TOKENS``, or ``PROCFLOW_API_TOKENS_FILE``) maps each bearer token
to a user and that user's roles, and is the one place role membership comes from: the HTTP face
finds the caller by token, the CLI's ``--as NAME`` and the Python API's ``user="NAME"`` take the
roles the table gives NAME (none when NAME is not listed). The role ``admin`` makes an
administrator. Without a user, the CLI and the Python API act as :data:`ADMINISTRATOR`.

Tokens are secrets: the table keeps only their SHA-256 digests, compares a presented token with
every entry in constant time, and no message or ``repr`` ever shows one. A table with a token
shorter than :data:`MIN_TOKEN_LENGTH` characters, a malformed entry, a token given twice, or a user
given different roles on two entries is refused when it is read (a ``ConfigError`` naming the
entry's line, never its token).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from procflow.config import Config, env_name
from procflow.errors import ConfigError, UsageError
from procflow.runtime.data.user_json import text_problem

__all__ = [
    "ADMINISTRATOR",
    "ADMIN_ROLE",
    "MIN_TOKEN_LENGTH",
    "Actor",
    "TokenTable",
    "checked_name",
]

ADMIN_ROLE = "admin"
MIN_TOKEN_LENGTH = 24
_TOKENS = env_name("PROCFLOW_API_TOKENS")
_TOKENS_FILE = env_name("PROCFLOW_API_TOKENS_FILE")
# What RFC 6750 lets a Bearer header carry (b64token): a token outside it could not be sent.
_BEARER = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_SHAPE = "expected token=user:role1,role2 (the roles may be empty)"


@dataclass(frozen=True)
class Actor:
    """Who makes a request: a user name and the roles the token table gives it."""

    user: str
    roles: frozenset[str] = frozenset()

    @property
    def is_admin(self) -> bool:
        return ADMIN_ROLE in self.roles

    def may_complete(self, assignee: str, assignee_kind: str) -> bool:
        """The rule every face applies to completing a task: its assigned user, a member of its
        assigned role, or an administrator (``assignee_kind`` is ``user`` or ``role``)."""
        if self.is_admin:
            return True
        if assignee_kind == "user":
            return assignee == self.user
        return assignee in self.roles


# What the CLI without --as and the Python API without user= act as; its name is the history's
# `by` for what it does.
ADMINISTRATOR = Actor("administrator", frozenset({ADMIN_ROLE}))


def checked_name(user: str | None) -> str | None:
    """A user name given to record who did something (None: none given), refused when it is
    empty or not valid Unicode text (it could not be stored or printed)."""
    if user is None:
        return None
    if not user.strip():
        raise UsageError("the user name is empty")
    problem = text_problem(user)
    if problem is not None:
        raise UsageError(f"the user name is text that is not valid Unicode ({problem})")
    return user


@dataclass(frozen=True)
class _Entry:
    digest: bytes
    actor: Actor
    where: str  # "line 3" or "entry 2": where the table gives it


class TokenTable:
    """The parsed token table. Build it with :meth:`from_config` or :meth:`parse`."""

    __slots__ = ("_entries", "_roles", "source")

    def __init__(self, entries: list[_Entry], source: str) -> None:
        self._entries = tuple(entries)
        self._roles = {e.actor.user: e.actor.roles for e in entries}
        self.source = source

    @classmethod
    def from_config(cls, config: Config) -> TokenTable | None:
        """The table the settings give; None when neither variable is set."""
        if config.api_tokens is not None and config.api_tokens_file is not None:
            raise ConfigError(
                f"set {_TOKENS} or {_TOKENS_FILE}, not both: they are one token table",
                setting=_TOKENS,
            )
        if config.api_tokens is not None:
            return cls.parse(config.api_tokens, source=_TOKENS)
        if config.api_tokens_file is not None:
            path = config.api_tokens_file
            return cls.parse(_read(path), source=f"{_TOKENS_FILE} [{path}]")
        return None

    @classmethod
    def parse(cls, text: str, *, source: str) -> TokenTable:
        """``token=user:role1,role2`` entries, one a line or separated by ``;``; blank lines
        and lines starting with ``#`` are skipped. ``source`` names the text in messages."""
        entries: list[_Entry] = []
        seen: dict[bytes, _Entry] = {}
        for where, item in _items(text):
            entry = _entry(item, source, where)
            first = seen.get(entry.digest)
            if first is not None:
                raise ConfigError(
                    f"{source}, {where}: the token of user [{entry.actor.user}] is the same as "
                    f"the one on {first.where}; every token must be different",
                    setting=_setting(source),
                )
            _check_same_roles(entries, entry, source)
            seen[entry.digest] = entry
            entries.append(entry)
        if not entries:
            raise ConfigError(
                f"{source} holds no token: give token=user:role1,role2 entries",
                setting=_setting(source),
            )
        return cls(entries, source)

    def actor_for_token(self, token: str) -> Actor | None:
        """The user a presented token names, or None. Every entry is compared, in constant
        time, whether or not an earlier one matched: how long this takes says nothing about
        which token, or how much of one, is right."""
        presented = _digest(token)
        found: Actor | None = None
        for entry in self._entries:
            if hmac.compare_digest(entry.digest, presented):
                found = entry.actor
        return found

    def actor_for_user(self, name: str) -> Actor:
        """``name`` with the roles the table gives it (none when it is not listed)."""
        return Actor(name, self._roles.get(name, frozenset()))

    def users(self) -> list[str]:
        """The users the table names, sorted."""
        return sorted(self._roles)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:  # never the tokens: only how many, and whose
        return f"<TokenTable from {self.source}: {len(self)} token(s) of {', '.join(self.users())}>"

    __str__ = __repr__


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(
            f"{_TOKENS_FILE} [{path}] is not UTF-8 text", setting=_TOKENS_FILE
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"{_TOKENS_FILE} [{path}] cannot be read: {exc.strerror or exc}", setting=_TOKENS_FILE
        ) from None


def _items(text: str) -> Iterator[tuple[str, str]]:
    """(where, entry text) for each entry: ``line N`` when the text has several lines (a
    file), ``entry N`` when it is one line of ``;``-separated entries (the variable), both
    when a line of a file holds several."""
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p for p in line.split(";") if p.strip()]
        for index, part in enumerate(parts, 1):
            if len(lines) == 1:
                where = f"entry {index}"
            else:
                where = f"line {number}" + (f", entry {index}" if len(parts) > 1 else "")
            yield where, part.strip()


def _entry(item: str, source: str, where: str) -> _Entry:
    """One ``token=user:roles`` entry. A token may end in ``=`` (base64 padding), so the user
    follows the last ``=`` before the last ``:``; names and roles hold neither."""
    head, colon, roles_text = item.rpartition(":")
    token, equals, user = head.rpartition("=")
    setting, at = _setting(source), f"{source}, {where}"
    if not colon or not equals or not token:
        raise ConfigError(f"{at}: {_SHAPE}", setting=setting)
    user = user.strip()
    if not user:
        raise ConfigError(f"{at}: the user name is empty; {_SHAPE}", setting=setting)
    token = token.strip()
    if not _BEARER.fullmatch(token):
        raise ConfigError(
            f"{at}: the token has a character a bearer token cannot carry "
            "(use A-Z a-z 0-9 - . _ ~ + / and a trailing =)",
            setting=setting,
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"{at}: the token is shorter than {MIN_TOKEN_LENGTH} characters; "
            "make a long random one (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')",
            setting=setting,
        )
    roles = frozenset(r.strip() for r in roles_text.split(",") if r.strip())
    return _Entry(_digest(token), Actor(user, roles), where)


def _check_same_roles(entries: list[_Entry], entry: _Entry, source: str) -> None:
    """A user's roles are the user's, not a token's: every token of one user gives the same."""
    user = entry.actor.user
    for other in entries:
        if other.actor.user == user and other.actor.roles != entry.actor.roles:
            raise ConfigError(
                f"{source}, {entry.where}: user [{user}] has roles [{_roles(entry.actor)}] here "
                f"but [{_roles(other.actor)}] on {other.where}; give every token of a user the "
                "same roles",
                setting=_setting(source),
            )


def _roles(actor: Actor) -> str:
    return ", ".join(sorted(actor.roles))


def _setting(source: str) -> str:
    return _TOKENS_FILE if source.startswith(_TOKENS_FILE) else _TOKENS


def _digest(token: str) -> bytes:
    # Any presented text hashes (a lone surrogate included): the digest has one length, so
    # compare_digest's time does not even depend on the presented token's length.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
