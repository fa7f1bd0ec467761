"""Extensions through the suite's pytest hooks (fixtures/hookspec.py), on a stored run replayed
(no server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEW = ROOT / "tests" / "unit" / "data" / "run-new"

PLUGIN = """\
import os
from pathlib import Path


def pytest_slo_update_environment(config, environment):
    environment["rack"] = "r7"


def pytest_slo_scenario_result(config, result):
    with Path(os.environ["SLO_HOOK_OUT"]).open("a") as f:
        f.write(f"{result.selection.label} {result.summary.n}\\n")
"""


def test_an_extension_adds_environment_facts_and_sees_each_result(tmp_path: Path) -> None:
    (tmp_path / "slo_hook_probe.py").write_text(PLUGIN)
    seen = tmp_path / "seen.txt"
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "--rootdir", str(ROOT),
            "-c", str(ROOT / "pyproject.toml"), "-p", "no:cacheprovider", "-p", "slo_hook_probe",
            str(ROOT / "suites" / "test_realtime.py"), f"--slo-replay={NEW}",
            f"--slo-report-dir={run_dir}",
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={
            **os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "SLO_HOOK_OUT": str(seen),
        },
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert json.loads((run_dir / "environment.json").read_text())["rack"] == "r7", out
    (line,) = seen.read_text().splitlines()  # once per scenario, however many objectives
    label, n = line.split()
    assert label == "realtime" and int(n) > 0, out
    # The suite's own implementation still hands the samples to pytest-benchmark.
    bench = json.loads((run_dir / "benchmark.json").read_text())
    assert "realtime[ttft]" in {b["name"] for b in bench["benchmarks"]}, out
