"""A run cut short says so everywhere a reader looks: pytest's junit.xml gets an error test case
(an interrupted run otherwise reads tests=0 failures=0), the suite's slo-junit.xml too, and the
sign-off page a banner and the result INCOMPLETE, whatever the objectives judged before said."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from reports.files import RunEnding, read_ending, write_ending
from reports.junit_report import add_ending_to_pytest_junit, write_junit
from reports.signoff import write_signoff

NEW = Path(__file__).parent / "data" / "run-new"
INTERRUPTED = RunEnding("interrupted", "by SIGTERM", 2)


def _run(tmp_path: Path, ending: RunEnding | None) -> Path:
    run = tmp_path / "run"
    shutil.copytree(NEW, run)
    if ending is not None:
        write_ending(run, ending)
    return run


def test_an_interrupted_run_is_an_error_in_pytests_junit(tmp_path: Path) -> None:
    empty = tmp_path / "junit.xml"  # what pytest writes when interrupted in the first test
    empty.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
        '<testsuite name="pytest" errors="0" failures="0" skipped="0" tests="0" time="9.1" />'
        "</testsuites>"
    )
    add_ending_to_pytest_junit(empty, INTERRUPTED)
    suite = ET.parse(empty).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("errors")) == ("1", "1")
    error = suite.find("testcase[@name='run interrupted']/error")
    assert (
        error is not None
        and "the run ended early, interrupted (by SIGTERM; exit status 2)"
        in str(error.get("message"))
    )


def test_an_interrupted_run_is_an_error_in_the_suites_junit_and_incomplete_on_the_page(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path, INTERRUPTED)
    assert read_ending(run) == INTERRUPTED
    root = ET.parse(write_junit(run)).getroot()
    error = root.find("testsuite[@name='run']/testcase[@name='run interrupted']/error")
    assert error is not None and "by SIGTERM" in str(error.get("message"))
    files = write_signoff([run])
    html, md = files.html.read_text(), files.markdown.read_text()
    assert "Result: INCOMPLETE" in html and "**Result: INCOMPLETE**" in md
    banner = "This run ended early, interrupted (by SIGTERM; exit status 2)."
    assert banner in html and banner in md


def test_a_completed_run_has_no_banner_and_keeps_its_result(tmp_path: Path) -> None:
    run = _run(tmp_path, RunEnding("completed", "every selected test ran", 1))
    html = write_signoff([run]).html.read_text()
    assert "Result: INCOMPLETE" not in html and "class='warn banner'" not in html
    root = ET.parse(write_junit(run)).getroot()
    assert root.find("testsuite[@name='run']") is None


def test_the_ending_case_appears_once_when_pytests_junit_has_it_too(tmp_path: Path) -> None:
    run = _run(tmp_path, INTERRUPTED)
    add_ending_to_pytest_junit(run / "junit.xml", INTERRUPTED)
    root = ET.parse(write_junit(run)).getroot()
    assert len(root.findall(".//testcase[@name='run interrupted']")) == 1
