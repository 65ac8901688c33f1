"""A test identity provider: an OpenID Connect issuer on a real local socket.

:class:`Provider` makes its keys at test time (an RSA and an EC key), serves its discovery
document and its JWKS over HTTP from a stdlib ``http.server`` on a thread (127.0.0.1, a free
port), counts the requests for each, and signs JWTs with its keys. ``rotate()`` replaces its
keys by a new one with a new ``kid``; ``failing`` makes it answer an error instead. The forgeries
a verifier must refuse (unsigned, HS256 with the public key as the secret, a foreign key) are
made here too.

The ``provider`` fixture starts one for a test and stops it afterwards.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

AUDIENCE = "procflow"
REALM = "/realms/test"
DISCOVERY = f"{REALM}/.well-known/openid-configuration"
CERTS = f"{REALM}/protocol/openid-connect/certs"


@dataclass(frozen=True)
class Key:
    """A signing key of an issuer: its kid, its private key and the algorithm it signs with."""

    kid: str
    private: Any
    alg: str

    def jwk(self) -> dict[str, Any]:
        """The public key as a JWK (what a JWKS publishes)."""
        algorithm = RSAAlgorithm if self.alg.startswith(("RS", "PS")) else ECAlgorithm
        found = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**found, "kid": self.kid, "use": "sig"}

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def sign(self, claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
        return jwt.encode(
            claims, self.private, self.alg, headers={"kid": self.kid, **(header or {})}
        )


@functools.cache
def _rsa(name: str) -> rsa.RSAPrivateKey:
    """The RSA key of ``name``, made once per test session (a 2048-bit key takes a while)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def rsa_key(kid: str, alg: str = "RS256") -> Key:
    return Key(kid, _rsa(kid), alg)


def ec_key(kid: str) -> Key:
    return Key(kid, ec.generate_private_key(ec.SECP256R1()), "ES256")


class Provider:
    """An issuer serving its discovery document and JWKS; see the module's docstring."""

    def __init__(self) -> None:
        self.keys = [rsa_key("rsa-1"), ec_key("ec-1")]
        self.requests: Counter[str] = Counter()  # path -> how many GETs it answered
        self.failing: int | None = None  # a status to answer every request with
        self._rotations = 1
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider.requests[self.path] += 1
                status, body = provider.answer(self.path)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep the test output clean

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.issuer = f"{self.base}{REALM}"
        self.jwks_url = f"{self.base}{CERTS}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def answer(self, path: str) -> tuple[int, Any]:
        if self.failing is not None:
            return self.failing, {"error": "unavailable"}
        if path == DISCOVERY:
            return 200, {"issuer": self.issuer, "jwks_uri": self.jwks_url}
        if path == CERTS:
            return 200, self.jwks()
        return 404, {"error": "not found"}

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.jwk() for key in self.keys]}

    def jwks_file(self, folder: Path) -> str:
        path = folder / "jwks.json"
        path.write_text(json.dumps(self.jwks()))
        return str(path)

    @property
    def key_fetches(self) -> int:
        return self.requests[CERTS]

    def settings(self, **more: str) -> dict[str, str]:
        """The environment of a procflow server taking this issuer's JWTs (keys by discovery)."""
        return {"PROCFLOW_OIDC_ISSUER": self.issuer, "PROCFLOW_OIDC_AUDIENCE": AUDIENCE, **more}

    def rotate(self) -> Key:
        """Replaces the keys by a new RSA key with a new kid (the old ones are withdrawn)."""
        self._rotations += 1
        key = rsa_key(f"rsa-{self._rotations}")
        self.keys = [key]
        return key

    def claims(self, **changes: Any) -> dict[str, Any]:
        """Alice's claims, valid for five minutes, with ``changes`` (None: leave the claim out)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer, "aud": AUDIENCE, "sub": "f2c5a1d0-0001", "iat": now,
            "exp": now + 300, "preferred_username": "alice", "roles": ["reviewer"],
        }  # fmt: skip
        claims.update(changes)
        return {k: v for k, v in claims.items() if v is not None}

    def token(
        self, key: Key | None = None, header: dict[str, Any] | None = None, **changes: Any
    ) -> str:
        """A JWT of :meth:`claims` signed by ``key`` (default the provider's first)."""
        return (key or self.keys[0]).sign(self.claims(**changes), header)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def unsigned(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    """A JWT with ``alg: none`` (or the given header) and an empty signature."""
    head = _b64(json.dumps(header or {"alg": "none", "typ": "JWT"}).encode())
    return f"{head}.{_b64(json.dumps(claims).encode())}."


def hs256_with_public_key(claims: dict[str, Any], key: Key) -> str:
    """The algorithm-confusion forgery: HS256 with the issuer's public key (PEM, as anyone can
    fetch it) as the shared secret, by hand (PyJWT refuses to make one)."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": key.kid}).encode())
    body = f"{header}.{_b64(json.dumps(claims).encode())}"
    mac = hmac.new(key.public_pem(), body.encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac)}"


@pytest.fixture
def provider() -> Iterator[Provider]:
    started = Provider()
    try:
        yield started
    finally:
        started.close()
