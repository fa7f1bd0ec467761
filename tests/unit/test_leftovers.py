"""Server processes outlive no suite: the watchdog stops a server's whole family once the suite
process is gone, and a new run stops the leftovers of a killed one. No vLLM: stand-in processes
(sleep) play the suite and the server; tests/e2e/test_sigkill.py does it with real vLLM."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from fixtures.server import OWNER_ENV, WATCHDOG, clean_leftovers


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        with contextlib.suppress(psutil.Error):
            for c in psutil.Process(p.pid).children(recursive=True):
                c.kill()
        p.kill()
        p.wait()


def _server(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A process group like vLLM's: a leader and a child of it (its engine core)."""
    return subprocess.Popen(
        ["sh", "-c", "sleep 300 & exec sleep 300"],
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )


def _family(leader: int) -> list[psutil.Process]:
    for _ in range(100):  # the child may take a moment to appear
        procs = [psutil.Process(leader), *psutil.Process(leader).children(recursive=True)]
        if len(procs) == 2:
            return procs
        time.sleep(0.05)
    raise AssertionError("the stand-in server did not start its child")


def test_the_watchdog_stops_the_server_family_when_the_suite_dies(
    started: list[subprocess.Popen[bytes]],
) -> None:
    suite = subprocess.Popen(["sleep", "300"])
    server = _server()
    started += [suite, server]
    family = _family(server.pid)
    suite_start = repr(psutil.Process(suite.pid).create_time())
    dog = subprocess.Popen(
        [sys.executable, str(WATCHDOG), str(suite.pid), suite_start, str(server.pid)]
    )
    started.append(dog)
    _, alive = psutil.wait_procs(family, timeout=2)
    assert len(alive) == 2, "the watchdog must leave the server alone while the suite lives"
    suite.kill()
    suite.wait()
    _, alive = psutil.wait_procs(family, timeout=20)
    assert alive == []
    assert dog.wait(timeout=10) == 0


def test_a_new_run_stops_leftovers_of_a_killed_run_and_names_other_servers(
    started: list[subprocess.Popen[bytes]],
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # a suite process that has died
    dead_owner = f"{gone.pid}:1.0"
    orphan = _server({OWNER_ENV: dead_owner})
    live_owner = f"{os.getpid()}:{psutil.Process().create_time()!r}"
    owned = _server({OWNER_ENV: live_owner})  # another run's, still going: not touched
    started += [orphan, owned]
    orphans, others = _family(orphan.pid), _family(owned.pid)
    lines = clean_leftovers()
    _, alive = psutil.wait_procs(orphans, timeout=10)
    assert alive == []
    assert any(f"stopped pid {orphan.pid} " in line and "killed" in line for line in lines)
    assert all(p.is_running() for p in others)
    assert not any(f"pid {owned.pid} " in line for line in lines)
