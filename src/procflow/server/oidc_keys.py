"""The OpenID Connect issuer's signing keys: where they are read (a JWKS file, a JWKS URL, or the
``jwks_uri`` of the issuer's discovery document), and the cache that holds them.

Keys are fetched when a JWT needs them: the first time, again when a JWT names a key (``kid``) the
cache does not hold (the issuer rotated its keys), and again once the cache is older than
:data:`MAX_AGE_SECONDS` (so a key the issuer withdrew stops being accepted). Whatever the reason,
the keys are fetched at most once every :data:`REFETCH_SECONDS`, so a stream of JWTs naming
made-up keys cannot make procflow hammer the identity provider. A fetch that fails keeps the keys
already held; the failure is what a JWT the held keys cannot check is answered with (a 503).

Only public signing keys are kept: RSA, EC (P-256, P-384, P-521) and OKP (Ed25519, Ed448) keys
whose ``use`` is ``sig`` (or unset), each with the algorithms it may verify. A symmetric (``oct``)
key, a private key, or a key marked for encryption is skipped: a JWKS is public, and a shared
secret published there would let anyone sign. Keys are read over HTTPS, or plain HTTP to a
loopback address only (a test, a local identity provider): keys fetched over plain HTTP from
another machine could be replaced on the way.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from jwt import PyJWK, PyJWTError

__all__ = [
    "ASYMMETRIC",
    "MAX_AGE_SECONDS",
    "REFETCH_SECONDS",
    "KeyCache",
    "KeySource",
    "SigningKey",
    "is_loopback",
    "signing_keys",
    "url_problem",
]

log = logging.getLogger("procflow.server")

REFETCH_SECONDS = 60.0  # the least time between two fetches of the keys
MAX_AGE_SECONDS = 300.0  # keys older than this are fetched again when a JWT comes
FETCH_TIMEOUT_SECONDS = 5.0
MAX_DOCUMENT_BYTES = 1024 * 1024  # a JWKS or discovery document is a few kilobytes

_RSA: tuple[str, ...] = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC: dict[str, tuple[str, ...]] = {"P-256": ("ES256",), "P-384": ("ES384",), "P-521": ("ES512",)}
_OKP: dict[str, tuple[str, ...]] = {"Ed25519": ("EdDSA",), "Ed448": ("EdDSA",)}
# Every algorithm a JWT may be signed with: public-key ones only, never none or HS*.
ASYMMETRIC = frozenset((*_RSA, "ES256", "ES384", "ES512", "EdDSA"))
_PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "k")

Keys = Mapping[str | None, "SigningKey"]  # by kid (None: a key without one)


@dataclass(frozen=True)
class SigningKey:
    """One public key of the issuer and the algorithms a JWT signed with it may name (from its
    type and curve, or its ``alg`` when the JWKS gives one) - never from the JWT itself."""

    kid: str | None
    public_key: Any  # a cryptography public key object
    algorithms: tuple[str, ...]


def signing_keys(document: Any, where: str) -> dict[str | None, SigningKey]:
    """The public signing keys of a JWKS document; ``ValueError`` naming ``where`` when it is not
    a JWKS or holds none."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError(f"{where} is not a JWKS (a JSON object with a [keys] list)")
    found: dict[str | None, SigningKey] = {}
    for jwk in document["keys"]:
        key = _signing_key(jwk)
        if key is not None:
            found.setdefault(key.kid, key)
    if not found:
        raise ValueError(
            f"{where} holds no public signing key (RSA, EC or OKP, with use [sig] or none)"
        )
    return found


def _signing_key(jwk: Any) -> SigningKey | None:
    if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
        return None
    if any(member in jwk for member in _PRIVATE_MEMBERS):
        return None  # a private or shared-secret key has no place in a published key set
    algorithms = _algorithms_of(jwk)
    if not algorithms:
        return None
    try:
        parsed = PyJWK(jwk, algorithm=algorithms[0])
    except PyJWTError:
        return None
    kid = jwk.get("kid")
    return SigningKey(kid if isinstance(kid, str) else None, parsed.key, algorithms)


def _algorithms_of(jwk: Mapping[str, Any]) -> tuple[str, ...]:
    kty, crv, alg = jwk.get("kty"), jwk.get("crv"), jwk.get("alg")
    if kty == "RSA":
        fits = _RSA
    elif kty == "EC" and isinstance(crv, str):
        fits = _EC.get(crv, ())
    elif kty == "OKP" and isinstance(crv, str):
        fits = _OKP.get(crv, ())
    else:
        fits = ()
    if alg is not None:
        return (alg,) if alg in fits else ()
    return fits


def is_loopback(host: str) -> bool:
    """A host name or address that never leaves this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_problem(url: str) -> str | None:
    """Why keys may not be fetched from ``url``, or None when they may."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "is not an http(s) URL"
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        return (
            "is plain HTTP to another machine: keys fetched over it could be replaced on the "
            "way; use https"
        )
    return None


