"""Every command documents itself with an example, and the README names every command."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from loopctl_memory.cli import PROG, cli

README = Path(__file__).resolve().parents[2] / "README.md"
COMMANDS = sorted(cli.commands)


def test_the_commands_are_the_ones_the_spec_lists():
    expected = ["add", "consolidate", "delete", "embed-pending", "export", "forget", "get",
                "history", "import", "index", "init", "list", "mcp", "migrate", "reembed",
                "scopes", "search", "serve", "stats", "update"]  # fmt: skip
    assert expected == COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_ends_with_an_example(invoke, command):
    result = invoke(command, "--help")
    assert 0 == result.exit_code
    lines = result.stdout.rstrip().splitlines()
    examples = lines[lines.index("  Example:") + 1 :]
    assert examples
    assert all(line.startswith(f"    {PROG} ") or f"| {PROG} " in line for line in examples)
    assert any(f" {command}" in line for line in examples)


def test_the_group_help_ends_with_an_example(invoke):
    lines = invoke("--help").stdout.rstrip().splitlines()
    assert lines[-1].startswith(f"    {PROG} ")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_one_line_summary(command):
    summary = cli.commands[command].get_short_help_str(limit=200)
    assert summary.endswith(".")


def test_the_readme_shows_every_command():
    """As `cmd ...` in a code span, or in a `loopctl-memory ... cmd` example."""
    text = README.read_text(encoding="utf-8")
    missing = [
        command
        for command in COMMANDS
        if not re.search(rf"`{command}\b|{PROG}\b[^\n`]*\s{command}\b", text)
    ]
    assert [] == missing, "README.md does not show these commands"


def test_the_readme_installs_only_what_works_from_a_checkout():
    """Every extra it names exists and comes with its checkout form; nothing needs publishing."""
    text = README.read_text(encoding="utf-8")
    pyproject = tomllib.loads((README.parent / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    named = re.findall(r"pip install '[\w-]+\[([\w-]+)\]'", text)
    assert named
    assert set(named) <= extras
    for paragraph in text.split("\n\n"):
        if re.search(r"pip install '[\w-]+\[", paragraph):
            assert "pip install -e '.[" in paragraph, paragraph
    assert "uvx" not in text
    assert "source .venv/bin/activate" in text
    assert "snap-research/locomo" in text  # where the quality figures' data comes from


def test_the_readme_says_where_blank_text_is_refused_and_where_it_is_not():
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "The library stores a blank `memory` and empty tags, as loopctl 0.1.0 does" in text
    assert "the command line and the MCP tools refuse them" in text
