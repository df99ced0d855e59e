"""The migrations ship in the wheel and run from an installed package in any directory.

They live at the repository's top level (``migrations/``); the wheel carries them as
``loopctl_memory/migrations``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from loopctl_memory import migrate

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = ROOT / "migrations"

SCRIPT = """
import asyncio, sys
import loopctl_memory
from loopctl_memory import MemoryCategory, MemoryEntry, migrate, open_store

async def main():
    async with open_store("fresh.db") as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "from the wheel"))
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.upgrade_to, "0001")
    async with open_store("fresh.db") as store:  # upgraded by every revision after 0001
        print(loopctl_memory.__file__)
        print(migrate.script_location())
        found = [entry.memory for entry in await store.retrieve("wheel", 5)]
        print(await store.schema_revision(), await store.count(), *found)

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
    shipped = {  # hatchling leaves __pycache__ out
        f"loopctl_memory/migrations/{path.relative_to(MIGRATIONS).as_posix()}": path.read_bytes()
        for path in MIGRATIONS.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {
            name: archive.read(name)
            for name in names
            if name.startswith("loopctl_memory/migrations/")
        } == shipped
    assert "loopctl_memory/migrations/env.py" in shipped
    assert "loopctl_memory/migrations/script.py.mako" in shipped
    assert "loopctl_memory/migrations/versions/0001_entries_and_tags.py" in shipped
    assert "loopctl_memory/py.typed" in names


def test_the_wheel_offers_the_langgraph_store_as_an_extra(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    assert "loopctl_memory/langgraph/store.py" in names
    assert "Provides-Extra: langgraph" in lines
    assert any(
        line.startswith("Requires-Dist: langgraph") and "extra == 'langgraph'" in line
        for line in lines
    )
    # The core needs none of it: no dependency outside an extra names LangGraph.
    assert not any(
        line.startswith("Requires-Dist: lang") and "extra ==" not in line for line in lines
    )


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
    location, scripts, status = done.stdout.splitlines()
    assert Path(location).is_relative_to(site)
    assert site / "loopctl_memory" / "migrations" == Path(scripts)
    assert f"{migrate.head()} 1 from the wheel" == status
    assert (elsewhere / "fresh.db").exists()


def test_the_wheel_ships_the_console_with_no_build_step(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        page = archive.read("loopctl_memory/web/assets/console.html").decode()
    for asset in ("console.html", "console.js", "console.css"):
        assert f"loopctl_memory/web/assets/{asset}" in names
    assert '<script src="/assets/console.js"' in page