class KeySource:
    """Where the keys are read: a JWKS file, a JWKS URL, or (neither given) the issuer's
    discovery document, whose ``jwks_uri`` is remembered once read."""

    def __init__(self, *, issuer: str, jwks: str | None) -> None:
        self.issuer = issuer
        self.file = jwks if jwks is not None and not _is_url(jwks) else None
        self.url = jwks if jwks is not None and _is_url(jwks) else None
        self.discovery = f"{issuer.rstrip('/')}/.well-known/openid-configuration"

    def __str__(self) -> str:
        if self.file is not None:
            return f"the JWKS file [{self.file}]"
        return f"[{self.url or self.discovery}]"

    def fetch(self) -> dict[str | None, SigningKey]:
        """The keys as the source holds them now; ``ValueError`` saying where and why when they
        cannot be had."""
        if self.file is not None:
            where = f"the JWKS file [{self.file}]"
            try:
                text = Path(self.file).read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"{where} cannot be read: {exc.strerror or exc}") from None
            return signing_keys(_json(text, where), where)
        if self.url is None:
            self.url = self._discovered_jwks_uri()
        return signing_keys(_get_json(self.url), f"[{self.url}]")

    def _discovered_jwks_uri(self) -> str:
        document = _get_json(self.discovery)
        where = f"the discovery document [{self.discovery}]"
        if not isinstance(document, dict):
            raise ValueError(f"{where} is not a JSON object")
        if document.get("issuer") != self.issuer:
            raise ValueError(
                f"{where} names the issuer [{document.get('issuer')}], not [{self.issuer}]"
            )
        uri = document.get("jwks_uri")
        if not isinstance(uri, str):
            raise ValueError(f"{where} has no jwks_uri")
        problem = url_problem(uri)
        if problem is not None:
            raise ValueError(f"{where}: its jwks_uri [{uri}] {problem}")
        return uri


def _is_url(text: str) -> bool:
    return text.lower().startswith(("http://", "https://"))


def _get_json(url: str) -> Any:
    try:
        answer = httpx.get(
            url, timeout=FETCH_TIMEOUT_SECONDS, headers={"Accept": "application/json"}
        )
    except httpx.HTTPError as exc:
        raise ValueError(f"[{url}] cannot be reached: {str(exc) or type(exc).__name__}") from None
    if answer.status_code != 200:
        raise ValueError(f"[{url}] answered {answer.status_code}")
    if len(answer.content) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"[{url}] answered more than {MAX_DOCUMENT_BYTES} bytes")
    return _json(answer.text, f"the answer of [{url}]")


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"{where} is not JSON") from None


class KeyCache:
    """The keys last fetched from a :class:`KeySource`, and when to fetch them again.

    ``clock`` is a monotonic clock in seconds (tests pass their own, so the once-a-minute rule
    needs no sleeping). :meth:`find` never fetches; :meth:`needs_fetch` says whether a JWT
    naming ``kid`` should make :meth:`fetch_for` run first (which blocks: call it off the event
    loop)."""

    def __init__(
        self,
        source: KeySource,
        keys: Keys | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.clock = clock
        self._keys: Keys = dict(keys or {})
        # When the keys held were fetched, and when a fetch was last tried (None: never).
        self._fetched_at: float | None = clock() if keys is not None else None
        self._tried_at = self._fetched_at
        self.failure: str | None = None  # why the last fetch failed; None when it did not
        self._lock = threading.Lock()

    def find(self, kid: str | None) -> SigningKey | None:
        """The key a JWT names; a JWT naming none may use the only key of a one-key set."""
        keys = self._keys
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        return keys.get(kid)

    @property
    def count(self) -> int:
        return len(self._keys)

    def needs_fetch(self, kid: str | None) -> bool:
        now = self.clock()
        if self._tried_at is not None and now - self._tried_at < REFETCH_SECONDS:
            return False
        if self._fetched_at is None or now - self._fetched_at >= MAX_AGE_SECONDS:
            return True
        return self.find(kid) is None

    def fetch_for(self, kid: str | None) -> None:
        """Fetches the keys when a JWT naming ``kid`` needs it (once, however many threads
        ask at the same time). A failure is kept in :attr:`failure` and logged."""
        with self._lock:
            if not self.needs_fetch(kid):
                return
            self._tried_at = self.clock()
            try:
                keys = self.source.fetch()
            except ValueError as exc:
                self.failure = str(exc)
                log.warning("the issuer's keys cannot be fetched: %s", exc)
                return
            self._keys, self._fetched_at, self.failure = keys, self._tried_at, None
            log.info("fetched %d signing key(s) of the issuer from %s", len(keys), self.source)

    def retry_after(self) -> int:
        """Whole seconds until the next fetch may be tried."""
        if self._tried_at is None:
            return 0
        return max(1, int(REFETCH_SECONDS - (self.clock() - self._tried_at) + 0.999))
