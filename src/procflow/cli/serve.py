"""``procflow serve``: the HTTP API (and web UI) with an in-process worker."""

from __future__ import annotations

import os

import click

from procflow.cli import ops
from procflow.cli.options import db_option, project_option
from procflow.errors import MissingExtraError

__all__ = ["COMMANDS"]

_SERVER_EXTRA = {"starlette", "uvicorn", "jinja2", "prometheus_client", "jwt"}  # `procflow[server]`


@click.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; a non-loopback one needs API tokens or --insecure.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="Port to listen on; 0 picks a free one (printed on the serving line).",
)
@click.option("--no-worker", is_flag=True, help="Serve only; advance no runs in this process.")
@click.option(
    "--insecure",
    is_flag=True,
    help="Allow a non-loopback address without API tokens (every caller is an administrator).",
)
@ops.operations_options
@db_option
@project_option
def serve(
    host: str,
    port: int,
    no_worker: bool,
    insecure: bool,
    log_format: str,
    retain: str | None,
    db_url: str,
    project_dir: str | None,
) -> None:
    """Serve the HTTP API until SIGTERM or SIGINT (then finish in-flight work and exit 0)."""
    try:
        from procflow.server.serve import ServeOptions
        from procflow.server.serve import serve as run_server
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in _SERVER_EXTRA:
            raise
        raise MissingExtraError("procflow serve", "server") from None
    from procflow.cli import _engine

    _engine.require_store(db_url)
    options = ServeOptions(db_url, project_dir, host, port, not no_worker, insecure)
    with ops.operations(db_url, log_format=log_format, retain=retain):
        run_server(
            options,
            os.environ,
            say=lambda line: click.echo(line),
            note=lambda line: click.echo(line, err=True),
        )


COMMANDS = [serve]
