"""The migrations ship in the wheel and run from an installed package in any directory."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from loopctl_memory import migrate

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio, sys
import loopctl_memory
from loopctl_memory import MemoryCategory, MemoryEntry, open_store

async def main():
    async with open_store("fresh.db") as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "from the wheel"))
        print(loopctl_memory.__file__)
        print(await store.schema_revision(), await store.count())

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(ROOT)],
        check=True,
    )  # fmt: skip
    (built,) = out.glob("loopctl_memory-*.whl")
    return built


def test_the_wheel_contains_the_migrations_and_type_marker(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "loopctl_memory/migrations/env.py" in names
    assert "loopctl_memory/migrations/script.py.mako" in names
    assert "loopctl_memory/migrations/versions/0001_entries_and_tags.py" in names
    assert "loopctl_memory/py.typed" in names


def test_an_installed_wheel_creates_and_migrates_a_database_from_another_directory(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
         str(wheel)],
        check=True,
    )  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The wheel's copy comes first on the path; dependencies come from this environment.
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    location, status = done.stdout.splitlines()
    assert Path(location).is_relative_to(site)
    assert f"{migrate.head()} 1" == status
    assert (elsewhere / "fresh.db").exists()
