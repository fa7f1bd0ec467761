"""SLO files collected by pytest (fixtures/slo_files.py), and a team's own profiles file. No vLLM
starts here: the runs collect only, or judge the stored records of tests/unit/data/run-new."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fixtures.selection import select
from fixtures.settings import ROOT, programmatic
from reports.run_folder import load_run
from slo.scenario import SCENARIO_DIR

NEW = ROOT / "tests" / "unit" / "data" / "run-new"
REALTIME = (SCENARIO_DIR / "realtime.toml").read_text()
CHAT = REALTIME.replace('name = "realtime"', 'name = "chat"', 1)
OBJECTIVES = [o.name for o in select("realtime", programmatic("cpu-tiny")).objectives]
# A team's profile: the bundled cpu-tiny's machine, an undecided objective only warns.
PROFILES = '[my-cpu]\nparent = "cpu-tiny"\ninconclusive = "warn"\n'
# The realtime scenario (so run-new's records replay) judged under my-cpu, on two objectives.
MY_CPU = ["--slo-profile=my-cpu"]
REALTIME_MINE = REALTIME.replace(
    "[objectives.cpu-tiny]",
    '[objectives.my-cpu]\n"ttft p50" = "<= 60ms"\n"tpot p99" = "<= 20ms"\n\n[objectives.cpu-tiny]',
)


@pytest.fixture
def cpu_tiny(monkeypatch: pytest.MonkeyPatch, sigterm_default: None) -> None:
    """The profile through the environment, which is read once active and does not activate."""
    monkeypatch.setenv("SLO_PROFILE", "cpu-tiny")


def _ids(file: str, names: list[str]) -> list[str]:
    return [f"{file}::test_objective[{n}]" for n in names]


def _collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::test_objective[" in line]


def _error_section(result: pytest.RunResult) -> list[str]:
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "ERROR collecting" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("=", "- ")))
    return lines[start + 1 : end]


# Collection and naming.


def test_an_slo_file_named_on_the_command_line_is_one_test_per_objective(
    pytester: pytest.Pytester, cpu_tiny: None
) -> None:
    pytester.makefile(".slo.toml", chat=CHAT)
    result = pytester.runpytest_inprocess("chat.slo.toml", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert _collected(result) == _ids("chat.slo.toml", OBJECTIVES)
    result.stdout.fnmatch_lines(["slo: profile cpu-tiny (environment SLO_PROFILE)*"])
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    assert not (pytester.path / "slo-runs").exists()  # collecting runs nothing, reports nothing


def test_a_toml_file_named_on_the_command_line_is_collected_whatever_its_name(
    pytester: pytest.Pytester, cpu_tiny: None
) -> None:
    pytester.makefile(".toml", gate=CHAT)
    result = pytester.runpytest_inprocess("gate.toml", "--collect-only", "-q")
    assert _collected(result) == _ids("gate.toml", OBJECTIVES)


def test_a_folders_slo_files_are_found_by_the_glob_and_other_toml_files_are_not(
    pytester: pytest.Pytester, cpu_tiny: None
) -> None:
    (pytester.path / "gates").mkdir()
    (pytester.path / "gates" / "chat.slo.toml").write_text(CHAT)
    (pytester.path / "gates" / "notes.toml").write_text("[scenario]\n")  # not an SLO file
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert _collected(result) == _ids("gates/chat.slo.toml", OBJECTIVES)
    assert "test_plain.py::test_plain" in result.outlines
    result.stdout.fnmatch_lines(["slo: profile cpu-tiny*"])


def test_the_slo_files_ini_glob_chooses_the_files(
    pytester: pytest.Pytester, cpu_tiny: None
) -> None:
    pytester.makeini("[pytest]\nslo_files = *.gate.toml\n")
    pytester.makefile(".gate.toml", api=CHAT)
    pytester.makefile(".slo.toml", chat=CHAT.replace('name = "chat"', 'name = "other"'))
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert _collected(result) == _ids("api.gate.toml", OBJECTIVES)


def test_a_toml_file_without_a_scenario_table_is_left_to_pytest(
    pytester: pytest.Pytester, sigterm_default: None
) -> None:
    pytester.makefile(".toml", pyproject='[project]\nname = "team"\n')
    result = pytester.runpytest_inprocess("pyproject.toml", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: not found: {pytester.path / 'pyproject.toml'}"])
    assert not [line for line in result.outlines if line.startswith("slo:")]
    assert not (pytester.path / "slo-runs").exists()


def test_a_named_toml_file_with_a_scenario_table_gets_the_parsers_error_even_unparsable(
    pytester: pytest.Pytester, cpu_tiny: None
) -> None:
    pytester.makefile(".toml", gate=CHAT.replace('name = "chat"', 'name = "chat'))
    result = pytester.runpytest_inprocess("gate.toml", "--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    (line,) = _error_section(result)
    assert line.startswith(f"{pytester.path / 'gate.toml'}: ")


# Activation: inert in projects that have no SLO file.


def test_a_project_with_other_toml_files_sees_nothing_of_the_suite(
    pytester: pytest.Pytester, sigterm_default: None
) -> None:
    pytester.makefile(".toml", config='[tool]\nname = "x"\n')
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-v")
    assert result.ret == pytest.ExitCode.OK
    assert not [line for line in result.outlines if line.startswith("slo:")]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert not (pytester.path / "slo-runs").exists()


def test_a_found_slo_file_activates_the_suite(pytester: pytest.Pytester, cpu_tiny: None) -> None:
    """The control of the test above: the same project with an SLO file in a folder."""
    pytester.makefile(".toml", config='[tool]\nname = "x"\n')
    pytester.makepyfile("def test_x():\n    pass\n")
    (pytester.path / "gates").mkdir()
    (pytester.path / "gates" / "chat.slo.toml").write_text(CHAT)
    result = pytester.runpytest_inprocess("--collect-only")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["slo: profile cpu-tiny (environment SLO_PROFILE)*"])
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL


# Markers.


def test_the_scenario_marker_selects_with_m_under_strict_markers(
    pytester: pytest.Pytester, cpu_tiny: None
) -> None:
    pytester.makefile(".slo.toml", chat=CHAT)
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    strict = (
        "--strict-markers",
        "--collect-only",
        "-q",
        "-W",
        "error::pytest.PytestUnknownMarkWarning",
    )
    chosen = pytester.runpytest_inprocess(".", "-m", "chat", *strict)
    assert chosen.ret == pytest.ExitCode.OK
    assert _collected(chosen) == _ids("chat.slo.toml", OBJECTIVES)
    assert "test_plain.py::test_plain" not in chosen.outlines
    others = pytester.runpytest_inprocess(".", "-m", "not chat", *strict)
    assert _collected(others) == [] and "test_plain.py::test_plain" in others.outlines


def _marker_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("@pytest.mark.")]


def test_pytest_markers_lists_the_markers_of_the_slo_files_it_would_collect(
    pytester: pytest.Pytester, sigterm_default: None
) -> None:
    (pytester.path / "gates").mkdir()
    (pytester.path / "gates" / "chat.slo.toml").write_text(CHAT)
    (pytester.path / "gates" / "notes.toml").write_text(CHAT.replace('"chat"', '"notes"', 1))
    (pytester.path / "build").mkdir()  # in pytest's norecursedirs: not collected, not listed
    (pytester.path / "build" / "old.slo.toml").write_text(CHAT.replace('"chat"', '"old"', 1))
    pytester.makefile(".toml", gate=CHAT.replace('"chat"', '"gate"', 1))
    description = REALTIME.split('description = "')[1].split('"')[0]
    (pytester.path / "drafts").mkdir()  # left out with --ignore, as collection leaves it out
    (pytester.path / "drafts" / "draft.slo.toml").write_text(CHAT.replace('"chat"', '"draft"', 1))
    (pytester.path / "gates" / "wip.slo.toml").write_text(CHAT.replace('"chat"', '"wip"', 1))
    found = _marker_lines(pytester.runpytest_inprocess("--markers"))
    assert f"@pytest.mark.chat: {description} (SLO file chat.slo.toml)" in found
    assert not [m for m in found if m.startswith(("@pytest.mark.notes", "@pytest.mark.old"))]
    assert [m for m in found if m.startswith(("@pytest.mark.draft:", "@pytest.mark.wip:"))]
    left_out = _marker_lines(
        pytester.runpytest_inprocess("--markers", "--ignore=drafts", "--ignore-glob=*/wip.*")
    )
    assert f"@pytest.mark.chat: {description} (SLO file chat.slo.toml)" in left_out
    assert not [m for m in left_out if m.startswith(("@pytest.mark.draft:", "@pytest.mark.wip:"))]
    named = _marker_lines(pytester.runpytest_inprocess("--markers", "gate.toml"))
    assert f"@pytest.mark.gate: {description} (SLO file gate.toml)" in named
    assert not [m for m in named if m.startswith("@pytest.mark.chat")]


# Bad input: one line naming the file, the key, the value and the fix.


def test_a_bad_slo_file_is_one_line_naming_file_key_value_and_fix(
    pytester: pytest.Pytester, cpu_tiny: None
) -> None:
    pytester.makefile(".slo.toml", chat=CHAT.replace('"<= 200ms"', '"<= 200"', 1))
    result = pytester.runpytest_inprocess("chat.slo.toml", "--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    (line,) = _error_section(result)
    path = pytester.path / "chat.slo.toml"
    assert line.startswith(f"{path}: key 'objectives.cpu-tiny.\"ttft p99\"' = '<= 200': ")
    assert "has no unit" in line and '(write "200ms")' in line


@pytest.mark.parametrize("name", ["my chat", "skip", "chat.v2", "_chat"])
def test_a_scenario_name_no_marker_can_carry_is_refused(
    pytester: pytest.Pytester, cpu_tiny: None, name: str
) -> None:
    pytester.makefile(".slo.toml", chat=CHAT.replace('name = "chat"', f'name = "{name}"'))
    result = pytester.runpytest_inprocess("chat.slo.toml", "--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    (line,) = _error_section(result)
    assert f"chat.slo.toml: key 'scenario.name' = {name!r}: " in line
    assert 'e.g. "chat"' in line


def test_two_scenario_files_with_one_name_are_refused(
    pytester: pytest.Pytester, cpu_tiny: None
) -> None:
    pytester.makefile(".slo.toml", a=CHAT, b=CHAT)
    result = pytester.runpytest_inprocess("a.slo.toml", "b.slo.toml", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {pytester.path / 'a.slo.toml'}: key 'scenario.name' = 'chat': "
         f"{pytester.path / 'b.slo.toml'} has this name too, * rename one of them*"]
    )  # fmt: skip


# The run folder of a folder's SLO files: activated at collection, still gets both files.


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_a_folders_slo_files_get_junit_and_benchmark_json_in_the_run_folder(
    pytester: pytest.Pytester, cpu_tiny: None, family: str
) -> None:
    (pytester.path / "gates").mkdir()
    (pytester.path / "gates" / "rt.slo.toml").write_text(REALTIME)
    args = (f"--slo-replay={NEW}", "--slo-report-dir=run", "-o", f"junit_family={family}")
    result = pytester.runpytest_inprocess(*args)
    run = pytester.path / "run"
    assert (run / "verdicts.json").exists(), result.outlines
    cases = ET.parse(run / "junit.xml").getroot().iter("testcase")
    by_name = {str(c.get("name")): c for c in cases}
    assert sorted(by_name) == sorted(f"test_objective[{n}]" for n in OBJECTIVES)
    for case in by_name.values():
        assert case.get("classname") == "gates.rt.slo.toml"
        # xunit1 (the suite's own pyproject) writes the test's file: the SLO file's.
        assert case.get("file") == ("gates/rt.slo.toml" if family == "xunit1" else None)
        props = {p.get("name") for p in case.iter("property")}
        assert {"slo.outcome", "slo.ci_upper", "slo.vllm_version", "slo.claim"} <= props
    bench = json.loads((run / "benchmark.json").read_text())
    assert "realtime[ttft]" in {b["name"] for b in bench["benchmarks"]}
    # The reports find each verdict's JUnit case (its duration) under either family.
    folder = load_run(run)
    assert [v.test.split("::")[0] for v in folder.verdicts] == ["gates/rt.slo.toml"] * 5
    assert all(folder.junit_case(v.test) is not None for v in folder.verdicts)


@pytest.mark.parametrize("named", [True, False], ids=["named", "found in a folder"])
def test_a_run_leaves_no_benchmark_storage_folder_where_nothing_is_saved(
    pytester: pytest.Pytester, cpu_tiny: None, named: bool
) -> None:
    (pytester.path / "gates").mkdir()
    (pytester.path / "gates" / "rt.slo.toml").write_text(REALTIME)
    args = [f"--slo-replay={NEW}", "--slo-report-dir=run"]
    result = pytester.runpytest_inprocess(*args, *(["gates/rt.slo.toml"] if named else []))
    assert (pytester.path / "run" / "benchmark.json").exists(), result.outlines
    assert not (pytester.path / ".benchmarks").exists()


def test_benchmark_storage_the_user_asks_for_is_kept(
    pytester: pytest.Pytester, cpu_tiny: None
) -> None:
    pytester.makefile(".slo.toml", rt=REALTIME)
    (pytester.path / ".benchmarks").mkdir()  # there before the run: not the suite's to remove
    args = [f"--slo-replay={NEW}", "rt.slo.toml"]
    pytester.runpytest_inprocess(*args, "--slo-report-dir=run1")
    assert (pytester.path / ".benchmarks").is_dir()
    pytester.runpytest_inprocess(*args, "--slo-report-dir=run2", "--benchmark-storage=mine")
    assert (pytester.path / "mine").is_dir()
    pytester.runpytest_inprocess(*args, "--slo-report-dir=run3", "--benchmark-autosave")
    assert list((pytester.path / ".benchmarks").glob("*/0001_*.json"))


# A run, then the sign-off page's judge-again command from another folder.


def _pytest(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's suite, from any folder
    env.pop("SLO_PROFILE", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--slo-no-progress", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _verdicts(run: Path) -> dict[str, str]:
    rows = json.loads((run / "verdicts.json").read_text())
    return {r["test"].split("::")[1]: r["outcome"] for r in rows}


def test_the_judge_again_command_of_an_slo_file_run_works_from_any_folder(
    tmp_path: Path,
) -> None:
    team = tmp_path / "team"
    (team / "gates").mkdir(parents=True)
    (team / "gates" / "rt.slo.toml").write_text(REALTIME_MINE)
    (team / "profiles.toml").write_text(PROFILES)
    first = _pytest(
        ["gates/rt.slo.toml", f"--slo-replay={NEW}", "--slo-profiles=profiles.toml", *MY_CPU],
        team,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    (run,) = (team / "slo-runs").iterdir()
    assert _verdicts(run) == {
        "test_objective[ttft p50]": "INCONCLUSIVE", "test_objective[tpot p99]": "INCONCLUSIVE"
    }  # fmt: skip
    page = (run / "signoff.md").read_text().splitlines()
    (command,) = [line for line in page if f"--slo-replay={run}" in line]
    words = shlex.split(command)
    assert str(team / "gates" / "rt.slo.toml") in words
    assert f"--slo-profiles={team / 'profiles.toml'}" in words
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = _pytest(words[3:], elsewhere)
    assert again.returncode == 0, again.stdout + again.stderr
    (replayed,) = (tmp_path / "slo-runs").iterdir()  # under the rootdir the two folders share
    assert _verdicts(replayed) == _verdicts(run)
    assert json.loads((replayed / "environment.json").read_text())["replay_dir"] == str(run)


# A team's own profiles: --slo-profiles FILE, or the ini key slo_profiles.


def test_an_slo_files_objectives_for_a_teams_profile_are_selected_by_it(
    pytester: pytest.Pytester, sigterm_default: None
) -> None:
    pytester.makefile(".slo.toml", chat=REALTIME_MINE.replace('"realtime"', '"chat"', 1))
    pytester.makefile(".toml", profiles=PROFILES)
    args = ("chat.slo.toml", "--slo-profiles=profiles.toml", *MY_CPU, "--collect-only", "-q")
    result = pytester.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.OK
    assert _collected(result) == _ids("chat.slo.toml", ["ttft p50", "tpot p99"])


def test_the_ini_keys_profiles_file_is_relative_to_the_ini_files_folder(
    pytester: pytest.Pytester, sigterm_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nslo_profiles = conf/profiles.toml\nslo_profile = my-cpu\n")
    (pytester.path / "conf").mkdir()
    (pytester.path / "conf" / "profiles.toml").write_text(PROFILES)
    (pytester.path / "gates").mkdir()
    (pytester.path / "gates" / "chat.slo.toml").write_text(
        REALTIME_MINE.replace('"realtime"', '"chat"', 1)
    )
    monkeypatch.chdir(pytester.path / "gates")  # run from a subfolder, as from an IDE
    result = pytester.runpytest_inprocess("chat.slo.toml", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.outlines
    result.stdout.fnmatch_lines(["slo: profile my-cpu (ini slo_profile)*"])
    assert _collected(result) == _ids("gates/chat.slo.toml", ["ttft p50", "tpot p99"])


def test_a_bad_profiles_file_stops_the_run_with_one_line(
    pytester: pytest.Pytester, sigterm_default: None
) -> None:
    pytester.makefile(".toml", profiles='[cpu-tiny]\nmodel = "x"\n')
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("--slo-profiles=profiles.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    path = pytester.path / "profiles.toml"
    assert result.stderr.lines[0] == (
        f"ERROR: --slo-profiles profiles.toml: {path}: key 'cpu-tiny' = '[cpu-tiny]': a bundled "
        "profile has this name; give yours another name and inherit it: [my-cpu-tiny] with "
        'parent = "cpu-tiny"'
    )
