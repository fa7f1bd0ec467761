"""The engine-arg check asks an installed vLLM once per args, and again after a reinstall.

The vLLM here is a stub package with vLLM's parser entry points, installed with a dist-info
record beside it, that counts how often it is imported (the probe's cost).
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from fixtures import engine_args
from fixtures.engine_args import check_engine_args
from slo.errors import EngineArgError

PARSER = """
import argparse
def make_arg_parser(parser):
    parser.add_argument("--model")
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--scheduling-policy", choices=["fcfs", "priority"])
    return parser
"""


def _install(site: Path, *, record: bool = True) -> Path:
    """A stub vLLM 0.32.0 in ``site``; returns the file that counts its imports."""
    pkg = site / "vllm"
    (pkg / "utils").mkdir(parents=True)
    (pkg / "entrypoints" / "launchers").mkdir(parents=True)
    counter = site / "imports"
    (pkg / "__init__.py").write_text(
        f"open({str(counter)!r}, 'a').write('x')\n__version__ = '0.32.0'\n"
    )
    (pkg / "utils" / "__init__.py").write_text("")
    (pkg / "utils" / "argparse_utils.py").write_text(
        "from argparse import ArgumentParser as FlexibleArgumentParser\n"
    )
    (pkg / "entrypoints" / "__init__.py").write_text("")
    (pkg / "entrypoints" / "launchers" / "__init__.py").write_text("")
    (pkg / "entrypoints" / "launchers" / "cli_args.py").write_text(PARSER)
    if record:
        (site / "vllm-0.32.0.dist-info").mkdir()
        (site / "vllm-0.32.0.dist-info" / "RECORD").write_text("vllm/__init__.py,,\n")
    return counter


def _python(tmp_path: Path, site: Path) -> str:
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -S "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def _imports(counter: Path) -> int:
    return len(counter.read_text()) if counter.exists() else 0


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An empty user cache and no answers kept in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(engine_args, "_probe_cache", {})


def _check(python: str, args: dict[str, object]) -> tuple[str, ...]:
    engine_args._probe_cache.clear()  # as a new run would start: nothing kept in memory
    return check_engine_args(python, args, origin="x.toml").argv


@pytest.mark.usefixtures("fresh")
def test_a_second_run_with_the_same_args_does_not_import_vllm_again(tmp_path: Path) -> None:
    counter = _install(tmp_path / "site")
    python = _python(tmp_path, tmp_path / "site")
    args = {"max_num_seqs": 8, "scheduling_policy": "priority"}
    first = _check(python, args)
    assert first == ("--max-num-seqs", "8", "--scheduling-policy", "priority")
    assert _imports(counter) == 1
    assert _check(python, args) == first
    assert _imports(counter) == 1
    assert _check(python, {"max_num_seqs": 4})[1] == "4"  # other args: vLLM is asked
    assert _imports(counter) == 2


@pytest.mark.usefixtures("fresh")
def test_a_refused_arg_is_refused_again_from_the_cache(tmp_path: Path) -> None:
    counter = _install(tmp_path / "site")
    python = _python(tmp_path, tmp_path / "site")
    for _ in range(2):
        engine_args._probe_cache.clear()
        with pytest.raises(EngineArgError, match=r"'max_num_seq' .* Did you mean max_num_seqs"):
            check_engine_args(python, {"max_num_seq": 8}, origin="x.toml")
    assert _imports(counter) == 1


@pytest.mark.usefixtures("fresh")
def test_a_reinstall_or_a_damaged_entry_asks_vllm_again(tmp_path: Path) -> None:
    counter = _install(tmp_path / "site")
    python = _python(tmp_path, tmp_path / "site")
    _check(python, {"max_num_seqs": 8})
    (tmp_path / "site" / "vllm-0.32.0.dist-info" / "RECORD").write_text("vllm/__init__.py,,1\n")
    _check(python, {"max_num_seqs": 8})
    assert _imports(counter) == 2
    for entry in (tmp_path / "cache" / "vllm-ttft-slo" / "engine-args").glob("*.json"):
        entry.write_text("{not json")
    assert _check(python, {"max_num_seqs": 8}) == ("--max-num-seqs", "8")
    assert _imports(counter) == 3


@pytest.mark.usefixtures("fresh")
def test_a_vllm_without_an_installation_record_is_asked_every_time(tmp_path: Path) -> None:
    """A source checkout: its files can change under the same name, so nothing is kept."""
    counter = _install(tmp_path / "site", record=False)
    python = _python(tmp_path, tmp_path / "site")
    _check(python, {"max_num_seqs": 8})
    _check(python, {"max_num_seqs": 8})
    assert _imports(counter) == 2
    assert not (tmp_path / "cache" / "vllm-ttft-slo" / "engine-args").exists()
