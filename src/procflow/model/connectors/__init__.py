"""Connector manifests: reading one (``manifest``) and finding them, project-local, installed or
built in (``registry``).

May import ``model.ir``, ``model.reading``, ``model.source`` and the layers below the model.
"""
