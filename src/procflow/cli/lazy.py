"""A command group that imports a command's module only when that command runs.

``procflow validate`` should not pay for importing the engine, the server or the test runner:
start-up time is most of a short command's time. Each command is listed with the function that
imports its module (which keeps its ``COMMANDS``) and the first sentence of its help, which
``procflow --help`` shows without importing anything (``tests/packaging/test_startup.py`` checks
that each listed summary is its command's own).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click

__all__ = ["LazyGroup", "Listed"]


@dataclass(frozen=True)
class Listed:
    """One command of a :class:`LazyGroup`: where it comes from, and its summary."""

    load: Callable[[], Sequence[click.Command]]
    """Imports the command's module; returns the module's ``COMMANDS``."""
    summary: str
    """The first sentence of the command's help (its line in ``--help``)."""


class LazyGroup(click.Group):
    """A :class:`click.Group` whose commands are imported on first use (``listed``: name →
    :class:`Listed`)."""

    def __init__(self, *args: Any, listed: Mapping[str, Listed], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listed = dict(listed)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.listed})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.listed:
            for command in self.listed[cmd_name].load():
                if command.name is not None:
                    self.commands.setdefault(command.name, command)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.listed and args[0] not in self.commands:
            # A mistyped name: click suggests the close ones among the commands it holds.
            for name in self.listed:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help`` from the summaries: no command module is imported."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, self._summary(ctx, name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _summary(self, ctx: click.Context, name: str, limit: int) -> str:
        listed = self.listed.get(name)
        if listed is None:  # added with add_command: already imported
            command = self.get_command(ctx, name)
            return command.get_short_help_str(limit) if command is not None else ""
        # Shortened as click shortens a command's own help (the same words, the same width).
        return click.Command(name, help=listed.summary).get_short_help_str(limit)
