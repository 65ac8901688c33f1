"""The queries of what runs exchange with the world beside their own rows: entity records,
events and their deliveries, the outbox of messages, user tasks, and the idempotency keys of
HTTP calls.

May import ``store.queries.runrows`` (an event or a task resumes a run's token), ``base`` and
the store's rows, codec and dialect modules.
"""
