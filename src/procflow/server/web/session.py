"""Who is signed in to the web UI, and the CSRF token of their forms.

With a token table or an OpenID Connect issuer, ``/ui/login`` takes an API token or a JWT and,
when it is valid, sets a session cookie. The cookie never carries the token: it holds the user's
name and roles (as the table or the JWT's claims gave them) and when the session ends, signed
with HMAC-SHA256 under a key drawn at random when the process starts (a restart signs everyone
out; nothing is stored server-side). A session of a JWT ends no later than the JWT does.

Behind an authenticating proxy that forwards ``Authorization: Bearer <JWT or token>`` on every
request, the bearer itself says who the caller is: no login page, no cookie.

Every form carries a CSRF token: the HMAC, under the same key, of what the session is bound to -
the session cookie's value, or for a forwarded bearer the user's name (the bearer changes each
time the proxy refreshes it, and a page's forms must outlive that), or without any identity a
fixed name. It needs no storage, a page of another site cannot know it, and it is compared in
constant time on every POST.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from procflow.runtime.data.identity import Actor

__all__ = ["COOKIE", "MAX_COOKIE_CHARS", "SESSION_SECONDS", "Session", "Signer"]

COOKIE = "procflow_session"
SESSION_SECONDS = 12 * 3600  # a session lasts a working day
MAX_COOKIE_CHARS = 4000  # browsers drop a cookie over 4096 bytes, name and attributes included
_NO_IDENTITY = "local"  # the CSRF subject without a token table or an issuer (no sessions)
_FORWARDED = "bearer\n"  # the CSRF subject of a forwarded bearer: this, then the user's name


@dataclass(frozen=True)
class Session:
    """A signed-in caller: who, the cookie value that says so ("" when none: no identity is
    configured, or a proxy forwards a bearer), its forms' CSRF token, and what that token is
    bound to."""

    actor: Actor
    cookie: str
    csrf: str
    subject: str = ""

    @property
    def forwarded(self) -> bool:
        """Signed in by a bearer an authenticating proxy forwards."""
        return self.subject.startswith(_FORWARDED)


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

    def issue(self, actor: Actor, until: float | None = None, now: float | None = None) -> str:
        """The cookie value for ``actor``: ``base64(JSON [user, roles]).expiry.mac``, ending
        :data:`SESSION_SECONDS` from now, or at ``until`` (a JWT's ``exp``) when that is
        sooner."""
        now = time.time() if now is None else now
        ends = int(now + SESSION_SECONDS if until is None else min(now + SESSION_SECONDS, until))
        who = json.dumps([actor.user, sorted(actor.roles)], ensure_ascii=False)
        name = base64.urlsafe_b64encode(who.encode()).decode("ascii").rstrip("=")
        body = f"{name}.{ends}"
        return f"{body}.{self._mac('session', body)}"

    @staticmethod
    def ends(cookie: str) -> int:
        """When a cookie value :meth:`issue` made ends (seconds since the epoch)."""
        return int(cookie.split(".")[1])

    def actor_of(self, cookie: str, now: float | None = None) -> Actor | None:
        """Who a cookie value names, or None when it is forged, malformed or expired."""
        parts = cookie.split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        body = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(self._mac("session", body).encode(), parts[2].encode()):
            return None
        if int(parts[1]) < (time.time() if now is None else now):
            return None
        try:
            text = base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)).decode()
            user, roles = json.loads(text)
        except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
            return None
        return Actor(str(user), frozenset(map(str, roles)))

    def session_of(self, cookie: str | None) -> Session | None:
        """The session a request's cookie holds, with the roles it was signed in with."""
        actor = self.actor_of(cookie) if cookie else None
        if actor is None or cookie is None:
            return None
        return Session(actor, cookie, self.csrf_for(cookie), cookie)

    def forwarded_session(self, actor: Actor) -> Session:
        """The session of a bearer an authenticating proxy forwards: no cookie."""
        subject = f"{_FORWARDED}{actor.user}"
        return Session(actor, "", self.csrf_for(subject), subject)

    def local_session(self, actor: Actor) -> Session:
        """Without a token table or an issuer every caller is ``actor``; forms still carry a
        CSRF token."""
        return Session(actor, "", self.csrf_for(_NO_IDENTITY), _NO_IDENTITY)

    def csrf_subject(self, session: Session) -> str:
        return session.subject
