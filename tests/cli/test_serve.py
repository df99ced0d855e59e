"""``serve``: refused before anything is opened when it would be unsafe; served otherwise."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx2

from .conftest import assert_fails


def test_serve_beyond_loopback_without_a_token_is_refused(on_db, db):
    result = on_db("serve", "--host", "0.0.0.0")  # noqa: S104 - the address refused
    assert_fails(result, 2, "needs a token", "--token")
    assert not db.exists()
    short = on_db("serve", "--host", "0.0.0.0", "--token", "short")  # noqa: S104
    assert_fails(short, 2, "at least 16 characters")


def test_serve_answers_until_interrupted(tmp_path: Path):
    """A real process: the console's shell, the API, then Ctrl-C stops it cleanly."""
    database = tmp_path / "memory.db"
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loopctl_memory",
            "--db",
            str(database),
            "serve",
            "--port",
            str(port),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LOOPCTL_MEMORY_TOKEN": ""},
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert f"at http://127.0.0.1:{port}/" in line
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}") as client:
            assert 200 == client.get("/").status_code
            assert [] == client.get("/api/memories").json()["memories"]
    finally:
        process.send_signal(signal.SIGINT)
        _, said = process.communicate(timeout=30)
    assert 0 == process.returncode, said
    assert database.exists()


def _free_port() -> int:
    """A loopback port free now (the server binds it right after)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
