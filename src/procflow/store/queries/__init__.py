"""The store's named queries, one module per group of tables; :class:`procflow.store.tx.Tx`
combines them. Each method is one or a few statements; none commits.

- ``base``: what every query module shares (the connection, dialect fragments, constants);
- ``runrows/``: a run's own rows, from its start to its purge;
- ``exchange/``: what runs exchange with the world (records, events, outbox, tasks,
  idempotency keys);
- ``definitions``, ``schedules``, ``meta``, ``metrics``: deployed versions, scheduled starts, the
  store's own settings, the figures of the metrics.

They import the store's rows, codec and dialect modules, and nothing above the store.
"""
