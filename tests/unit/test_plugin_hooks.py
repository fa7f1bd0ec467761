"""The plugin's hooks, driven in-process with pytester: no vLLM starts here."""

from __future__ import annotations

import pytest

from fixtures.settings import RENAMED


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
