"""Every command documents itself with an example, and the documentation stays whole.

The README is what a newcomer reads in the first five minutes; the rest lives in
docs/, the site `make docs` builds (mkdocs build --strict checks its links and
references; these tests check what it cannot: where each fact lives).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from loopctl_memory.cli import PROG, cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
COMMANDS = sorted(cli.commands)
README_MAX_LINES = 250


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def documentation() -> list[Path]:
    return [README, *pages()]


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


def test_the_cli_page_shows_every_command():
    """As `cmd ...` in a code span, or in a `loopctl-memory ... cmd` example."""
    text = read(DOCS / "cli.md")
    missing = [
        command
        for command in COMMANDS
        if not re.search(rf"`{command}\b|{PROG}\b[^\n`]*\s{command}\b", text)
    ]
    assert [] == missing, "docs/cli.md does not show these commands"


def test_the_readme_starts_with_the_two_command_quick_start():
    lines = read(README).splitlines()
    assert lines[0].startswith("# ")
    first_section = next(i for i, line in enumerate(lines) if line.startswith("## "))
    assert "## Quick start" == lines[first_section]
    pitch = [line for line in lines[1:first_section] if line.strip()]
    assert 2 <= len(pitch) <= 4, "a 2-4 line pitch, then the quick start"
    section = "\n".join(lines[first_section:])
    commands = section.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert ["make demo", "make test"] == [line.split("#")[0].strip() for line in commands]
    assert "Python 3.11+ and make" in section.split("```", 1)[0]


def test_the_readme_stays_short():
    assert len(read(README).splitlines()) <= README_MAX_LINES


def test_every_relative_link_of_the_readme_names_a_file_of_the_repository():
    targets = re.findall(r"\]\(([^)\s]+)\)", read(README))
    relative = [target for target in targets if not re.match(r"[a-z]+:|#", target)]
    assert relative
    missing = [target for target in relative if not (ROOT / target.split("#")[0]).exists()]
    assert [] == missing


def test_the_readme_points_to_every_guide_page():
    text = read(README)
    guides = [page.relative_to(ROOT).as_posix() for page in DOCS.glob("*.md")]
    unlinked = [guide for guide in guides if f"]({guide}" not in text]
    assert {"docs/benchmark-results.md"} >= set(unlinked)  # RESULTS.md itself is linked


def nav_pages() -> list[str]:
    text = read(MKDOCS)
    nav = text.split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"(?:^|\s)([\w/-]+\.md)$", nav, flags=re.MULTILINE)


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    listed = nav_pages()
    on_disk = [page.relative_to(DOCS).as_posix() for page in pages()]
    assert sorted(on_disk) == sorted(listed)
    assert len(set(listed)) == len(listed)


def test_the_site_is_built_strictly_with_every_snippet_checked():
    text = read(MKDOCS)
    assert re.search(r"^strict: true$", text, flags=re.MULTILINE)
    assert re.search(r"^\s+check_paths: true$", text, flags=re.MULTILINE)
    assert "mkdocs build --strict" in read(ROOT / "Makefile")


def test_every_snippet_the_pages_include_is_a_file_of_the_repository():
    included = [
        (page.name, path)
        for page in pages()
        for path in re.findall(r'--8<-- "([^"]+)"', read(page))
    ]
    assert included
    missing = [(page, path) for page, path in included if not (ROOT / path).is_file()]
    assert [] == missing


def test_the_docs_name_no_internal_module():
    """The loopctl_memory.sql package is internal and moves: pages name the public API only."""
    named = [
        page.name
        for page in [*documentation(), MKDOCS]
        if re.search(r"loopctl_memory[./]sql\b|\bsql/[\w/]+\.py", read(page))
    ]
    assert [] == named


def test_the_docs_install_only_what_works_from_a_checkout():
    """Every extra they name exists and comes with its checkout form; nothing needs publishing."""
    pyproject = tomllib.loads(read(ROOT / "pyproject.toml"))
    extras = set(pyproject["project"]["optional-dependencies"])
    named: list[str] = []
    for path in documentation():
        text = read(path)
        named += re.findall(r"pip install '[\w-]+\[([\w-]+)\]'", text)
        for paragraph in text.split("\n\n"):
            if re.search(r"pip install '[\w-]+\[", paragraph):
                assert "pip install -e '.[" in paragraph, (path.name, paragraph)
        assert "uvx" not in text, path.name
    assert named
    assert set(named) <= extras


def test_the_command_line_page_says_how_to_reach_the_command_from_a_checkout():
    assert "source .venv/bin/activate" in read(DOCS / "cli.md")
    assert "source .venv/bin/activate" in read(README)


def test_the_quality_figures_name_their_data():
    assert "snap-research/locomo" in read(DOCS / "rankings.md")


def test_the_docs_say_where_blank_text_is_refused_and_where_it_is_not():
    text = " ".join(read(DOCS / "getting-started.md").split())
    assert "The library stores a blank `memory` and empty tags, as loopctl 0.1.0 does" in text
    assert "the command line and the MCP tools refuse them" in text
