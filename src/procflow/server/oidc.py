"""OpenID Connect: bearer JWTs of the organisation's identity provider (Keycloak, Entra ID, Okta,
Google, Dex) name the caller, beside or instead of the token table.

With ``PROCFLOW_OIDC_ISSUER`` set, a bearer that has the shape of a JWT (three base64url parts
separated by dots) is verified here with PyJWT over ``cryptography`` - never hand-written
crypto: its signature by a key of the issuer's JWKS (``oidc_keys.py``), with a public-key
algorithm that key is for (never ``none`` or ``HS*``: an HS256 JWT "signed" with the public key
as its secret is refused before any key is looked at), ``iss`` equal to the issuer, ``aud``
holding ``PROCFLOW_OIDC_AUDIENCE``, ``exp`` (required) and ``nbf`` with :data:`LEEWAY_SECONDS` of
leeway. The user is the claim ``PROCFLOW_OIDC_USER_CLAIM`` (default ``preferred_username``, else
``sub``); the roles are the list of strings at ``PROCFLOW_OIDC_ROLES_CLAIM`` (default ``roles``;
a claim of that exact name, else a dotted path such as ``realm_access.roles``). A roles claim
that is absent gives no roles; one that is not a list of strings refuses the JWT, so a mistaken
setting shows at once instead of as users who may do nothing.

A refused JWT is a 401 problem naming the reason, never the token; keys that cannot be fetched
are a 503 (for JWTs only: a token of the table does not need them).

Settings are checked at start (a ``ConfigError``): an issuer without an audience is refused (any
JWT the issuer made for another application would be taken), as are OpenID Connect settings
without an issuer, an issuer or JWKS URL keys could not safely be fetched from, and a JWKS file
that cannot be read or holds no public signing key.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

import jwt

from procflow.config import Config, env_name
from procflow.errors import ConfigError, UsageError
from procflow.runtime.data.identity import Actor, checked_name
from procflow.server.oidc_keys import ASYMMETRIC, KeyCache, KeySource, SigningKey, url_problem
from procflow.server.problems import Problem

__all__ = ["LEEWAY_SECONDS", "Identity", "OidcSettings", "OidcVerifier", "looks_like_jwt"]

LEEWAY_SECONDS = 60  # clocks of the identity provider and this machine may differ this much
_ISSUER = env_name("PROCFLOW_OIDC_ISSUER")
_JWKS = env_name("PROCFLOW_OIDC_JWKS")
_AUDIENCE = env_name("PROCFLOW_OIDC_AUDIENCE")
_USER_CLAIM = env_name("PROCFLOW_OIDC_USER_CLAIM")
_ROLES_CLAIM = env_name("PROCFLOW_OIDC_ROLES_CLAIM")
_DEFAULT_USER_CLAIMS = ("preferred_username", "sub")
_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="procflow", error="invalid_token"'}
_SHOWN = 100  # the most characters of a claim's value a message shows


def looks_like_jwt(token: str) -> bool:
    """Three base64url parts separated by dots (the last, the signature, may be empty)."""
    return _JWT_SHAPE.fullmatch(token) is not None


@dataclass(frozen=True)
class Identity:
    """Who a bearer names, and until when it does (a JWT's ``exp``, seconds since the epoch;
    None for a token of the table, which does not expire)."""

    actor: Actor
    expires: float | None = None


@dataclass(frozen=True)
class OidcSettings:
    """The OpenID Connect settings, checked."""

    issuer: str
    audience: str
    jwks: str | None  # a URL or a file; None: the discovery document's jwks_uri
    user_claims: tuple[str, ...]  # tried in order
    roles_claim: str

    @classmethod
    def from_config(cls, config: Config) -> OidcSettings | None:
        """The settings, or None when no issuer is set (and no other OIDC setting either)."""
        if config.oidc_issuer is None:
            _refuse_without_issuer(config)
            return None
        issuer = config.oidc_issuer
        if config.oidc_audience is None:
            raise ConfigError(
                f"{_ISSUER} is set but {_AUDIENCE} is not: without it a JWT the issuer made "
                "for any other application would be taken; set it to procflow's client id",
                setting=_AUDIENCE,
            )
        if config.oidc_jwks is None:
            _check_url(issuer, _ISSUER, "its discovery document")
        elif config.oidc_jwks.lower().startswith(("http://", "https://")):
            _check_url(config.oidc_jwks, _JWKS, "the keys")
        user_claim = config.oidc_user_claim
        roles_claim = config.oidc_roles_claim or "roles"
        for name, claim in ((_USER_CLAIM, user_claim), (_ROLES_CLAIM, roles_claim)):
            if claim is not None and not all(claim.split(".")):
                raise ConfigError(
                    f"{name} [{claim}] is not a claim name or a dotted path of them",
                    setting=name,
                )
        users = (user_claim,) if user_claim is not None else _DEFAULT_USER_CLAIMS
        return cls(issuer, config.oidc_audience, config.oidc_jwks, users, roles_claim)


def _refuse_without_issuer(config: Config) -> None:
    stray = {
        _JWKS: config.oidc_jwks,
        _AUDIENCE: config.oidc_audience,
        _USER_CLAIM: config.oidc_user_claim,
        _ROLES_CLAIM: config.oidc_roles_claim,
    }
    for name, value in stray.items():
        if value is not None:
            raise ConfigError(
                f"{name} is set but {_ISSUER} is not: set the issuer whose JWTs to take",
                setting=name,
            )


def _check_url(url: str, setting: str, what: str) -> None:
    problem = url_problem(url)
    if problem is not None:
        raise ConfigError(
            f"{setting} [{url}] {problem} (procflow fetches {what} from it)", setting=setting
        )


class OidcVerifier:
    """Verifies bearer JWTs of one issuer. :meth:`verify` never fetches keys; a caller on the
    event loop asks :meth:`needs_keys` and runs :meth:`fetch_keys` on a thread first."""

    def __init__(self, settings: OidcSettings, keys: KeyCache) -> None:
        self.settings = settings
        self.keys = keys

    @classmethod
    def from_config(
        cls, config: Config, clock: Callable[[], float] = time.monotonic
    ) -> OidcVerifier | None:
        """The verifier the settings give (None without an issuer); a JWKS file is read now."""
        settings = OidcSettings.from_config(config)
        if settings is None:
            return None
        source = KeySource(issuer=settings.issuer, jwks=settings.jwks)
        keys = None
        if source.file is not None:
            try:
                keys = source.fetch()
            except ValueError as exc:
                raise ConfigError(f"{_JWKS}: {exc}", setting=_JWKS) from None
        return cls(settings, KeyCache(source, keys, clock))

    def needs_keys(self, token: str) -> bool:
        """Whether verifying ``token`` should fetch the issuer's keys first."""
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            return False  # verify() refuses it without any key
        return self.keys.needs_fetch(kid)

    def fetch_keys(self, token: str) -> None:
        """Fetches the keys when ``token`` needs it (blocks: not on the event loop)."""
        if self.needs_keys(token):
            self.keys.fetch_for(jwt.get_unverified_header(token).get("kid"))

    def verify(self, token: str) -> Identity:
        """The user and roles a valid JWT names, until its ``exp``; a 401 problem naming the
        reason when it is not valid, a 503 when the keys it needs could not be fetched."""
        header = _header(token)
        key = self._key(header)
        claims = self._claims(token, key)
        user = self._user(claims)
        return Identity(Actor(user, self._roles(claims)), _seconds(claims["exp"]))

    def _key(self, header: dict[str, Any]) -> SigningKey:
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str):
            raise _refused("the JWT's header names no algorithm (alg) as text")
        if alg.lower() == "none":
            raise _refused("the JWT is not signed (alg [none])")
        if alg not in ASYMMETRIC:
            raise _refused(
                f"the JWT is signed with [{_shown(alg)}]: only public-key algorithms are "
                "accepted (RS*, PS*, ES*, EdDSA), never a shared secret"
            )
        key = self.keys.find(kid)
        if key is None:
            self._no_key(kid)
        if alg not in key.algorithms:
            raise _refused(
                f"the JWT's algorithm [{alg}] is not one the issuer's key [{kid}] is for "
                f"({', '.join(key.algorithms)})"
            )
        return key

    def _no_key(self, kid: str | None) -> NoReturn:
        if self.keys.failure is not None:
            raise Problem(
                503,
                f"the identity provider's keys cannot be fetched: {self.keys.failure}; JWTs "
                "cannot be checked until they can",
                headers={"Retry-After": str(self.keys.retry_after())},
            )
        if kid is None:
            raise _refused(f"the JWT names no key (kid), and the issuer has {self.keys.count}")
        raise _refused(f"the JWT is signed by a key [{_shown(kid)}] the issuer does not have")

    def _claims(self, token: str, key: SigningKey) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.public_key,
                algorithms=list(key.algorithms),
                audience=self.settings.audience,
                issuer=self.settings.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise _refused(self._reason(exc, token, key)) from None
        return claims

    def _reason(self, exc: jwt.PyJWTError, token: str, key: SigningKey) -> str:
        """What is wrong with a JWT PyJWT refused, in a sentence (PyJWT checks the signature
        before the claims, so a claim named here is the issuer's)."""
        claims = _unverified_claims(token)
        if isinstance(exc, jwt.InvalidSignatureError):
            return f"the JWT's signature does not verify with the issuer's key [{key.kid}]"
        if isinstance(exc, jwt.ExpiredSignatureError):
            return f"the JWT expired at {_time(claims.get('exp'))}, over {LEEWAY_SECONDS} s ago"
        if isinstance(exc, jwt.ImmatureSignatureError):
            if "nbf" in str(exc):
                return f"the JWT is not valid before {_time(claims.get('nbf'))}"
            return f"the JWT was issued in the future, at {_time(claims.get('iat'))}"
        if isinstance(exc, jwt.InvalidAudienceError):
            return (
                f"the JWT is not meant for this server: its audience "
                f"[{_shown(claims.get('aud'))}] does not hold [{self.settings.audience}]"
            )
        if isinstance(exc, jwt.InvalidIssuerError):
            return (
                f"the JWT was issued by [{_shown(claims.get('iss'))}], not by "
                f"[{self.settings.issuer}]"
            )
        if isinstance(exc, jwt.MissingRequiredClaimError):
            return f"the JWT has no [{exc.claim}] claim"
        if isinstance(exc, jwt.DecodeError):
            return f"the JWT cannot be read: {exc}"
        return f"the JWT is not valid: {exc}"

    def _user(self, claims: dict[str, Any]) -> str:
        for name in self.settings.user_claims:
            value = _claim(claims, name)
            if value is None:
                continue
            if not isinstance(value, str):
                raise _refused(f"the JWT's [{name}] claim is not text, so it names no user")
            try:
                checked_name(value)
            except UsageError as exc:
                raise _refused(f"the JWT's [{name}] claim names no user: {exc}") from None
            return value
        named = " or ".join(f"[{n}]" for n in self.settings.user_claims)
        raise _refused(f"the JWT has no {named} claim to name its user")

    def _roles(self, claims: dict[str, Any]) -> frozenset[str]:
        name = self.settings.roles_claim
        value = _claim(claims, name)
        if value is None:
            return frozenset()
        if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
            raise _refused(f"the JWT's [{name}] claim is not a list of strings")
        return frozenset(value)


def _header(token: str) -> dict[str, Any]:
    try:
        return jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise _refused(
            "the bearer token has the shape of a JWT but its header is not base64url-encoded "
            "JSON with a text kid"
        ) from None


# What a dotted claim path that runs into something other than an object gives: neither text
# nor a list, so the claim is refused as malformed rather than taken as missing.
_MALFORMED = object()


def _claim(claims: dict[str, Any], name: str) -> Any:
    """The claim ``name``, or else the value at its dotted path; None when absent."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, dict):
            return _MALFORMED
        value = value.get(part)
        if value is None:
            return None
    return value


def _unverified_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT PyJWT refused: only to word the refusal."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return {}
    return claims if isinstance(claims, dict) else {}


def _seconds(exp: Any) -> float:
    """``exp`` (which PyJWT found to be a whole number) as a float; one too large for a float
    (a JWT valid for ever, in effect) as infinity."""
    try:
        return float(exp)
    except OverflowError:
        return math.inf


def _time(value: Any) -> str:
    try:
        return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError, OverflowError, OSError):
        return f"[{_shown(value)}]"


def _shown(value: Any) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _refused(reason: str) -> Problem:
    return Problem(401, reason, headers=dict(_CHALLENGE))
