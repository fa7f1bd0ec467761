"""SIGKILL of pytest (a CI runner's hard cancel) leaves no vLLM process behind: no teardown
runs, so the server's watchdog and its parent-death signal are all that stop it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from fixtures.settings import ROOT
from tests.e2e.helpers import server_pid


def test_sigkill_of_pytest_stops_every_vllm_process(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "pytest", "-m", "realtime", f"--slo-report-dir={tmp_path}"]
    proc = subprocess.Popen(
        [*cmd, "-p", "no:cacheprovider", "--slo-no-progress", "--slo-max-requests=200"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    family: list[psutil.Process] = []
    try:
        server = psutil.Process(server_pid(proc, tmp_path))
        family = [server, *server.children(recursive=True)]
        names = " | ".join(" ".join(p.cmdline())[:60] for p in family)
        assert len(family) >= 2, f"expected the API server and its engine core: {names}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        _, alive = psutil.wait_procs(family, timeout=30)
        assert alive == [], f"still running 30 s after SIGKILL of pytest: {alive}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in family:  # never leave them to the next test, whatever failed above
            with contextlib.suppress(psutil.Error):
                p.kill()
