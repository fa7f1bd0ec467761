"""The plugin's hooks, driven in-process with pytester. No vLLM starts here: the runs collect
only, or hold tests that ask for no server; a stand-in runner records the server releases."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from fixtures.options import RENAMED
from fixtures.selection import select
from fixtures.settings import ROOT, programmatic


@pytest.fixture
def nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An nvidia-smi first on PATH that names an H200 and leaves a file saying it ran."""
    ran = tmp_path / "nvidia-smi-ran"
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\ntouch {ran}\necho 'NVIDIA H200'\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return ran


def _outputs(pytester: pytest.Pytester) -> set[str]:
    return {p.name for p in pytester.path.rglob("*") if "slo-runs" in p.parts or "junit" in p.name}


# Inert unless asked for.


def test_an_unrelated_project_sees_nothing_of_the_suite(
    pytester: pytest.Pytester, sigterm_default: None, nvidia_smi: Path
) -> None:
    pytester.makepyfile("def test_x():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_inprocess("-v")
    assert result.ret == pytest.ExitCode.OK
    assert not [line for line in result.outlines if line.startswith(("slo:", "  [slo]"))]
    assert not nvidia_smi.exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert _outputs(pytester) == set()


def test_once_active_it_detects_the_gpu(
    pytester: pytest.Pytester, sigterm_default: None, nvidia_smi: Path
) -> None:
    """The control of the test above: the same nvidia-smi runs once the suite is asked for."""
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("--slo-max-requests=5", "--collect-only")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["slo: profile h200-llama2-7b (detected GPU NVIDIA H200)*"])
    assert nvidia_smi.exists()


def test_an_slo_option_activates_it(pytester: pytest.Pytester, sigterm_default: None) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("--slo-profile=cpu-tiny", "--collect-only")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["slo: profile cpu-tiny (option --slo-profile)*"])
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL


