"""`procflow schema` and definitions that cannot be deployed."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import Cli

from procflow.schemas import schema

Procflow = Callable[..., subprocess.CompletedProcess[str]]


@pytest.mark.parametrize("dialect", ["intent", "flow"])
def test_schema_prints_the_json_schema_of_a_dialect(procflow: Procflow, dialect: str) -> None:
    done = procflow("schema", dialect)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["$schema"].startswith("https://json-schema.org/")
    assert printed == schema(dialect)


def test_schema_of_an_unknown_dialect_is_refused(procflow: Procflow) -> None:
    done = procflow("schema", "yaml")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Invalid value for 'DIALECT': 'yaml' is not one of 'intent', 'flow'" in done.stderr


# --- a valid file that cannot be deployed: the definition is bad (exit 1), like an invalid one ---

SHOP = """\
name: {app}
entities:
  - name: Item
    fields:
      - {{ name: id, type: integer, primaryKey: true, generated: true }}
      - {{ name: title, type: string, required: true, length: 100 }}
      - {{ name: size, type: {size_type} }}
processes:
  - name: {process}
    trigger: {{ onCreate: Item }}
    steps:
      - {{ name: done, kind: end }}
"""
GREET = """\
flow: Tidy
steps:
  - hello: { log.write: { message: hi } }
"""


def shop(root: Path, file: str, app: str = "shop", size_type: str = "integer") -> str:
    process = "Tidy" if app == "shop" else "Other"
    (root / file).write_text(SHOP.format(app=app, size_type=size_type, process=process))
    return file


def refused_definition(cli: Cli, *args: str) -> str:
    """A definition that cannot be deployed: exit 1, one line on stderr, nothing on stdout."""
    done = cli(*args, code=1)
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    return Cli(db_url, db_env, tmp_path)


def test_an_incompatible_redeploy_exits_1_and_says_why(cli: Cli, tmp_path: Path) -> None:
    cli("deploy", shop(tmp_path, "shop.intent"))
    shop(tmp_path, "shop.intent", size_type="string")
    message = refused_definition(cli, "deploy", "shop.intent")
    assert message == (
        "error: entity [Item] cannot change this way over deployed records: field [size] changed "
        "type from integer to string. Redeploys may add entities, optional fields and relations "
        "only.\n"
    )
    assert refused_definition(cli, "run", "shop.intent", "--record", '{"title": "a"}') == message
    assert [d["latest"] for d in cli.json("definitions", "list")] == [1]


def test_an_entity_declared_by_another_file_exits_1_and_names_the_owner(
    cli: Cli, tmp_path: Path
) -> None:
    cli("deploy", shop(tmp_path, "shop.intent"))
    message = refused_definition(cli, "deploy", shop(tmp_path, "store.intent", app="store"))
    assert message == (
        "error: entity [Item] is already declared by the deployed file [shop]; two files cannot "
        "declare the same entity\n"
    )
    assert [d["name"] for d in cli.json("definitions", "list")] == ["Tidy"]


def test_a_name_deployed_in_the_other_dialect_exits_1(cli: Cli, tmp_path: Path) -> None:
    cli("deploy", shop(tmp_path, "shop.intent"))
    (tmp_path / "tidy.flow.yaml").write_text(GREET)
    message = refused_definition(cli, "deploy", "tidy.flow.yaml")
    assert message == (
        "error: [Tidy] is already deployed as an intent process; a flow cannot reuse the name\n"
    )
