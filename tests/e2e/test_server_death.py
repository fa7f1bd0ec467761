"""vLLM killed (SIGKILL) in the middle of a workload: a clear failure, nothing measured is lost,
and the next test that needs a server gets a fresh one."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil

from fixtures.settings import ROOT
from reports.run_files import read_starts
from tests.e2e.helpers import (
    group_alive,
    scenario_warmup,
    server_pid,
    set_requests,
    wait_finished,
)


def _scenario_copy(folder: Path, name: str, requests: int) -> Path:
    text = (ROOT / "slo" / "scenarios" / "realtime.toml").read_text()
    text = text.replace('name = "realtime"', f'name = "{name}"', 1)
    text = set_requests(text, requests)
    path = folder / f"{name}.toml"
    path.write_text(text)
    (folder / f"test_{name}.py").write_text(
        "import pytest\n"
        f"pytestmark = pytest.mark.scenario({str(path)!r})\n"
        "def test_objective(slo_check, objective):\n    slo_check(objective)\n"
    )
    return path


def test_sigkill_mid_workload(tmp_path: Path) -> None:
    # Same engine args, so both modules ask for one server config: the second must get a new
    # server, not the dead one. "a_killed" runs first (file order within one config).
    _scenario_copy(tmp_path, "a_killed", 400)  # 100 s at 4 req/s: the kill lands mid-run
    _scenario_copy(tmp_path, "b_after", 20)
    _scenario_copy(tmp_path, "c_engine", 400)  # on b's server, whose engine core is then killed
    reports = tmp_path / "reports"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "fixtures.plugin",
            str(tmp_path / "test_a_killed.py"),
            str(tmp_path / "test_b_after.py"),
            str(tmp_path / "test_c_engine.py"),
            f"--slo-report-dir={reports}",
            f"--junitxml={reports / 'junit.xml'}",  # the modules are not under suites/
            "-p",
            "no:cacheprovider",
            "--slo-no-progress",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    warmup = scenario_warmup()  # the copies keep realtime's
    first = server_pid(proc, reports)
    wait_finished(first, warmup + 3)  # past the warm-up requests, inside the measured ones
    os.kill(first, signal.SIGKILL)  # the API server only, as the OOM killer would
    # Then the engine core of the next server, once c_engine's workload runs on it.
    second = server_pid(proc, reports, index=1)
    # b_after's 20 and its warm-up, c_engine's warm-up, 3 measured
    wait_finished(second, 20 + warmup + warmup + 3)
    (core,) = [p for p in psutil.Process(second).children() if "EngineCore" in p.name()]
    core.kill()
    out, _ = proc.communicate(timeout=900)
    print(out[-6000:])
    assert proc.returncode == 1

    # The killed scenario's tests fail with the exit code and the log's tail, every one of them
    # with the same error (the workload is not sent again).
    cases = ET.parse(reports / "junit.xml").getroot().findall(".//testcase")
    assert len(cases) == 16  # 15 tests, and the error case "run server died"
    messages = {
        (str(c.get("classname")), str(c.get("name"))): "".join(
            str(f.get("message", "")) for f in c.iter() if f.tag in ("failure", "error")
        )
        for c in cases
    }
    died = [m for (cls, _), m in messages.items() if "a_killed" in cls]
    assert len(died) == 5
    assert all("exited with code -9 (killed by SIGKILL)" in m for m in died), died
    assert all("--- last lines of the log ---" in m for m in died)
    assert out.count("exited with code -9") >= 5
    # An engine core's death is named from the server's log, whatever the API server's code.
    engine = [m for (cls, _), m in messages.items() if "c_engine" in cls]
    assert len(engine) == 5
    assert all("its log's first error: " in m.splitlines()[0] for m in engine), engine[0]
    assert all("EngineDeadError" in m.splitlines()[0] for m in engine), engine[0]
    assert all("Gone before it: VLLM::EngineCore" in m for m in engine), engine[0]
    assert all(f"pid {core.pid}" in m for m in engine), engine[0]
    ending = messages[("run", "run server died")]
    assert "the run ended early, server died (vLLM server (pid" in ending, ending
    assert "Result: INCOMPLETE" in (reports / "signoff.html").read_text()

    # What was measured is kept: requests that were in flight are errors, not dropped.
    folder = reports / "a_killed"
    rows = [json.loads(r) for r in (folder / "records.jsonl").read_text().splitlines()]
    measured = [r for r in rows if not r["warmup"]]
    assert 0 < len(measured) < 400  # sending stopped once the server was seen dead
    ok = [r for r in measured if r["error"] is None]
    errors = [r["error"] for r in measured if r["error"] is not None]
    assert ok and errors, errors
    assert all(re.match(r"(StreamCut|NoResponse|ConnectError): ", e) for e in errors), errors
    summary = json.loads((folder / "summary.json").read_text())
    # The server's death is its failure: every objective FAILs (not INVALID).
    assert "it died mid-workload" in summary["server_failures"]
    assert summary["invalid_reasons"] == []
    assert summary["summary"]["errors"] == len(errors)

    # The next test that needs the config got a fresh server, and it served every request.
    pids = [s["pid"] for s in read_starts(reports)]
    assert len(pids) == 2 and pids[0] != pids[1]
    after = [
        json.loads(r) for r in (reports / "b_after" / "records.jsonl").read_text().splitlines()
    ]
    assert len(after) == 28 and all(r["error"] is None for r in after)
    assert group_alive(pids[0]) == [] and group_alive(pids[1]) == []
