"""The store's transaction surface: every named query, from every group, on one object."""

from __future__ import annotations

from procflow.store.backend import Backend
from procflow.store.queries.definitions import DefinitionQueries
from procflow.store.queries.exchange.events import EventQueries
from procflow.store.queries.exchange.idempotency import IdempotencyQueries
from procflow.store.queries.exchange.outbox import OutboxQueries
from procflow.store.queries.exchange.records import RecordQueries
from procflow.store.queries.exchange.tasks import TaskQueries
from procflow.store.queries.meta import MetaQueries
from procflow.store.queries.metrics import MetricsQueries
from procflow.store.queries.runrows.calls import CallQueries
from procflow.store.queries.runrows.history import HistoryQueries
from procflow.store.queries.runrows.leases import LeaseQueries
from procflow.store.queries.runrows.limits import LimitQueries
from procflow.store.queries.runrows.purge import PurgeQueries
from procflow.store.queries.runrows.run_data import RunDataQueries
from procflow.store.queries.runrows.runs import RunQueries
from procflow.store.queries.runrows.starts import StartQueries
from procflow.store.queries.runrows.timers import TimerQueries
from procflow.store.queries.runrows.tokens import TokenQueries
from procflow.store.queries.runrows.waits import WaitQueries
from procflow.store.queries.schedules import ScheduleQueries

__all__ = ["Tx"]


class Tx(
    StartQueries,  # first: it builds on the run, run data, token and history queries
    MetaQueries,
    DefinitionQueries,
    RecordQueries,
    RunQueries,
    LeaseQueries,
    TokenQueries,
    WaitQueries,
    TimerQueries,
    ScheduleQueries,
    CallQueries,
    LimitQueries,
    HistoryQueries,
    EventQueries,
    TaskQueries,
    OutboxQueries,
    RunDataQueries,
    IdempotencyQueries,
    MetricsQueries,
    PurgeQueries,
):
    """Named queries on one connection. Every method is one or a few statements; none commits:
    the transaction is the store's (:meth:`procflow.store.store.Store.tx`)."""

    def __init__(self, backend: Backend) -> None:
        self.b = backend
        self.c = backend.conn
        self.dialect: str = backend.dialect
