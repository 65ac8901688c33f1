"""The handlers run on the server's own threads, each keeping its engine (a store connection)
for the life of the process: bursts of requests, however far apart, open no more engines than
there are threads.

Found by a burst test on PostgreSQL: on AnyIO's thread pool, a thread idle for 10 s is retired
and the next burst starts new ones; each new thread opened an engine of its own while the
retired thread's stayed open, and after a few bursts the process's pool of 32 connections was
dry: every request then waited 30 s for a connection and failed.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from anyio._backends import _asyncio as anyio_asyncio

from procflow.server.app import create_app
from procflow.server.state import REQUEST_THREADS, ServerState

BURSTS = 4
AT_ONCE = 2 * REQUEST_THREADS


async def engines_after_bursts(state: ServerState) -> list[int]:
    transport = httpx.ASGITransport(app=create_app(state))
    opened = []
    async with httpx.AsyncClient(transport=transport, base_url="http://procflow") as client:
        for _ in range(BURSTS):
            answers = await asyncio.gather(
                *(client.get("/runs", params={"limit": "1"}) for _ in range(AT_ONCE))
            )
            assert [a.status_code for a in answers] == [200] * AT_ONCE
            opened.append(state.engines.opened)
    return opened


def test_bursts_apart_open_no_more_engines_than_request_threads(
    db_url: str, db_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # AnyIO retires its idle threads at once: what 10 s of quiet does to a real server.
    monkeypatch.setattr(anyio_asyncio.WorkerThread, "MAX_IDLE_TIME", 0)
    state = ServerState.of(db_url, None, db_env)
    try:
        opened = asyncio.run(engines_after_bursts(state))
    finally:
        state.engines.close()
    assert opened[0] >= 1 and max(opened) <= REQUEST_THREADS, opened
