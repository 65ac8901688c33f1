"""A 405 names what the path answers: RFC 9110 requires ``Allow`` on every 405, and each route
of the API answers one method, so the header gathers the methods of every route of the path."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from procflow.server.api import ENDPOINTS

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


def _pattern(route: str) -> str:
    """A route's path as Starlette matches it: ``{name:path}`` takes slashes too (a schedule's
    ``FLOW/NAME``, so ``GET /schedules/x/pause`` shows the schedule ``x/pause``)."""
    return re.sub(r"\{[^}]+\}", "[^/]+", re.sub(r"\{[^}:]+:path\}", ".+", route))


def _answered_on(path: str) -> set[str]:
    """What the endpoints declare for ``path`` (HEAD with every GET), read from ``ENDPOINTS``."""
    found = set()
    for endpoint in ENDPOINTS:
        if re.fullmatch(_pattern(endpoint.path), path):
            found |= {endpoint.method, "HEAD"} if endpoint.method == "GET" else {endpoint.method}
    return found


PATHS = sorted({_concrete(e.path) for e in ENDPOINTS})


@pytest.mark.parametrize("path", PATHS)
def test_every_405_of_the_api_says_what_the_path_answers(client: TestClient, path: str) -> None:
    answered = _answered_on(path)
    for method in METHODS:
        if method in answered:
            continue
        got = client.request(method, path)
        assert got.status_code == 405, (method, path, got.status_code)
        assert set(got.headers["allow"].split(", ")) == answered, (method, path)
        assert got.headers["content-type"] == "application/problem+json"
        assert method == "HEAD" or got.json()["detail"] == (
            f"[{method}] is not allowed on [{path}]; use {got.headers['allow']}"
        )


def test_a_405_of_the_web_ui_says_what_the_page_answers(client: TestClient) -> None:
    got = client.request("DELETE", "/ui/login")
    assert got.status_code == 405
    assert {"GET", "POST"} <= set(got.headers["allow"].split(", "))
    assert "DELETE" not in got.headers["allow"]
