"""OpenID Connect in the web UI: the login form takes a JWT as it takes a token (a session cookie
that ends no later than the JWT, with the JWT's roles), and behind an authenticating proxy that
forwards ``Authorization: Bearer`` every page is signed in from it, with no login page and no
cookie, and its forms still need their CSRF token."""

from __future__ import annotations

import html
import re
import time
from typing import Any

from oidc_provider import Provider
from oidc_site import MakeOidc, OidcSite
from serving import ADMIN_TOKEN

from procflow.runtime.data.identity import Actor
from procflow.server.web.session import COOKIE, SESSION_SECONDS, Signer

_CSRF = re.compile(r'name="csrf" value="([^"]*)"')
_MAX_AGE = re.compile(r"Max-Age=(\d+)", re.IGNORECASE)


def alert(page: str) -> str:
    found = re.search(r'role="alert">([^<]*)<', page)
    assert found is not None, page
    return html.unescape(found.group(1))


def csrf_of(page: str) -> str:
    found = _CSRF.search(page)
    assert found is not None, "the page has a form with a CSRF token"
    return found.group(1)


def login(site: OidcSite, token: str, next_page: str = "/ui/runs") -> Any:
    return site.client.post(
        "/ui/login", data={"token": token, "next": next_page}, follow_redirects=False
    )


# --- the login form ------------------------------------------------------------------------


