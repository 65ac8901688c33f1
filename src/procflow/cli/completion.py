"""``procflow completion bash|zsh|fish``: the shell completion script, from click.

The script calls ``procflow`` back with ``_PROCFLOW_COMPLETE`` set whenever the user presses
Tab; click answers with the commands, options and choices that fit (``procflow.cli.main``
hands that call to click before anything else runs).
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

__all__ = ["COMMANDS", "COMPLETE_VAR"]

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_PROCFLOW_COMPLETE"  # what click derives from the program name `procflow`


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS), metavar="SHELL")
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script for SHELL (bash, zsh or fish).

    \b
    bash: eval "$(procflow completion bash)"   (in ~/.bashrc; bash 4.4 or later)
    zsh:  eval "$(procflow completion zsh)"    (in ~/.zshrc)
    fish: procflow completion fish > ~/.config/fish/completions/procflow.fish
    """
    root = ctx.find_root()
    completer = get_completion_class(shell)
    if completer is None:  # the choices are click's own shells: never, unless click drops one
        raise click.BadParameter(f"no completion for {shell}", param_hint="SHELL")
    program = root.info_name or "procflow"
    script = completer(root.command, {}, program, COMPLETE_VAR).source()
    click.echo(script, nl=not script.endswith("\n"))


COMMANDS = [completion]
