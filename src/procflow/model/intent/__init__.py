"""The intent dialect (``*.intent``): ``compiler`` turns a node tree into an ``Application``; the
other modules each compile one part of it (entities, processes, steps, tasks, expressions).

May import ``model.connectors``, ``model.ir``, ``model.reading``, ``model.source`` and the layers
below the model.
"""
