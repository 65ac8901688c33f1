"""OpenID Connect on the HTTP API: the test identity provider's JWTs name the caller (the user
and roles of their claims), every bad JWT is a 401 naming its reason and never the token, the
issuer's keys are cached and fetched again at most once a minute, keys out of reach are a 503 for
JWTs only, and the token table keeps working beside the issuer.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import jwt
import pytest
from oidc_provider import (
    AUDIENCE,
    DISCOVERY,
    Provider,
    ec_key,
    hs256_with_public_key,
    rsa_key,
    unsigned,
)
from oidc_site import MakeOidc, OidcSite
from serving import ADMIN_TOKEN

CHALLENGE = 'Bearer realm="procflow", error="invalid_token"'


def history_by(site: OidcSite, run_id: str, entry: str) -> list[Any]:
    return [h.get("by") for h in site.engine.show(run_id)["history"] if h["type"] == entry]


def refused(answer: Any, status: int, detail: str) -> str:
    """The problem's detail, once checked to start with ``detail``."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    body = answer.json()
    assert body["detail"].startswith(detail), body["detail"]
    return str(body["detail"])


# --- a valid JWT is the caller -------------------------------------------------------------


@pytest.mark.parametrize("alg", ["RS256", "PS256", "ES256"])
def test_a_valid_jwt_is_its_user_on_every_route(
    make_oidc: MakeOidc, provider: Provider, alg: str
) -> None:
    site = make_oidc()
    rsa, ec = provider.keys
    key = ec if alg == "ES256" else rsa_key(rsa.kid, alg)  # one RSA key signs RS* and PS*
    token = provider.token(key, roles=["operator"])  # the role table: starting needs it
    assert site.get("/runs", token).status_code == 200
    started = site.post("/flows/greet/runs", token, json={"inputs": {}})
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    assert site.post(f"/runs/{run_id}/cancel", token).status_code == 200
    assert history_by(site, run_id, "run.started") == ["alice"]
    assert history_by(site, run_id, "run.cancelled") == ["alice"]


