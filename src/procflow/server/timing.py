"""``Server-Timing: app;dur=<ms>`` on every response: how long the server took, from the request
reaching the application to the response's first byte, without the network or the client.

Operators read it in a browser's developer tools; ``bench/http.py`` and ``bench/ui.py`` take their
server-time percentiles from it (a client's own latency also counts its queueing for a free
core, which on a small machine says more about the client than about procflow).
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ServerTiming"]


class ServerTiming:
    """Pure ASGI middleware (no buffering of the body, unlike ``BaseHTTPMiddleware``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                millis = (time.perf_counter() - started) * 1000
                headers = list(message.get("headers", []))
                headers.append((b"server-timing", f"app;dur={millis:.2f}".encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, timed)
