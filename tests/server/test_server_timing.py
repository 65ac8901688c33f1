"""Every response says how long the server took (``Server-Timing: app;dur=<ms>``)."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

TIMING = re.compile(r"^app;dur=\d+\.\d\d$")


def test_a_success_carries_the_server_time(client: TestClient) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert TIMING.match(response.headers["server-timing"]), response.headers


def test_a_problem_carries_it_too(client: TestClient) -> None:
    response = client.get("/runs/no-such-run")
    assert response.status_code == 404
    assert TIMING.match(response.headers["server-timing"]), response.headers


def test_a_list_route_carries_it(client: TestClient) -> None:
    response = client.get("/runs?limit=5")
    assert response.status_code == 200
    assert TIMING.match(response.headers["server-timing"]), response.headers