def test_the_roles_claim_is_what_the_role_table_reads(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    reviewer = provider.token()  # roles: [reviewer]
    refused(
        site.post("/flows/greet/runs", reviewer, json={"inputs": {}}), 403,
        "user [alice] may not start runs: that needs the role [operator] (or one above it); "
        "[alice] has [reviewer]",
    )  # fmt: skip
    keycloak = make_oidc(PROCFLOW_OIDC_ROLES_CLAIM="realm_access.roles")
    admin = provider.token(roles=None, realm_access={"roles": ["admin"]})
    text = "flow: x\nsteps:\n  - a: { set: { b: 1 } }\n"
    deployed = keycloak.client.post(
        "/definitions?filename=x.flow.yaml", content=text,
        headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/yaml"},
    )  # fmt: skip
    assert deployed.status_code == 201, deployed.text


def test_the_roles_claim_gives_the_roles_a_task_needs(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    task_id = site.review_task()  # for the role `reviewer`
    bob = provider.token(preferred_username="bob", roles=["clerk"])
    refused(site.post(f"/tasks/{task_id}/complete", bob, json={"action": "approve"}), 403, "")
    assert site.engine.task(task_id).get("status") is None  # still open
    alice = provider.token()  # roles: [reviewer]
    done = site.post(f"/tasks/{task_id}/complete", alice, json={"action": "approve"})
    assert done.status_code == 200, done.text
    assert done.json()["by"] == "alice"


def test_keycloak_realm_roles_by_a_dotted_path(make_oidc: MakeOidc, provider: Provider) -> None:
    site = make_oidc(PROCFLOW_OIDC_ROLES_CLAIM="realm_access.roles")
    task_id = site.review_task()
    only_top = provider.token()  # `roles` at the top is not what this server reads
    refused(site.post(f"/tasks/{task_id}/complete", only_top, json={"action": "approve"}), 403, "")
    keycloak = provider.token(
        roles=None, realm_access={"roles": ["offline_access", "reviewer"]},
        resource_access={"account": {"roles": ["view-profile"]}},
    )  # fmt: skip
    done = site.post(f"/tasks/{task_id}/complete", keycloak, json={"action": "reject"})
    assert done.status_code == 200, done.text
    assert done.json()["by"] == "alice"


def test_a_claim_named_with_dots_is_taken_whole_before_a_path(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    """Auth0 names its custom claims by URL: ``https://example.com/roles`` is one claim."""
    site = make_oidc(PROCFLOW_OIDC_ROLES_CLAIM="https://example.com/roles")
    task_id = site.review_task()
    token = provider.token(roles=None, **{"https://example.com/roles": ["reviewer"]})
    done = site.post(f"/tasks/{task_id}/complete", token, json={"action": "approve"})
    assert done.status_code == 200, done.text


def test_the_user_is_sub_without_preferred_username_or_the_claim_set(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    token = provider.token(preferred_username=None, roles=["operator"])
    run_id = site.post("/flows/greet/runs", token, json={"inputs": {}}).json()["id"]
    assert history_by(site, run_id, "run.started") == ["f2c5a1d0-0001"]
    site = make_oidc(PROCFLOW_OIDC_USER_CLAIM="email")
    token = provider.token(email="alice@example.com", roles=["operator"])
    run_id = site.post("/flows/greet/runs", token, json={"inputs": {}}).json()["id"]
    assert history_by(site, run_id, "run.started") == ["alice@example.com"]
    detail = refused(site.get("/runs", provider.token()), 401, "the JWT has no [email] claim")
    assert detail == "the JWT has no [email] claim to name its user"


def test_no_roles_claim_is_no_roles_and_a_malformed_one_is_refused(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    task_id = site.review_task()
    none = provider.token(roles=None)
    assert site.get("/runs", none).status_code == 200
    refused(site.post(f"/tasks/{task_id}/complete", none, json={"action": "approve"}), 403, "")
    for bad in ("reviewer", ["reviewer", 7], {"reviewer": True}):
        detail = "the JWT's [roles] claim is not a list of strings"
        assert refused(site.get("/runs", provider.token(roles=bad)), 401, detail) == detail
    keycloak = make_oidc(PROCFLOW_OIDC_ROLES_CLAIM="realm_access.roles")
    token = provider.token(realm_access="reviewer")
    refused(keycloak.get("/runs", token), 401, "the JWT's [realm_access.roles] claim is not a list")


# --- where the keys come from --------------------------------------------------------------


@pytest.mark.parametrize("source", ["discovery", "jwks url", "jwks file"])
def test_keys_from_discovery_a_jwks_url_or_a_file(
    make_oidc: MakeOidc, provider: Provider, source: str, tmp_path: Any
) -> None:
    settings = {
        "discovery": {},
        "jwks url": {"PROCFLOW_OIDC_JWKS": provider.jwks_url},
        "jwks file": {"PROCFLOW_OIDC_JWKS": provider.jwks_file(tmp_path)},
    }[source]
    site = make_oidc(**settings)
    for _ in range(3):
        assert site.get("/runs", provider.token()).status_code == 200
        assert site.get("/runs", provider.token(provider.keys[1])).status_code == 200
    assert provider.requests[DISCOVERY] == (1 if source == "discovery" else 0)
    assert provider.key_fetches == (0 if source == "jwks file" else 1)  # cached


# --- every refusal names its reason --------------------------------------------------------


def _forgeries(provider: Provider) -> dict[str, tuple[str, str]]:
    """name -> (token, the start of the refusal's detail)."""
    now = int(time.time())
    stranger = rsa_key("stranger")
    mine = provider.keys[0]
    return {
        "foreign key, known kid": (
            provider.token(rsa_key("impostor"), header={"kid": mine.kid}),
            "the JWT's signature does not verify with the issuer's key [rsa-1]",
        ),
        "foreign key, unknown kid": (
            provider.token(stranger),
            "the JWT is signed by a key [stranger] the issuer does not have",
        ),
        "expired": (provider.token(exp=now - 120), "the JWT expired at "),
        "not yet valid": (provider.token(nbf=now + 600), "the JWT is not valid before "),
        "issued in the future": (provider.token(iat=now + 600), "the JWT was issued in the future"),
        "wrong audience": (
            provider.token(aud=["account", "other-app"]),
            "the JWT is not meant for this server: its audience [account, other-app] does not "
            f"hold [{AUDIENCE}]",
        ),
        "wrong issuer": (
            provider.token(iss="https://evil.example/realms/test"),
            "the JWT was issued by [https://evil.example/realms/test], not by ",
        ),
        "no exp": (provider.token(exp=None), "the JWT has no [exp] claim"),
        "nbf not a number": (
            provider.token(nbf="soon"),
            "the JWT cannot be read: Not Before claim (nbf) must be an integer.",
        ),
        "iat not a number": (
            provider.token(iat="today"),
            "the JWT is not valid: Issued At claim (iat) must be an integer.",
        ),
        "an empty user": (
            provider.token(preferred_username=" "),
            "the JWT's [preferred_username] claim names no user: the user name is empty",
        ),
        "a user that is not text": (
            provider.token(preferred_username=["alice"]),
            "the JWT's [preferred_username] claim is not text, so it names no user",
        ),
        "no user": (
            provider.token(preferred_username=None, sub=None),
            "the JWT has no [preferred_username] or [sub] claim to name its user",
        ),
        "no kid among several keys": (
            jwt.encode(provider.claims(), mine.private, "RS256"),
            "the JWT names no key (kid), and the issuer has 2",
        ),
        "no aud": (provider.token(aud=None), "the JWT has no [aud] claim"),
        "alg none": (unsigned(provider.claims()), "the JWT is not signed (alg [none])"),
        "alg None": (
            unsigned(provider.claims(), {"alg": "None", "kid": mine.kid}),
            "the JWT is not signed (alg [none])",
        ),
        "alg not text": (
            unsigned(provider.claims(), {"alg": ["RS256"], "kid": mine.kid}),
            "the JWT's header names no algorithm (alg) as text",
        ),
        "HS256 with the public key": (
            hs256_with_public_key(provider.claims(), mine),
            "the JWT is signed with [HS256]: only public-key algorithms are accepted",
        ),
        "an algorithm the key is not for": (
            provider.token(ec_key("x"), header={"kid": mine.kid}),
            "the JWT's algorithm [ES256] is not one the issuer's key [rsa-1] is for",
        ),
        "garbled": (
            "eyJub3QiOiJqc29u.bm9wZQ.c2ln",
            "the bearer token has the shape of a JWT but its header is not",
        ),
        "tampered payload": (
            _tampered(provider.token()),
            "the JWT's signature does not verify with the issuer's key [rsa-1]",
        ),
    }


def _tampered(token: str) -> str:
    header, payload, signature = token.split(".")
    return f"{header}.{payload[:-2]}{'A' if payload[-2] != 'A' else 'B'}{payload[-1]}.{signature}"


def test_every_bad_jwt_is_a_401_naming_its_reason_never_the_token(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    assert site.get("/runs", provider.token()).status_code == 200  # the keys are fetched
    for name, (token, reason) in _forgeries(provider).items():
        answer = site.get("/runs", token)
        detail = refused(answer, 401, reason)
        assert answer.headers["www-authenticate"] == CHALLENGE, name
        assert not [part for part in token.split(".") if len(part) > 8 and part in detail], name


def test_expiry_and_nbf_have_60_seconds_of_leeway(make_oidc: MakeOidc, provider: Provider) -> None:
    site = make_oidc()
    now = int(time.time())
    assert site.get("/runs", provider.token(exp=now - 30)).status_code == 200
    assert site.get("/runs", provider.token(nbf=now + 30)).status_code == 200
    refused(site.get("/runs", provider.token(exp=now - 90)), 401, "the JWT expired at ")
    refused(site.get("/runs", provider.token(nbf=now + 90)), 401, "the JWT is not valid before ")


def test_an_exp_too_large_for_a_float_is_a_jwt_that_does_not_expire(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    forever = provider.token(exp=10**400)
    assert site.get("/runs", forever).status_code == 200
    assert site.client.post("/ui/login", data={"token": forever}).status_code == 200


def test_a_jwt_of_an_encryption_or_shared_secret_key_in_the_jwks_is_not_taken(
    make_oidc: MakeOidc, provider: Provider, tmp_path: Any
) -> None:
    """A JWKS holding an ``oct`` key (a shared secret) or a key for encryption: neither signs."""
    mine = provider.keys[0]
    secret = {"kty": "oct", "kid": "shared", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"}
    enc = {**mine.jwk(), "kid": "enc-1", "use": "enc"}
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps({"keys": [secret, enc, mine.jwk()]}))
    site = make_oidc(PROCFLOW_OIDC_JWKS=str(path))
    assert site.get("/runs", provider.token()).status_code == 200
    assert site.verifier.keys.count == 1
    refused(site.get("/runs", mine.sign(provider.claims(), {"kid": "enc-1"})), 401,
            "the JWT is signed by a key [enc-1] the issuer does not have")  # fmt: skip


def test_a_jwt_without_a_kid_uses_a_jwks_of_one_key(
    make_oidc: MakeOidc, provider: Provider, tmp_path: Any
) -> None:
    mine = provider.keys[0]
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"keys": [mine.jwk()]}))
    site = make_oidc(PROCFLOW_OIDC_JWKS=str(path))
    no_kid = jwt.encode(provider.claims(), mine.private, "RS256")
    assert site.get("/runs", no_kid).status_code == 200


@pytest.mark.parametrize(
    ("discovery", "says"),
    [
        (b"{not json", "the answer of [URL] is not JSON"),
        ([1, 2], "the discovery document [URL] is not a JSON object"),
        ({"issuer": "ISSUER"}, "the discovery document [URL] has no jwks_uri"),
        ({"issuer": "ISSUER", "jwks_uri": "http://keys.example.com/certs"},
         "the discovery document [URL]: its jwks_uri [http://keys.example.com/certs] is plain "
         "HTTP to another machine: keys fetched over it could be replaced on the way; use https"),
        ({"issuer": "ISSUER", "jwks_uri": "JWKS"}, "[JWKS] answered 500"),
        (b"[" + b" " * 1024 * 1024 + b"]", "[URL] answered more than 1048576 bytes"),
    ],
    ids=["not json", "not an object", "no jwks_uri", "plain http", "jwks fails", "too large"],
)  # fmt: skip
def test_a_discovery_document_keys_cannot_come_from_is_a_503(
    make_oidc: MakeOidc, provider: Provider, discovery: Any, says: str
) -> None:
    site = make_oidc()
    real = provider.answer
    url = f"{provider.issuer}/.well-known/openid-configuration"
    if isinstance(discovery, dict):
        discovery = {k: v.replace("ISSUER", provider.issuer).replace("JWKS", provider.jwks_url)
                     for k, v in discovery.items()}  # fmt: skip

    def answer(path: str) -> tuple[int, Any]:
        if path == DISCOVERY:
            return 200, discovery
        return 500, {}

    provider.answer = answer  # type: ignore[method-assign]
    detail = refused(site.get("/runs", provider.token()), 503, "the identity provider's keys")
    expected = says.replace("URL", url).replace("JWKS", provider.jwks_url)
    assert expected in detail, detail
    provider.answer = real  # type: ignore[method-assign]


# --- rotation and the once-a-minute rule ---------------------------------------------------


def test_a_rotated_key_is_taken_without_a_restart(make_oidc: MakeOidc, provider: Provider) -> None:
    site = make_oidc()
    old = provider.token()
    assert site.get("/runs", old).status_code == 200
    site.clock.advance(61)  # the issuer rotates its keys a while later
    new_key = provider.rotate()
    assert site.get("/runs", provider.token(new_key)).status_code == 200
    assert provider.key_fetches == 2
    # The old key is withdrawn: the keys fetched again no longer hold it.
    refused(site.get("/runs", old), 401, "the JWT is signed by a key [rsa-1] the issuer")


def test_an_unknown_kid_fetches_the_keys_at_most_once_a_minute(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    assert site.get("/runs", provider.token()).status_code == 200
    assert provider.key_fetches == 1
    stranger = provider.token(rsa_key("stranger"))
    for _ in range(5):
        refused(site.get("/runs", stranger), 401, "the JWT is signed by a key [stranger]")
    assert provider.key_fetches == 1  # fetched a moment ago: not again
    site.clock.advance(59)
    refused(site.get("/runs", stranger), 401, "the JWT is signed by a key [stranger]")
    assert provider.key_fetches == 1
    site.clock.advance(1)
    refused(site.get("/runs", stranger), 401, "the JWT is signed by a key [stranger]")
    assert provider.key_fetches == 2  # a minute on: once
    refused(site.get("/runs", stranger), 401, "the JWT is signed by a key [stranger]")
    assert provider.key_fetches == 2


def test_keys_are_fetched_again_once_they_are_five_minutes_old(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    """A key the issuer withdrew stops being taken within five minutes, unknown kid or not."""
    site = make_oidc()
    old = provider.token()
    assert site.get("/runs", old).status_code == 200
    provider.rotate()
    site.clock.advance(299)
    assert site.get("/runs", old).status_code == 200  # still held
    assert provider.key_fetches == 1
    site.clock.advance(1)
    refused(site.get("/runs", old), 401, "the JWT is signed by a key [rsa-1]")
    assert provider.key_fetches == 2


# --- keys out of reach ---------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_unreachable_keys_are_a_503_for_jwts_only(make_oidc: MakeOidc, provider: Provider) -> None:
    nowhere = f"http://127.0.0.1:{_closed_port()}/certs"
    site = make_oidc(PROCFLOW_OIDC_JWKS=nowhere)
    answer = site.get("/runs", provider.token())
    detail = refused(
        answer,
        503,
        f"the identity provider's keys cannot be fetched: [{nowhere}] cannot be reached: ",
    )
    assert detail.endswith("JWTs cannot be checked until they can")
    assert 1 <= int(answer.headers["retry-after"]) <= 60
    assert site.get("/runs", ADMIN_TOKEN).status_code == 200  # a token of the table needs none
    refused(site.get("/runs", "x" * 30), 401, "the bearer token is not valid")


def test_an_issuer_that_answers_errors_is_a_503_until_it_recovers(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    provider.failing = 500
    detail = refused(site.get("/runs", provider.token()), 503, "the identity provider's keys")
    assert f"[{provider.issuer}/.well-known/openid-configuration] answered 500;" in detail
    provider.failing = None
    # Tried a moment ago: not again for a minute, so still a 503 (and the issuer is spared).
    refused(site.get("/runs", provider.token()), 503, "the identity provider's keys cannot be")
    site.clock.advance(60)
    assert site.get("/runs", provider.token()).status_code == 200


def test_held_keys_keep_working_while_the_issuer_is_down(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    assert site.get("/runs", provider.token()).status_code == 200
    provider.failing = 503
    site.clock.advance(600)  # the keys are old: fetched again, which fails
    assert site.get("/runs", provider.token()).status_code == 200
    assert site.verifier.keys.failure is not None
    refused(site.get("/runs", provider.token(rsa_key("stranger"))), 503, "the identity provider")


def test_a_discovery_document_of_another_issuer_is_a_503(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    real = provider.answer
    provider.answer = lambda path: (  # type: ignore[method-assign]
        (200, {"issuer": "https://other.example", "jwks_uri": provider.jwks_url})
        if path == DISCOVERY else real(path)
    )  # fmt: skip
    detail = refused(site.get("/runs", provider.token()), 503, "the identity provider's keys")
    assert "names the issuer [https://other.example], not [" in detail
    assert provider.key_fetches == 0


# --- the token table beside the issuer ------------------------------------------------------


def test_opaque_tokens_go_to_the_table_and_jwts_to_the_issuer(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    assert site.get("/runs", ADMIN_TOKEN).status_code == 200
    refused(site.get("/runs", "x" * 30), 401, "the bearer token is not valid")
    missing = site.client.get("/runs")
    detail = refused(missing, 401, "a bearer token is required: a JWT of [")
    assert detail.endswith("] or one from PROCFLOW_API_TOKENS")
    assert missing.headers["www-authenticate"] == 'Bearer realm="procflow"'
    alone = make_oidc(PROCFLOW_API_TOKENS="")
    refused(alone.get("/runs", ADMIN_TOKEN), 401, "the bearer token is not valid")
    refused(alone.client.get("/runs"), 401, f"a bearer JWT of [{provider.issuer}] is required")
    assert alone.get("/runs", provider.token()).status_code == 200
