"""Shared test set-up: procflow.testing provides the virtual-clock `engine` fixture."""

pytest_plugins = ["procflow.testing"]