def test_the_login_form_takes_a_jwt_and_its_session_has_the_jwts_roles(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    task_id = site.review_task()  # for the role `reviewer`
    form = site.client.get("/ui/login").text
    assert "or a JWT from your organisation's identity provider" in form
    token = provider.token()  # alice, a reviewer
    answer = login(site, token, f"/ui/tasks/{task_id}")
    assert answer.status_code == 303 and answer.headers["location"] == f"/ui/tasks/{task_id}"
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert token not in cookie and token.split(".")[2] not in cookie
    page = site.client.get(f"/ui/tasks/{task_id}").text
    assert "Signed in as <strong>alice</strong>" in page
    done = site.client.post(
        f"/ui/tasks/{task_id}", data={"action": "approve", "csrf": csrf_of(page)},
        follow_redirects=False,
    )  # fmt: skip
    assert done.status_code == 303, done.text
    assert site.engine.task(task_id)["by"] == "alice"


def test_a_jwt_session_without_the_role_is_refused_the_task(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    task_id = site.review_task()
    assert login(site, provider.token(preferred_username="bob", roles=["clerk"])).status_code == 303
    page = site.client.get(f"/ui/tasks/{task_id}").text
    refused = site.client.post(
        f"/ui/tasks/{task_id}", data={"action": "approve", "csrf": csrf_of(page)}
    )
    assert refused.status_code == 403 and "You may not complete this task:" in refused.text
    assert site.engine.task(task_id).get("status") is None


def test_a_jwt_session_ends_no_later_than_the_jwt(make_oidc: MakeOidc, provider: Provider) -> None:
    site = make_oidc()
    soon = int(time.time()) + 90
    answer = login(site, provider.token(exp=soon))
    max_age = _MAX_AGE.search(answer.headers["set-cookie"])
    assert max_age is not None and 80 <= int(max_age.group(1)) <= 90
    later = login(site, provider.token(exp=int(time.time()) + 7 * 86400))  # a week: a day's session
    max_age = _MAX_AGE.search(later.headers["set-cookie"])
    assert max_age is not None and int(max_age.group(1)) == SESSION_SECONDS


def test_a_session_cookie_is_not_valid_past_its_jwts_exp() -> None:
    signer, now = Signer(), 1_800_000_000.0
    alice = Actor("alice", frozenset({"reviewer", "ops"}))
    cookie = signer.issue(alice, until=now + 90, now=now)
    assert signer.actor_of(cookie, now=now + 89) == alice
    assert signer.actor_of(cookie, now=now + 91) is None
    forged = cookie.replace(cookie.split(".")[1], str(int(now) + SESSION_SECONDS))
    assert signer.actor_of(forged, now=now + 91) is None  # the expiry is signed


def test_a_bad_jwt_at_login_says_why(make_oidc: MakeOidc, provider: Provider) -> None:
    site = make_oidc()
    answer = login(site, provider.token(exp=int(time.time()) - 3600))
    assert answer.status_code == 401
    assert alert(answer.text).startswith("That JWT is not valid: the JWT expired at ")
    assert COOKIE not in answer.headers.get("set-cookie", "")
    wrong = login(site, "x" * 30)
    assert wrong.status_code == 401 and alert(wrong.text) == "That token is not valid"
    assert login(site, ADMIN_TOKEN).status_code == 303  # the token table still signs in


def test_a_jwt_that_ends_within_the_leeway_signs_nobody_in(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    """Taken by the API for another minute, but a session of it would already be over."""
    site = make_oidc()
    token = provider.token(exp=int(time.time()) - 30)
    assert site.get("/runs", token).status_code == 200
    answer = login(site, token)
    assert answer.status_code == 401
    assert alert(answer.text) == "That JWT has expired: get a new one"
    assert COOKIE not in answer.headers.get("set-cookie", "")


def test_a_jwt_with_too_many_roles_for_a_cookie_is_refused_at_login(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    token = provider.token(roles=[f"team-{n:04}-members" for n in range(300)])
    answer = login(site, token)
    assert answer.status_code == 400
    assert alert(answer.text) == (
        "That token gives 300 roles, too many to keep in a session cookie: sign in through an "
        "authenticating proxy that forwards it as a bearer token instead"
    )
    assert COOKIE not in answer.headers.get("set-cookie", "")
    assert site.get("/ui/runs", token).status_code == 200  # forwarded, it works


def test_a_jwt_at_login_while_the_keys_are_out_of_reach_is_a_503(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    provider.failing = 502
    answer = login(site, provider.token())
    assert answer.status_code == 503
    said = alert(answer.text)
    assert said.startswith("the identity provider's keys cannot be fetched: [http://127.0.0.1:")
    assert said.endswith("answered 502; JWTs cannot be checked until they can")


def test_only_the_issuer_is_offered_without_a_token_table(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc(PROCFLOW_API_TOKENS="")
    form = site.client.get("/ui/login").text
    assert "Use a JWT (an access token) from your organisation's identity provider." in form
    assert "PROCFLOW_API_TOKENS" not in form
    assert site.client.get("/ui/runs", follow_redirects=False).status_code == 303  # not local


# --- behind an authenticating proxy ----------------------------------------------------------


def test_a_forwarded_bearer_signs_the_ui_in_without_a_login_page(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    task_id = site.review_task()
    token = provider.token()
    page = site.get(f"/ui/tasks/{task_id}", token, follow_redirects=False)
    assert page.status_code == 200, page.text
    assert "Acting as <strong>alice</strong>" in page.text and "Sign out" not in page.text
    assert "set-cookie" not in page.headers
    assert site.get("/ui/login", token, follow_redirects=False).headers["location"] == "/ui/runs"
    done = site.post(
        f"/ui/tasks/{task_id}", token, data={"action": "approve", "csrf": csrf_of(page.text)},
        follow_redirects=False,
    )  # fmt: skip
    assert done.status_code == 303, done.text
    assert site.engine.task(task_id)["by"] == "alice"
    admin = site.get("/ui/runs", ADMIN_TOKEN)  # a token of the table, forwarded
    assert admin.status_code == 200 and "Acting as <strong>ada</strong>" in admin.text


def test_forms_behind_the_proxy_still_need_their_users_csrf_token(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    task_id = site.review_task()
    alice = provider.token()
    bob = provider.token(preferred_username="bob")
    form = {"action": "approve"}
    missing = site.post(f"/ui/tasks/{task_id}", alice, data=form)
    assert missing.status_code == 403 and "CSRF token" in missing.text
    bobs = csrf_of(site.get(f"/ui/tasks/{task_id}", bob).text)
    assert site.post(f"/ui/tasks/{task_id}", alice, data={**form, "csrf": bobs}).status_code == 403
    assert site.engine.task(task_id).get("status") is None  # nothing changed
    # A fresh JWT of the same user (the proxy refreshed it) keeps a page's forms working.
    page = site.get(f"/ui/tasks/{task_id}", alice).text
    fresh = provider.token(iat=int(time.time()) + 1, jti="another")
    done = site.post(f"/ui/tasks/{task_id}", fresh, data={**form, "csrf": csrf_of(page)},
                     follow_redirects=False)  # fmt: skip
    assert done.status_code == 303, done.text


def test_a_bad_forwarded_bearer_is_a_401_page_not_a_login(
    make_oidc: MakeOidc, provider: Provider
) -> None:
    site = make_oidc()
    expired = site.get("/ui/runs", provider.token(exp=int(time.time()) - 3600))
    assert expired.status_code == 401
    assert alert(expired.text).startswith("the JWT expired at ")
    wrong = site.get("/ui/runs", "x" * 30, follow_redirects=False)
    assert wrong.status_code == 401 and alert(wrong.text) == "the bearer token is not valid"
    # Another scheme (Basic, from a proxy's own sign-in) is no forwarded bearer: the login page.
    basic = site.client.get(
        "/ui/runs", headers={"Authorization": "Basic YWxpY2U6c2VjcmV0"}, follow_redirects=False
    )
    assert basic.status_code == 303 and basic.headers["location"].startswith("/ui/login")
