"""Reading definition files: safe YAML 1.2 into a node tree with positions (``yamlsrc``), typed
accessors that report instead of raising (``reader``), and bounded file reads (``files``).

May import ``model.source`` and the layers below the model.
"""
