"""The intent dialect (``*.intent``): ``compiler`` turns a node tree into an ``Application``; the
other modules each compile one part of it (entities, processes, steps, tasks, expressions,
permissions).

May import ``model.access``, ``model.connectors``, ``model.ir``, ``model.reading``,
``model.source`` and the layers below the model.
"""
