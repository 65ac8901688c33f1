"""The OpenID Connect settings: what is refused at start (one line naming the setting), and
``procflow serve`` with an issuer, which counts as identity for the loopback rule."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from oidc_provider import (
    AUDIENCE,
    Provider,
)
from serving import Served, subprocess_env

from procflow.config import Config
from procflow.errors import ConfigError
from procflow.server.oidc import OidcVerifier
from procflow.server.serve import ServeOptions, check_exposure
from procflow.server.state import ServerState
from procflow.store.store import Store

ISSUER = "https://id.example.com/realms/acme"


def refusal(**environ: str) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        OidcVerifier.from_config(Config.from_environ(environ))
    return refused.value


def test_an_issuer_needs_an_audience() -> None:
    refused = refusal(PROCFLOW_OIDC_ISSUER=ISSUER)
    assert refused.setting == "PROCFLOW_OIDC_AUDIENCE"
    assert str(refused) == (
        "PROCFLOW_OIDC_ISSUER is set but PROCFLOW_OIDC_AUDIENCE is not: without it a JWT the "
        "issuer made for any other application would be taken; set it to procflow's client id"
    )


@pytest.mark.parametrize(
    "setting",
    ["PROCFLOW_OIDC_AUDIENCE", "PROCFLOW_OIDC_JWKS", "PROCFLOW_OIDC_USER_CLAIM",
     "PROCFLOW_OIDC_ROLES_CLAIM"],
)  # fmt: skip
def test_an_oidc_setting_without_an_issuer_is_refused(setting: str) -> None:
    refused = refusal(**{setting: "x"})
    assert refused.setting == setting
    assert str(refused) == (
        f"{setting} is set but PROCFLOW_OIDC_ISSUER is not: set the issuer whose JWTs to take"
    )


def test_no_oidc_settings_is_no_verifier() -> None:
    assert OidcVerifier.from_config(Config.from_environ({})) is None


def test_keys_are_never_fetched_over_plain_http_from_another_machine(tmp_path: Path) -> None:
    plain = "http://id.example.com/realms/acme"
    refused = refusal(PROCFLOW_OIDC_ISSUER=plain, PROCFLOW_OIDC_AUDIENCE=AUDIENCE)
    assert refused.setting == "PROCFLOW_OIDC_ISSUER"
    assert str(refused) == (
        f"PROCFLOW_OIDC_ISSUER [{plain}] is plain HTTP to another machine: keys fetched over it "
        "could be replaced on the way; use https (procflow fetches its discovery document from it)"
    )
    refused = refusal(
        PROCFLOW_OIDC_ISSUER=ISSUER, PROCFLOW_OIDC_AUDIENCE=AUDIENCE,
        PROCFLOW_OIDC_JWKS="http://id.example.com/certs",
    )  # fmt: skip
    assert refused.setting == "PROCFLOW_OIDC_JWKS"
    assert "is plain HTTP to another machine" in str(refused)
    # Loopback is fine (a local identity provider), and so is an http issuer whose keys come
    # from a file: nothing is fetched from it.
    for issuer in ("http://127.0.0.1:8080/realms/acme", "http://localhost/realms/acme"):
        settings = {"PROCFLOW_OIDC_ISSUER": issuer, "PROCFLOW_OIDC_AUDIENCE": AUDIENCE}
        assert OidcVerifier.from_config(Config.from_environ(settings)) is not None


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot be read: No such file or directory"),
        ("{not json", "is not JSON"),
        ('{"issuer": "x"}', "is not a JWKS (a JSON object with a [keys] list)"),
        ('[{"kty": "RSA"}]', "is not a JWKS (a JSON object with a [keys] list)"),
        (json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "s"}]}),
         "holds no public signing key (RSA, EC or OKP, with use [sig] or none)"),
        (json.dumps({"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB", "alg": "HS256"}]}),
         "holds no public signing key (RSA, EC or OKP, with use [sig] or none)"),
    ],
)  # fmt: skip
def test_a_jwks_file_that_is_not_a_jwks_is_refused(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "jwks.json"
    if content is not None:
        path.write_text(content)
    refused = refusal(
        PROCFLOW_OIDC_ISSUER=ISSUER, PROCFLOW_OIDC_AUDIENCE=AUDIENCE, PROCFLOW_OIDC_JWKS=str(path)
    )
    assert refused.setting == "PROCFLOW_OIDC_JWKS"
    assert str(refused).startswith(f"PROCFLOW_OIDC_JWKS: the JWKS file [{path}] ")
    assert str(refused).endswith(says)


def test_a_private_key_in_a_jwks_file_is_not_used(tmp_path: Path, provider: Provider) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    private = json.loads(RSAAlgorithm.to_jwk(rsa.generate_private_key(65537, 2048)))
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [private]}))
    refused = refusal(
        PROCFLOW_OIDC_ISSUER=ISSUER, PROCFLOW_OIDC_AUDIENCE=AUDIENCE, PROCFLOW_OIDC_JWKS=str(path)
    )
    assert str(refused).endswith(
        "holds no public signing key (RSA, EC or OKP, with use [sig] or none)"
    )


@pytest.mark.parametrize("claim", ["realm_access..roles", ".roles", "roles."])
@pytest.mark.parametrize("setting", ["PROCFLOW_OIDC_ROLES_CLAIM", "PROCFLOW_OIDC_USER_CLAIM"])
def test_a_claim_path_with_an_empty_name_is_refused(claim: str, setting: str) -> None:
    refused = refusal(
        PROCFLOW_OIDC_ISSUER=ISSUER, PROCFLOW_OIDC_AUDIENCE=AUDIENCE, **{setting: claim}
    )
    assert refused.setting == setting
    assert str(refused) == f"{setting} [{claim}] is not a claim name or a dotted path of them"


@pytest.mark.parametrize("issuer", ["id.example.com/realms/acme", "ftp://id.example.com/x"])
def test_an_issuer_that_is_not_an_http_url_is_refused(issuer: str) -> None:
    refused = refusal(PROCFLOW_OIDC_ISSUER=issuer, PROCFLOW_OIDC_AUDIENCE=AUDIENCE)
    assert refused.setting == "PROCFLOW_OIDC_ISSUER"
    assert str(refused) == (
        f"PROCFLOW_OIDC_ISSUER [{issuer}] is not an http(s) URL (procflow fetches its discovery "
        "document from it)"
    )


# --- procflow serve -----------------------------------------------------------------------------


def test_an_issuer_counts_as_identity_for_the_loopback_rule(provider: Provider) -> None:
    state = ServerState.of("sqlite:///unused.db", None, provider.settings())
    assert state.tokens is None and not state.open
    said: list[str] = []
    options = ServeOptions("sqlite:///unused.db", None, host="0.0.0.0")
    check_exposure(options, tokens=not state.open, note=said.append)  # as serve() does
    assert said == []
    nobody = ServerState.of("sqlite:///unused.db", None, {})
    with pytest.raises(ConfigError):
        check_exposure(options, tokens=not nobody.open, note=said.append)


def _store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    store = Store(url)
    try:
        store.init()
    finally:
        store.close()
    return url


def test_serve_with_an_issuer_takes_its_jwts_and_no_caller_is_local(
    tmp_path: Path, provider: Provider
) -> None:
    url = _store(tmp_path)
    args = ["--port", "0", "--no-worker", "--db", url]
    served = Served(args, subprocess_env({}, provider.settings()), tmp_path)
    try:
        base = served.wait_serving()
        missing = httpx.get(f"{base}/runs")
        assert missing.status_code == 401
        assert missing.json()["detail"] == f"a bearer JWT of [{provider.issuer}] is required"
        token = provider.token()
        answer = httpx.get(f"{base}/runs", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
    finally:
        assert served.stop() == 0
    assert "loopback only" not in served.stderr
    assert token not in served.stderr


def test_serve_refuses_a_bad_jwks_file_at_start_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text('{"keys": []}')
    environ = {"PROCFLOW_OIDC_ISSUER": ISSUER, "PROCFLOW_OIDC_AUDIENCE": AUDIENCE,
               "PROCFLOW_OIDC_JWKS": str(tmp_path / "jwks.json")}  # fmt: skip
    served = Served(
        ["--port", "0", "--db", _store(tmp_path)], subprocess_env({}, environ), tmp_path
    )
    assert served.wait() == 2
    assert served.stderr.strip().splitlines() == [
        f"error: PROCFLOW_OIDC_JWKS: the JWKS file [{tmp_path / 'jwks.json'}] holds no public "
        "signing key (RSA, EC or OKP, with use [sig] or none)"
    ]
    assert served.stdout == []
