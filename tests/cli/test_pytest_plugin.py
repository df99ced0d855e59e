"""The ``memory_store`` fixture, used from a separate project as a user would."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

STRICT_TESTS = """
import pytest
from loopctl_memory import MemoryCategory, MemoryEntry, SqlMemoryStore

@pytest.mark.asyncio
async def test_stores_and_retrieves(memory_store):
    assert isinstance(memory_store, SqlMemoryStore)
    await memory_store.store(MemoryEntry(MemoryCategory.FACT, "the plugin works"))
    [found] = await memory_store.retrieve("plugin", 1)
    assert "the plugin works" == found.memory

@pytest.mark.asyncio
async def test_every_test_gets_a_fresh_store(memory_store):
    assert await memory_store.is_empty()
"""

AUTO_TESTS = STRICT_TESTS.replace("@pytest.mark.asyncio\n", "")


def quiet_asyncio(mode: str) -> tuple[str, ...]:
    return ("-p", "no:cacheprovider", "-o", f"asyncio_mode={mode}",
            "-o", "asyncio_default_fixture_loop_scope=function",
            "-W", "error::ResourceWarning")  # fmt: skip


@pytest.mark.parametrize(("mode", "source"), [("strict", STRICT_TESTS), ("auto", AUTO_TESTS)])
def test_the_fixture_works_with_no_setup_in_either_asyncio_mode(pytester, mode, source):
    pytester.makepyfile(test_user=source)
    result = pytester.runpytest_subprocess(*quiet_asyncio(mode))
    result.assert_outcomes(passed=2)


def test_the_readme_example_runs_as_written_in_a_new_project(pytester):
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Testing your own agent", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    pytester.makepyfile(test_readme=example)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # no asyncio settings
    result.assert_outcomes(passed=1)


def test_the_fixture_is_listed_with_its_documentation(pytester):
    result = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["memory_store*", "*fresh, migrated*:memory:*"])


def test_without_pytest_asyncio_the_plugin_loads_and_the_fixture_says_what_to_install(
    pytester, monkeypatch
):
    pytester.makepyfile(
        test_user="""
        def test_unrelated():
            assert True

        def test_wants_a_store(memory_store):
            pass
        """
    )
    # A pytest_asyncio that cannot be imported comes first on the path, and its plugin is
    # not loaded: as if it were not installed.
    shadow = pytester.mkdir("shadow")
    (shadow / "pytest_asyncio").mkdir()
    (shadow / "pytest_asyncio" / "__init__.py").write_text(
        "raise ModuleNotFoundError('pytest_asyncio is not installed', name='pytest_asyncio')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    result = pytester.runpytest_subprocess("-p", "no:asyncio", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*memory_store fixture needs pytest-asyncio: pip install*"])
