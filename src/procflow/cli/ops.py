"""Operations on the command line: ``runs purge``, and what ``worker`` and ``serve`` run beside
their work (logs, ``--metrics-port``, ``--retain``).

The runtime and the metrics face are imported inside the functions, as ``_engine`` does: a
command that never purges or serves metrics does not pay for them at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from procflow.cli import _engine
from procflow.cli.logs import configure_logs, log_format_option
from procflow.cli.options import as_option, db_option, json_option
from procflow.cli.output import echo_json
from procflow.errors import MissingExtraError

if TYPE_CHECKING:
    from procflow.runtime.work.observe import Observer

__all__ = [
    "Operations",
    "metrics_options",
    "operations",
    "operations_options",
    "purge",
    "retain_option",
]

F = TypeVar("F", bound=Callable[..., Any])

retain_option = click.option(
    "--retain",
    metavar="DURATION",
    help="Purge, every 10 minutes, the runs that ended (completed, cancelled, aborted) longer "
    "than DURATION ago (30d, P30D), with everything that belongs to them.",
)


def operations_options(command: F) -> F:
    """``--log-format`` and ``--retain``: what ``worker`` and ``serve`` share."""
    return log_format_option(retain_option(command))


def metrics_options(command: F) -> F:
    """``--metrics-port`` and ``--metrics-host`` (``worker``; ``serve`` has ``GET /metrics``)."""
    port = click.option(
        "--metrics-port",
        type=click.IntRange(0, 65535),
        help="Serve this process's metrics (Prometheus text) on this port; 0 picks a free one, "
        "printed on stderr. Needs the server extra: pip install 'procflow[server]'.",
    )
    host = click.option(
        "--metrics-host",
        default="127.0.0.1",
        show_default=True,
        help="The address --metrics-port listens on (it has no authentication).",
    )
    return port(host(command))


@dataclass
class Operations:
    """What runs beside a worker or a server: its metrics observer (None without metrics)."""

    observer: Observer | None = None


@contextmanager
def operations(
    db_url: str,
    *,
    log_format: str,
    retain: str | None,
    metrics: tuple[str, int] | None = None,
    verbose: bool = False,
) -> Iterator[Operations]:
    """Logs configured, and for the block's length: the metrics listener (``metrics``: host,
    port) and the periodic purge (``retain``). Bad options are refused before anything starts."""
    configure_logs(log_format, verbose=verbose)
    from procflow.runtime.operations.retention import RetentionJob, retention

    kept = retention(retain) if retain is not None else None
    stops: list[Callable[[], None]] = []
    done = Operations()
    try:
        if metrics is not None:
            done.observer = _serve_metrics(db_url, *metrics, stops)
        if kept is not None:
            job = RetentionJob(db_url, kept)
            job.start()
            stops.append(job.stop)
        yield done
    finally:
        for stop in reversed(stops):
            stop()


def _serve_metrics(db_url: str, host: str, port: int, stops: list[Callable[[], None]]) -> Observer:
    try:
        from procflow.server.metrics import ProcessMetrics
    except ImportError:  # prometheus-client comes with the server extra
        raise MissingExtraError("--metrics-port", "server") from None
    metrics = ProcessMetrics(db_url)
    bound, stop = metrics.serve(host, port)
    stops.append(stop)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"metrics on http://{shown}:{bound}/metrics", err=True)
    return metrics.observer


@click.command("purge")
@click.option(
    "--ended-before",
    "ended_before",
    required=True,
    metavar="TIMESTAMP|DURATION",
    help="Runs that ended before this instant: a timestamp (2027-01-01T00:00:00Z) or a "
    "duration counted back from the store's clock (30d, PT12H).",
)
@click.option("--dry-run", is_flag=True, help="Count the runs; delete nothing.")
@as_option("NAME needs the role deployer.")
@db_option
@json_option
def purge(ended_before: str, dry_run: bool, user: str | None, db_url: str, as_json: bool) -> None:
    """Delete the runs completed, cancelled or aborted before a cut-off, with their history,
    tokens, scopes, deliveries, tasks and messages. Waiting, running and failed runs stay."""
    with _engine.engine_at(db_url) as engine:
        report = engine.purge(ended_before, dry_run=dry_run, user=user)
    if as_json:
        echo_json(report)
        return
    verb = "would purge" if dry_run else "purged"
    click.echo(f"{verb} {report['purged']} runs that ended before {report['ended_before']}")
