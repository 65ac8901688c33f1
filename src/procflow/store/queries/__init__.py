"""The store's named queries, one module per group of tables; :class:`procflow.store.tx.Tx`
combines them. Each method is one or a few statements; none commits.

They import the store's rows, codec and dialect modules, and nothing above the store.
"""
