"""The built-in connectors' actions (``http``, ``log``, ``slack``, ``email``), one module each;
their manifests are the ``*.yaml`` files beside them.

They import only what a project's own connector sees: the step context
(``runtime.interpret.context``) and ``errors``.
"""
