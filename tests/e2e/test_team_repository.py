"""A team's own repository, end to end on real CPU vLLM: a folder outside this checkout with only
an SLO file and a profiles file, the suite installed from its wheel, `pytest chat.slo.toml`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from fixtures.settings import ROOT
from tests.e2e.helpers import junit_cases

CHAT = """\
# The scenario a team gates its chat service on.
[scenario]
name = "chat"
description = "Our chat endpoint: short prompts, TTFT first"

[server]
max_num_seqs = 8

[workload]
api = "chat"
arrival = "poisson"
rate = "4 req/s"
requests = 400
warmup_requests = 4
prompt_tokens = { min = 32, max = 256 }
output_tokens = 16
seed = 7
timeout = "60s"

[validity]
schedule_lag_p99 = "50ms"
error_rate = "1%"

[objectives.team-cpu]
"ttft p50" = "<= 2s"
"output_throughput" = ">= 10 tok/s"
"""

PROFILES = """\
[team-cpu]
parent = "cpu-tiny"
description = "Our CI runner: the bundled CPU profile; an undecided objective only warns"
inconclusive = "warn"
"""

TESTS = {"test_objective[ttft p50]", "test_objective[output_throughput]"}
# What the wheel is built from: the packages pyproject.toml lists, and the files it reads.
SOURCES = ("pyproject.toml", "README.md", "slo", "fixtures", "reports")


def _wheel(tmp_path: Path) -> Path:
    """The suite's wheel, built from a copy: building in the checkout would leave build/ and
    an egg-info there. No build isolation: the venv's setuptools, no package index."""
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path / "wheels"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run([*cmd, "-w", str(out), str(src)], check=True, capture_output=True, timeout=600)
    (wheel,) = out.glob("vllm_ttft_slo-*.whl")
    return wheel


def _team_venv(tmp_path: Path, wheel: Path) -> Path:
    """A fresh venv with the wheel installed, reusing this venv's vLLM and the rest as they are.

    `--system-site-packages` would show the base interpreter's packages, not this venv's; a
    reinstall of vLLM would take minutes and a package index. So the new venv gets a .pth file
    naming this venv's site-packages: its packages are importable after the new venv's own.
    A .pth file's plain path line does not run that folder's own .pth files, so the editable
    install of this checkout there (an import hook set up by a .pth file) stays out: the suite
    imported is the wheel's. `--ignore-installed`: pip must not take that editable install's
    metadata, visible through the path, for the wheel already being installed."""
    venv = tmp_path / "team-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "suite-deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    pip = [python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed"]
    subprocess.run([*map(str, pip), str(wheel)], check=True, capture_output=True, timeout=600)
    return python


def _run(python: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SLO_PROFILE")}
    cmd = [str(python), "-m", "pytest", *args, "-p", "no:cacheprovider", "--slo-no-progress"]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1500)
    print(f"$ {shlex.join(cmd)}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
    return proc


def _outcomes(run: Path) -> dict[str, str]:
    rows = json.loads((run / "verdicts.json").read_text())
    return {r["test"]: r["outcome"] for r in rows}


def test_a_teams_slo_file_gates_cpu_vllm_from_its_own_folder(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "chat.slo.toml").write_text(CHAT)
    (team / "profiles.toml").write_text(PROFILES)
    python = _team_venv(tmp_path, _wheel(tmp_path))
    where = subprocess.run(
        [str(python), "-c", "import fixtures.plugin as p; print(p.__file__)"],
        cwd=team, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(tmp_path / "team-venv"), where  # the wheel's, not ours

    args = ["chat.slo.toml", "--slo-profiles=profiles.toml", "--slo-profile=team-cpu"]
    proc = _run(python, [*args, "--slo-max-requests=40"], team)
    assert proc.returncode == 0
    # The reports are all under slo-runs/ (pytest-benchmark adds its empty .benchmarks/ store).
    assert set(os.listdir(team)) - {".benchmarks"} == {"chat.slo.toml", "profiles.toml", "slo-runs"}
    (run,) = (team / "slo-runs").iterdir()
    for name in ("junit.xml", "benchmark.json", "signoff.html", "signoff.md", "verdicts.json"):
        assert (run / name).is_file(), name
    cases = junit_cases(run / "junit.xml")
    assert set(cases) == TESTS
    assert all(c["properties"]["slo.profile"] == "team-cpu" for c in cases.values())
    outcomes = _outcomes(run)
    assert set(outcomes) == {f"chat.slo.toml::{t}" for t in TESTS}
    # 40 requests rarely decide a percentile: the team's profile lets INCONCLUSIVE warn.
    assert set(outcomes.values()) <= {"PASS", "INCONCLUSIVE"}, outcomes
    bench = json.loads((run / "benchmark.json").read_text())
    assert "chat[ttft]" in {b["name"] for b in bench["benchmarks"]}

    # The sign-off's judge-again command, run from another folder, judges the same records.
    page = (run / "signoff.md").read_text().splitlines()
    (command,) = [line for line in page if f"--slo-replay={run}" in line]
    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "pytest"] and str(team / "chat.slo.toml") in words
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = _run(python, words[3:], elsewhere)
    assert again.returncode == 0
    (replayed,) = (tmp_path / "slo-runs").iterdir()  # the rootdir both folders share
    assert {t.split("::")[1]: o for t, o in _outcomes(replayed).items()} == {
        t.split("::")[1]: o for t, o in outcomes.items()
    }
