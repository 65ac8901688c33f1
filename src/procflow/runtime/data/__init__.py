"""What users hand the engine, checked and shaped before anything is stored.

JSON from outside (``user_json``), a flow run's inputs, entity records, events, secrets and var
encryption, and who acts (identities, roles, tokens). Pure: nothing here opens a transaction.
May import ``runtime.clock``/``transition``/``faults`` and the layers below the runtime.
"""