def test_an_slo_ini_key_activates_it(pytester: pytest.Pytester, sigterm_default: None) -> None:
    pytester.makeini("[pytest]\nslo_profile = cpu-tiny\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("--collect-only")
    result.stdout.fnmatch_lines(["slo: profile cpu-tiny (ini slo_profile)*"])


SCENARIO_MODULE = """
import pytest

pytestmark = pytest.mark.scenario("realtime")


def test_objective(objective):
    pass
"""


def _realtime_objectives() -> list[str]:
    return [o.name for o in select("realtime", programmatic("cpu-tiny")).objectives]


def test_a_collected_scenario_test_activates_it_and_gets_one_test_per_objective(
    pytester: pytest.Pytester, sigterm_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLO_PROFILE", "cpu-tiny")  # read once active; does not activate
    pytester.makepyfile(test_chat=SCENARIO_MODULE)
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    names = _realtime_objectives()
    assert len(names) > 1
    result.stdout.fnmatch_lines([f"test_chat.py::test_objective[[]{n}[]]" for n in names])
    result.stdout.fnmatch_lines(["slo: profile cpu-tiny (environment SLO_PROFILE)*"])
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL


def test_a_scenario_test_without_objective_marker_is_a_usage_error(
    pytester: pytest.Pytester, sigterm_default: None
) -> None:
    pytester.makepyfile("def test_objective(objective):\n    pass\n")
    result = pytester.runpytest_inprocess("--collect-only", "--slo-profile=cpu-tiny")
    assert result.ret != pytest.ExitCode.OK
    assert "asks for 'objective' but has no @pytest.mark.scenario(NAME) marker" in (
        result.stdout.str() + result.stderr.str()
    )


# Ordering and server release.

ORDER_CONFTEST = """
import json
from pathlib import Path

import pytest

from fixtures.plugin import RUNNER


class Pool:
    def close(self):
        pass


class Runner:
    def __init__(self):
        self.released = []
        self.pool = Pool()
        self.failures = {}

    def release_key(self, key):
        self.released.append(key)


def pytest_collection_finish(session):
    session.config.stash[RUNNER] = Runner()


def pytest_runtest_logfinish(nodeid):
    with open("events.txt", "a") as f:
        f.write(f"ran {nodeid}\\n")


def pytest_unconfigure(config):
    runner = config.stash.get(RUNNER, None)
    if runner is not None:
        Path("released.json").write_text(json.dumps(runner.released))
"""

ORDER_MODULE = """
import pytest


@pytest.mark.scenario("realtime")
def test_realtime_1():
    pass


@pytest.mark.scenario("batch")
def test_batch_1():
    pass


def test_plain():
    pass


@pytest.mark.scenario("realtime")
def test_realtime_2():
    pass


@pytest.mark.scenario("batch")
def test_batch_2():
    pass
"""


def test_tests_are_grouped_by_server_and_each_server_released_after_its_last_test(
    pytester: pytest.Pytester, sigterm_default: None
) -> None:
    pytester.makeconftest(ORDER_CONFTEST)
    pytester.makepyfile(test_order=ORDER_MODULE)
    result = pytester.runpytest_inprocess("--slo-profile=cpu-tiny")
    assert result.ret == pytest.ExitCode.OK
    ran = [line.split("::")[1] for line in (pytester.path / "events.txt").read_text().splitlines()]
    assert ran == [
        "test_plain",
        "test_realtime_1",
        "test_realtime_2",
        "test_batch_1",
        "test_batch_2",
    ]
    s = programmatic("cpu-tiny")
    keys = [select(name, s).server_key for name in ("realtime", "batch")]
    assert keys[0] != keys[1]
    assert json.loads((pytester.path / "released.json").read_text()) == keys


# The rootdir pytest picks from an option's folder value.


def test_a_rootdir_outside_the_checkout_run_from_it_is_explained(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """From a bare checkout pytest may take a folder option's value for a test path and root
    the run there; a folder argument outside the checkout does the same."""
    monkeypatch.chdir(ROOT)
    elsewhere = tmp_path / "runs"
    elsewhere.mkdir()
    result = pytester.runpytest_inprocess("--collect-only", str(elsewhere))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # pytest roots the run at the folder, or at its common ancestor with the invocation folder
    # where that is not "/" (a checkout under /tmp roots it at /tmp): either way not the checkout.
    took = re.search(r"pytest took (\S+) for the test root", result.stderr.str())
    assert took is not None, result.stderr.str()
    root = Path(took.group(1))
    assert root != ROOT and (root == elsewhere or root in elsewhere.parents)
    assert "(--slo-report-dir=DIR, --slo-replay=DIR)" in result.stderr.str()


# Old option spellings.


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_an_old_option_spelling_names_the_new_one(pytester: pytest.Pytester, old: str) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess(f"{old}=x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {old}: the suite's options all start with --slo- now; write {RENAMED[old]}" in (
        result.stderr.str()
    )


def test_an_old_spelling_a_project_registers_itself_stays_its_own(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        "def pytest_addoption(parser):\n    parser.addoption('--model')\n"
        "def pytest_report_header(config):\n    return f'model={config.getoption(\"model\")}'\n"
    )
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("--model=mine")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["model=mine"])


# pytest-benchmark's table.

BENCH_MODULE = "def test_b(benchmark):\n    benchmark(lambda: None)\n"
BENCH_QUICK = ("--benchmark-min-rounds=3", "--benchmark-max-time=0.01")


@pytest.fixture
def outside_xdist(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-benchmark disables itself in an xdist worker, which it tells by this variable."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)


def _table_header(result: pytest.RunResult) -> str:
    return next(line for line in result.outlines if line.startswith("Name (time in"))


def test_the_benchmark_table_is_in_milliseconds_without_ops_when_active(
    pytester: pytest.Pytester, sigterm_default: None, outside_xdist: None
) -> None:
    pytester.makepyfile(BENCH_MODULE)
    result = pytester.runpytest_inprocess("--slo-profile=cpu-tiny", *BENCH_QUICK)
    assert result.ret == pytest.ExitCode.OK
    assert _table_header(result).split()[3:] == [
        *("ms)", "Min", "Median", "Mean", "Max", "StdDev", "Rounds")
    ]


def test_a_users_benchmark_columns_and_unit_are_kept(
    pytester: pytest.Pytester, sigterm_default: None, outside_xdist: None
) -> None:
    pytester.makepyfile(BENCH_MODULE)
    args = ("--slo-profile=cpu-tiny", "--benchmark-columns=min,ops", "--benchmark-time-unit=us")
    result = pytester.runpytest_inprocess(*args, *BENCH_QUICK)
    assert _table_header(result).split()[3:6] == ["us)", "Min", "OPS"]


def test_an_unrelated_projects_benchmark_table_is_pytest_benchmarks_own(
    pytester: pytest.Pytester, outside_xdist: None
) -> None:
    pytester.makepyfile(BENCH_MODULE)
    result = pytester.runpytest_inprocess(*BENCH_QUICK)
    header = _table_header(result)
    assert "OPS" in header and "(time in ms)" not in header
