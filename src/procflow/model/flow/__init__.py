"""The flow dialect (``*.flow.yaml``): ``compiler`` turns a node tree into a ``Flow``; ``core`` and
the construct modules compile its steps, ``exprs`` its expressions.

May import ``model.intent.values`` (typed values both dialects share), ``model.connectors`` and
every room below it.
"""
