"""Who is signed in to the web UI, and the CSRF token of their forms.

With a token table, ``/ui/login`` takes an API token and, when the table holds it, sets a
session cookie. The cookie never carries the token: it holds the user's name and when the
session ends, signed with HMAC-SHA256 under a key drawn at random when the process starts (a
restart signs everyone out; nothing is stored server-side). The user's roles are looked up in
the token table on every request, so they are always the table's.

Every form carries a CSRF token: the HMAC of the session value under the same key (without a
token table, of a fixed name), so it is per session, needs no storage, and a page of another
site cannot know it. It is compared in constant time on every POST.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from procflow.runtime.data.identity import Actor, TokenTable

__all__ = ["COOKIE", "SESSION_SECONDS", "Session", "Signer"]

COOKIE = "procflow_session"
SESSION_SECONDS = 12 * 3600  # a session lasts a working day
_NO_TABLE = "local"  # the CSRF subject when there is no token table (no sessions)


@dataclass(frozen=True)
class Session:
    """A signed-in caller: who, the cookie value that says so, and its forms' CSRF token."""

    actor: Actor
    cookie: str
    csrf: str


class Signer:
    """Signs and checks session cookies and CSRF tokens with one per-process key."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def _mac(self, purpose: str, text: str) -> str:
        digest = hmac.new(self._key, f"{purpose}\n{text}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def csrf_for(self, subject: str) -> str:
        return self._mac("csrf", subject)

    def csrf_ok(self, subject: str, presented: str) -> bool:
        return hmac.compare_digest(self.csrf_for(subject).encode(), presented.encode())

    def issue(self, user: str, now: float | None = None) -> str:
        """The cookie value for ``user``: ``base64(user).expiry.mac``."""
        until = int((time.time() if now is None else now) + SESSION_SECONDS)
        name = base64.urlsafe_b64encode(user.encode()).decode("ascii").rstrip("=")
        body = f"{name}.{until}"
        return f"{body}.{self._mac('session', body)}"

    def user_of(self, cookie: str, now: float | None = None) -> str | None:
        """The user a cookie value names, or None when it is forged, malformed or expired."""
        parts = cookie.split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        body = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(self._mac("session", body).encode(), parts[2].encode()):
            return None
        if int(parts[1]) < (time.time() if now is None else now):
            return None
        try:
            return base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None

    def session_of(self, cookie: str | None, tokens: TokenTable) -> Session | None:
        """The session a request's cookie holds, with the roles the table gives its user."""
        user = self.user_of(cookie) if cookie else None
        if user is None or cookie is None:
            return None
        return Session(tokens.actor_for_user(user), cookie, self.csrf_for(cookie))

    def local_session(self, actor: Actor) -> Session:
        """Without a token table every caller is ``actor``; forms still carry a CSRF token."""
        return Session(actor, "", self.csrf_for(_NO_TABLE))

    def csrf_subject(self, session: Session) -> str:
        return session.cookie or _NO_TABLE
