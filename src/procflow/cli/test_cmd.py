"""`procflow test`: run the scenarios of ``*.test.yaml`` files, with route coverage."""

from __future__ import annotations

from pathlib import Path

import click

from procflow.cli.output import EXIT_BAD, EXIT_OK, EXIT_USAGE
from procflow.errors import UsageError
from procflow.testing import report
from procflow.testing.runner import Suite, run_suite


@click.command("test")
@click.argument("paths", nargs=-1)
@click.option("--name", "pattern", help="Only the scenarios whose name contains PATTERN.")
@click.option("--coverage", "with_coverage", is_flag=True, help="Print route coverage.")
@click.option(
    "--min-coverage", type=click.FloatRange(0, 100), metavar="PCT",
    help="Exit 1 when a definition's route coverage is below PCT (implies --coverage).",
)  # fmt: skip
@click.option("--junit", "junit_file", metavar="FILE", help="Write JUnit XML to FILE.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_context
def test(
    ctx: click.Context,
    paths: tuple[str, ...],
    pattern: str | None,
    with_coverage: bool,
    min_coverage: float | None,
    junit_file: str | None,
    as_json: bool,
) -> None:
    """Run the scenarios of the *.test.yaml files in PATH (files, or folders searched below;
    default: the current folder). Exit 0 all pass, 1 any fails, 2 a file is unusable."""
    suite = run_suite(list(paths), name=pattern)
    if suite.problems:  # as `validate` does: the problems on stdout, one line on stderr
        for problem in suite.problems:
            click.echo(problem.format())
        click.echo(f"error: {len(suite.problems)} problem(s); no scenario ran", err=True)
        ctx.exit(EXIT_USAGE)
    if junit_file is not None:
        _write(junit_file, report.junit_xml(suite.results))
    if as_json:
        click.echo(report.as_json(suite.results))
    else:
        _print(suite, with_coverage or min_coverage is not None)
    ctx.exit(_exit_code(suite, min_coverage))


def _print(suite: Suite, with_coverage: bool) -> None:
    for result in suite.results:
        click.echo("\n".join(report.result_lines(result)))
    if with_coverage:
        click.echo("")
        click.echo("\n".join(report.coverage_lines(suite.coverage)))
    click.echo(report.summary(suite.results))


def _exit_code(suite: Suite, min_coverage: float | None) -> int:
    if not suite.ok:
        return EXIT_BAD
    if min_coverage is not None and any(c.percent < min_coverage for c in suite.coverage):
        below = [c for c in suite.coverage if c.percent < min_coverage]
        for one in below:
            click.echo(f"coverage {one.percent:.0f}% < {min_coverage:g}% for {one.file}", err=True)
        return EXIT_BAD
    return EXIT_OK


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--junit: cannot write [{path}]: {exc.strerror or exc}") from None


COMMANDS = (test,)
