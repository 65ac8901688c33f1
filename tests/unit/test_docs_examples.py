"""The documentation keeps its promises: every complete example validates, every link resolves.

A complete example in the docs is a fenced block whose info string names the file it would be,
e.g. ```` ```yaml title=orders.intent ````. Each markdown page's titled blocks are written to one
temporary project folder under those names (``custom/tasks.py``, ``connectors/crm/manifest.yaml``
included, so an example may bring its delegate or connector), then every ``*.intent`` and
``*.flow.yaml`` among them is validated and must produce no error and no warning.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from procflow.model.validate import load_file

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BENCH_README = ROOT / "bench" / "README.md"
DEFINITION_SUFFIXES = (".intent", ".flow.yaml")
README_LIMIT = 15_000

# ```yaml title=NAME   (the fence may be longer than three backticks)
_FENCE = re.compile(
    r"^(?P<fence>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.S | re.M
)
_TITLE = re.compile(r"\btitle=(?P<name>\S+)")
_SECRET = re.compile(r"secret\(\s*['\"](?P<name>[A-Za-z_][A-Za-z0-9_]*)['\"]\s*\)")
_LINK = re.compile(r"\[[^\]\n]*\]\((?P<target>[^)\s]+)\)")
# Spellings that point outside the repository (the contract the project was built from).
_OUTSIDE = re.compile(r"\.\./shared|shared/spec|\.\./seeds|\bspec/[a-z]+\.md")


@dataclass(frozen=True)
class Example:
    page: Path
    name: str
    line: int
    text: str


def markdown_pages() -> list[Path]:
    return sorted([README, BENCH_README, *DOCS.rglob("*.md")])


def examples_of(page: Path) -> list[Example]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        title = _TITLE.search(match.group("info"))
        if title:
            line = text.count("\n", 0, match.start()) + 1
            found.append(Example(page, title.group("name"), line, match.group("body")))
    return found


def pages_with_examples() -> list[Path]:
    return [p for p in markdown_pages() if examples_of(p)]


def write_project(examples: list[Example], folder: Path) -> None:
    for example in examples:
        target = folder / example.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(example.text, encoding="utf-8")


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


# --- the examples ------------------------------------------------------------------------------


def test_the_reference_pages_hold_examples() -> None:
    """Each dialect page shows runnable files (a test that found none would prove nothing)."""
    reference = DOCS / "reference"
    for page, suffix in (("intent.md", ".intent"), ("flow.md", ".flow.yaml")):
        names = [e.name for e in examples_of(reference / page)]
        assert sum(n.endswith(suffix) for n in names) >= 5, (page, names)


@pytest.mark.parametrize("page", pages_with_examples(), ids=_rel)
def test_every_example_of_a_page_validates(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    examples = examples_of(page)
    names = [e.name for e in examples]
    repeated = sorted({n for n in names if names.count(n) > 1})
    assert not repeated, f"{_rel(page)}: example names must be unique on a page: {repeated}"
    for example in examples:
        assert not Path(example.name).is_absolute() and ".." not in Path(example.name).parts
    write_project(examples, tmp_path)
    # The examples are validated as on a machine whose secrets are configured.
    secrets = {m.group("name") for e in examples for m in _SECRET.finditer(e.text)}
    secrets_file = tmp_path / ".secrets"
    secrets_file.write_text("".join(f"{name}=x\n" for name in sorted(secrets)), encoding="utf-8")
    monkeypatch.setenv("PROCFLOW_SECRETS_FILE", str(secrets_file))
    definitions = [e for e in examples if e.name.endswith(DEFINITION_SUFFIXES)]
    assert definitions, f"{_rel(page)} has titled blocks but no definition file among them"
    problems = []
    for example in definitions:
        loaded = load_file(str(tmp_path / example.name))
        problems += [f"{_rel(page)}:{example.line}: {d.format()}" for d in loaded.diagnostics]
    assert not problems, "\n".join(problems)


def test_a_broken_example_is_caught(tmp_path: Path) -> None:
    """The harness really validates: a titled block with a mistake produces a problem."""
    page = tmp_path / "page.md"
    page.write_text(
        "```yaml title=bad.flow.yaml\n"
        "flow: bad\nsteps:\n  - a: { wait: { for: 1d }, retyr: 1 }\n"
        "```\n",
        encoding="utf-8",
    )
    examples = examples_of(page)
    assert [e.name for e in examples] == ["bad.flow.yaml"]
    write_project(examples, tmp_path)
    loaded = load_file(str(tmp_path / "bad.flow.yaml"))
    assert any("unknown key [retyr]" in d.message for d in loaded.diagnostics)


# --- the pages themselves ----------------------------------------------------------------------


def anchors(page: Path) -> set[str]:
    """The anchors a markdown renderer (GitHub's rules) gives the headings of ``page``."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = 0
        while (candidate := slug if n == 0 else f"{slug}-{n}") in found:
            n += 1
        found.add(candidate)
    return found


@pytest.mark.parametrize("page", markdown_pages(), ids=_rel)
def test_links_stay_inside_the_repository_and_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    outside = [m.group() for m in _OUTSIDE.finditer(text)]
    assert not outside, f"{_rel(page)} refers to files outside the repository: {outside}"
    broken = []
    for match in _LINK.finditer(text):
        target, _, anchor = match.group("target").partition("#")
        if re.match(r"^[a-z]+:", target):
            continue  # a URL
        resolved = (page.parent / target).resolve() if target else page
        if not _resolves(resolved, anchor):
            broken.append(match.group("target"))
    assert not broken, f"{_rel(page)} links to missing files or headings: {broken}"


def _resolves(target: Path, anchor: str) -> bool:
    """A file inside the repository, and for a markdown file the heading ``anchor`` names."""
    if ROOT not in target.parents or not target.exists():
        return False
    return not anchor or target.suffix != ".md" or anchor in anchors(target)


def test_heading_anchors_follow_the_renderer() -> None:
    page = DOCS / "reference" / "flow.md"
    assert "failure-optional-recover-error" in anchors(page)
    assert "the-flow-dialect-flowyaml" in anchors(page)


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    linked = {(DOCS / m.group("target").split("#")[0]).resolve() for m in _LINK.finditer(index)}
    pages = {p.resolve() for p in DOCS.rglob("*.md")} - {(DOCS / "README.md").resolve()}
    missing = sorted(str(p.relative_to(ROOT)) for p in pages - linked)
    assert not missing, f"docs/README.md does not link {missing}"


def test_the_readme_stays_short() -> None:
    assert len(README.read_text(encoding="utf-8")) <= README_LIMIT


# --- no file of the repository points outside it -----------------------------------------------

_SPEC_PAGES = r"(?:README|intent|flow|runtime|interfaces|testing)\.md"
# A path into the contract the project was built from, however it is spelled.
_OUTSIDE_PATH = re.compile(
    r"\.\./shared|shared/spec|\.\./seeds|\bseeds/[\w-]+\.txt|\bspec/" + _SPEC_PAGES
)
# A page of that contract named bare (``docs/runtime.md`` or ``reference/flow.md`` are paths and
# pass); a bare name passes only where it is a file next to the one naming it (docs pages).
_BARE_PAGE = re.compile(r"(?<![\w./-])(?:intent|flow|runtime|interfaces|testing)\.md\b")


def repository_files() -> list[Path]:
    """Tracked files plus new ones git does not ignore (they are about to be committed)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def outside_references(path: Path, text: str) -> list[tuple[int, str]]:
    """(line, spelling) of each reference in ``text`` (of ``path``) to a file outside the repo."""
    found: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [(number, m.group()) for m in _OUTSIDE_PATH.finditer(line)]
        bare = [m.group() for m in _BARE_PAGE.finditer(line)]
        found += [(number, name) for name in bare if not (path.parent / name).is_file()]
    return found


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git work tree to list files")
def test_no_file_of_the_repository_refers_to_files_outside_it() -> None:
    this_file = Path(__file__).resolve()  # it has to spell what it looks for
    found = []
    for path in repository_files():
        text = None if path.resolve() == this_file else text_of(path)
        for number, spelling in outside_references(path, text or ""):
            found.append(f"{_rel(path)}:{number}: {spelling}")
    assert not found, "references to files outside the repository:\n" + "\n".join(found)


def test_outside_references_are_told_from_paths_inside(tmp_path: Path) -> None:
    (tmp_path / "runtime.md").write_text("# a docs page\n", encoding="utf-8")
    text = (
        "see ../shared/spec/flow.md\n"
        "the contract in /work/shared/spec/\n"
        '(flow.md, "Expressions") and the JSON shapes of interfaces.md\n'
        "normative: ``seeds/flow-waiting-and-polling.txt``; spec/testing.md\n"
        "docs/runtime.md, reference/flow.md, docs/reference/intent.md, test_flow.md\n"
        "[runtime.md](runtime.md) is a page next to this one\n"
    )
    assert outside_references(tmp_path / "page.md", text) == [
        (1, "../shared"),
        (1, "spec/flow.md"),
        (2, "shared/spec"),
        (3, "flow.md"),
        (3, "interfaces.md"),
        (4, "seeds/flow-waiting-and-polling.txt"),
        (4, "spec/testing.md"),
    ]
