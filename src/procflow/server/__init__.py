"""The HTTP face of procflow: ``procflow serve`` — a JSON API over the same engine calls as the
CLI, and (from ``web/``) the web UI. Needs the ``server`` extra (Starlette, uvicorn, Jinja2)."""

from __future__ import annotations
