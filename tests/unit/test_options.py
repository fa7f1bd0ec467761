"""The option table (fixtures/options.py): one definition per option, checked against Settings,
and the options reference generated from it."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from fixtures import settings as settings_mod
from fixtures.options import BY_DEST, OPTIONS, PREFIX, RENAMED, markdown
from fixtures.settings import (
    DERIVED_FIELDS,
    ROOT,
    Settings,
    option_fields,
    programmatic,
    resolve,
)
from slo.errors import SuiteError

REFERENCE = ROOT / "docs" / "reference" / "options.md"
REGENERATE = "python -m fixtures.options --markdown > docs/reference/options.md"


def test_every_settings_field_has_one_option_or_is_derived() -> None:
    by_field = option_fields()
    names = {f.name for f in fields(Settings)}
    assert set(by_field) | DERIVED_FIELDS == names
    assert not set(by_field) & DERIVED_FIELDS


def test_an_option_missing_from_the_table_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_mod, "OPTIONS", OPTIONS[:-1])
    with pytest.raises(SuiteError, match=r"fields without an option \['ab_margin'\]"):
        option_fields()


def test_every_option_has_the_prefix_and_its_ini_key_is_its_name() -> None:
    for opt in OPTIONS:
        assert opt.flag.startswith(PREFIX), opt.flag
        assert opt.dest == opt.flag[2:].replace("-", "_")
    assert len(BY_DEST) == len(OPTIONS)
    assert set(RENAMED.values()) <= {opt.flag for opt in OPTIONS}


def test_defaults_are_written_once() -> None:
    """The help shows the table's default; no help text repeats one by hand."""
    for opt in OPTIONS:
        assert "(default:" not in opt.help, opt.flag
        assert opt.full_help.count("(default:") == 1


def test_python_use_gets_the_table_defaults() -> None:
    s = programmatic()
    assert s.startup_timeout_s == float(BY_DEST["slo_startup_timeout"].default or "")
    assert s.host == BY_DEST["slo_server_host"].default
    assert s.api_key_env == BY_DEST["slo_api_key_env"].default
    assert s.regression_limit == pytest.approx(0.10) and s.ab_margin == pytest.approx(0.10)
    assert s.run_dir.parent.name == settings_mod.RUNS_DIR
    assert not s.progress and not s.sequential


def test_the_options_reference_is_the_generated_text() -> None:
    committed = REFERENCE.read_text() if REFERENCE.exists() else ""
    assert committed == markdown(), f"{REFERENCE} is out of date; regenerate it: {REGENERATE}"


def test_the_regenerate_command_prints_the_reference() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fixtures.options", "--markdown"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == markdown()
    for opt in OPTIONS:
        assert f"`{opt.flag}" in proc.stdout


class _IniConfig:
    """A config whose values come from an ini file in ``inipath``'s folder or the command line."""

    def __init__(self, inipath: Path, ini: dict[str, str], options: dict[str, str]) -> None:
        self.inipath, self.rootpath, self.ini, self.options = inipath, inipath.parent, ini, options

    def getoption(self, name: str) -> Any:
        return self.options.get(name, False if BY_DEST[name].is_switch else None)

    def getini(self, name: str) -> Any:
        return self.ini.get(name, False if BY_DEST[name].is_switch else BY_DEST[name].default)


_PATH_KEYS = {
    "slo_report_dir": "run_dir",
    "slo_replay": "replay_dir",
    "slo_replay_mix": "replay_mix",
    "slo_vllm_python": "vllm_python",
}


def test_ini_path_keys_are_relative_to_the_ini_files_folder_and_options_to_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, here = tmp_path / "project", tmp_path / "project" / "sub"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)  # a run from a subfolder, as from an IDE
    values = {key: f"conf/{key}" for key in _PATH_KEYS}
    config = _IniConfig(project / "pytest.ini", values, {})
    s = resolve(config, profile=("cpu-tiny", "argument"), environ={})
    for key, field in _PATH_KEYS.items():
        assert str(getattr(s, field)) == str(project / "conf" / key), key
    s = resolve(_IniConfig(project / "pytest.ini", {}, values), profile=("p", "a"), environ={})
    for key, field in _PATH_KEYS.items():
        expected = here / "conf" / key if field != "vllm_python" else Path(f"conf/{key}")
        assert Path(getattr(s, field)) == expected, key
    baseline = {"slo_baseline": "runs/last"}
    s = resolve(_IniConfig(project / "pytest.ini", baseline, {}), profile=("p", "a"), environ={})
    assert s.baseline == project / "runs" / "last"


def test_an_interpreter_named_without_a_folder_is_looked_up_on_path(tmp_path: Path) -> None:
    config = _IniConfig(tmp_path / "pytest.ini", {"slo_ab_baseline_python": "python3"}, {})
    s = resolve(config, profile=("cpu-tiny", "argument"), environ={})
    assert s.ab_baseline_python == "python3"
    venv = tmp_path / "old" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    config = _IniConfig(tmp_path / "pytest.ini", {"slo_ab_baseline_python": "old/bin/python"}, {})
    s = resolve(config, profile=("cpu-tiny", "argument"), environ={})
    assert s.ab_baseline_python == str(venv / "python")  # the venv's link, not its target
