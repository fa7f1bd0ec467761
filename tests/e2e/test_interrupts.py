"""An interrupted run (Ctrl-C or SIGTERM mid-workload) leaves no vLLM process behind."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.settings import ROOT
from reports.run_files import read_starts
from tests.e2e.helpers import (
    group_alive,
    junit_cases,
    scenario_requests,
    scenario_warmup,
    server_pid,
    wait_finished,
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_mid_workload_stops_every_server_process(tmp_path: Path, sig: int) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "realtime",
        f"--slo-report-dir={tmp_path}",
        "-p",
        "no:cacheprovider",
        "--slo-no-progress",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        # As a terminal's Ctrl-C finds it: a shell without job control (`cmd &`, nohup) starts
        # its background jobs with SIGINT ignored, and the child would inherit that.
        preexec_fn=functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL),
    )
    try:
        out = _interrupt(proc, tmp_path, sig)
    finally:
        if proc.poll() is None:  # a failed check must not leave a workload running
            proc.kill()
            proc.wait()
    print(out[-3000:])
    pid = read_starts(tmp_path)[0]["pid"]
    assert proc.returncode != 0  # interrupted, not passed
    assert group_alive(pid) == []
    # What was measured before the interrupt is kept, marked as partial.
    summary = json.loads((tmp_path / "realtime" / "summary.json").read_text())
    assert summary["invalid_reasons"][0] == "interrupted: partial run"
    rows = (tmp_path / "realtime" / "records.jsonl").read_text().splitlines()
    assert 0 < len(rows) < scenario_warmup() + scenario_requests()  # warm-up, part of measured
    # Every record says how the run ended; pytest's exit status stays "interrupted".
    assert proc.returncode == pytest.ExitCode.INTERRUPTED
    name = signal.Signals(sig).name
    case = junit_cases(tmp_path / "junit.xml")["run interrupted"]
    assert case["outcome"] == "error" and f"(by {name}" in case["message"], case
    html = (tmp_path / "signoff.html").read_text()
    assert "Result: INCOMPLETE" in html and f"This run ended early, interrupted (by {name}" in html


def _interrupt(proc: subprocess.Popen[str], run_dir: Path, sig: int) -> str:
    """Wait for the server, let the workload run, send ``sig``; the run's output."""
    pid = server_pid(proc, run_dir)
    assert group_alive(pid), "the server should be running before the interrupt"
    # Inside the measured requests, by the server's own count: building 3600 prompts can take
    # longer than a fixed sleep on a loaded machine, and an interrupt then measures nothing.
    wait_finished(pid, scenario_warmup() + 12)  # the warm-up and 3 s of measured requests
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    return out
