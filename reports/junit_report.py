"""JUnit XML for CI readers, one test suite per scenario and one test case per objective.

pytest's own junit.xml names tests after pytest's node ids and puts a whole run in one suite;
this file is organised the way a CI dashboard reads a sign-off: suite = scenario, test case =
objective, with the environment as suite properties. Written through the ``junit-xml`` package.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from junit_xml import TestCase, TestSuite, to_xml_report_string

from reports.files import RunEnding, read_ending, write_atomic
from reports.junit_xml import parse_suites
from reports.run_folder import JunitCase, RunFolder, VerdictRow, load_run
from reports.signoff_format import fmt, threshold, verdict_ci
from slo.verdict import Outcome

InconclusiveAs = Literal["failure", "skipped"]
DEFAULT_NAME = "slo-junit.xml"
"""Next to pytest's junit.xml in the run folder, never over it: that one is a source."""


def suite_properties(run: RunFolder, scenario: str) -> dict[str, str]:
    """What the numbers were measured on, as CI readers show suite properties."""
    props: dict[str, str] = {
        "vllm.version": run.vllm_version,
        "model": run.model,
        "profile": run.profile,
        "hardware": run.hardware,
    }
    if run.gpus:
        for i, g in enumerate(run.gpus):
            props[f"gpu.{i}.name"] = str(g.get("name", ""))
            props[f"gpu.{i}.driver"] = str(g.get("driver_version", ""))
    props["cpu.model"] = run.cpu_model
    props["suite.commit"] = run.suite_commit
    sc = run.scenario(scenario)
    if sc is not None:
        props["engine_args"] = json.dumps(dict(sc.engine_args), sort_keys=True)
        for k, v in sorted(sc.engine_args.items()):
            props[f"engine_arg.{k}"] = str(v)
        if sc.prefix_cache is not None:
            props.update(sc.prefix_cache.properties())
    if run.command:
        props["command"] = run.command
    if run.environment.get("endpoint"):
        props["endpoint"] = str(run.environment["endpoint"])
    return props


def _stdout(v: VerdictRow) -> str:
    return "\n".join(
        [
            f"outcome: {v.outcome.value}",
            f"estimate: {fmt(v.estimate, v.metric)}",
            f"{v.confidence:.0%} CI: {verdict_ci(v)}",
            f"n: {v.n}",
            f"threshold: {threshold(v)}".replace("≤", "<=").replace("≥", ">="),
            f"profile: {v.profile}",
        ]
    )


def objective_case(
    v: VerdictRow, elapsed_s: float | None, inconclusive: InconclusiveAs
) -> TestCase:
    case = TestCase(
        name=v.objective,
        classname=v.scenario,
        elapsed_sec=elapsed_s,
        stdout=_stdout(v),
    )
    if v.outcome in (Outcome.FAIL, Outcome.INVALID):
        case.add_failure_info(message=v.message, output=v.message, failure_type=v.outcome.value)
    elif v.outcome is Outcome.INCONCLUSIVE:
        if inconclusive == "skipped":
            case.add_skipped_info(message=v.message, output=v.message)
        else:
            case.add_failure_info(message=v.message, output=v.message, failure_type="INCONCLUSIVE")
    return case


def other_case(c: JunitCase, scenario: str) -> TestCase:
    """A test without a verdict keeps its pytest status: a run whose objective tests errored
    before judging must not read green here just because no verdict was written."""
    case = TestCase(name=c.name, classname=scenario, elapsed_sec=c.time_s)
    if c.status == "failed":
        case.add_failure_info(message=c.message or "failed", failure_type="failure")
    elif c.status == "error":
        case.add_error_info(message=c.message or "error", error_type="error")
    elif c.status == "skipped":
        case.add_skipped_info(message=c.message or "skipped")
    return case


def _scenario_of_other(c: JunitCase, labels: Sequence[str]) -> str:
    module = c.classname.rsplit(".", 1)[-1].removeprefix("test_")
    return module if module in labels else c.classname


def junit_suites(run: RunFolder, inconclusive: InconclusiveAs = "failure") -> list[TestSuite]:
    by_scenario: dict[str, list[TestCase]] = {}
    for v in run.verdicts:
        jc = run.junit_case(v.test)
        by_scenario.setdefault(v.scenario, []).append(
            objective_case(v, jc.time_s if jc else None, inconclusive)
        )
    labels = [*by_scenario, *(s.label for s in run.scenarios)]
    for c in run.other_tests:
        scenario = _scenario_of_other(c, labels)
        by_scenario.setdefault(scenario, []).append(other_case(c, scenario))
    ending = read_ending(run.path)
    if ending is not None and not ending.complete:
        case = ending_case(ending)
        run_cases = by_scenario.setdefault("run", [])
        if all(c.name != case.name for c in run_cases):  # pytest's junit.xml may have it
            run_cases.append(case)
    if not by_scenario:
        # An empty report reads green in CI; a run that judged nothing must not.
        case = TestCase(name="objectives judged", classname="run")
        case.add_error_info(
            message=f"{run.path}: the run judged no objective and recorded no test: it was "
            "cut short or selected no scenario; run the suite again (pytest -m SCENARIO)",
            error_type="error",
        )
        by_scenario["run"] = [case]
    hostname = run.junit.hostname if run.junit else None
    return [
        TestSuite(
            name=scenario,
            test_cases=cases,
            hostname=hostname,
            timestamp=run.started,
            properties=suite_properties(run, scenario),
        )
        for scenario, cases in by_scenario.items()
    ]


def ending_case(ending: RunEnding) -> TestCase:
    """A run cut short is an error in CI's eyes, whatever the tests that ran said."""
    case = TestCase(name=f"run {ending.how}", classname="run")
    case.add_error_info(message=ending_message(ending), error_type=ending.how)
    return case


def ending_message(ending: RunEnding) -> str:
    return (
        f"the run ended early, {ending.how} ({ending.reason}; exit status "
        f"{ending.exit_status}): tests not run are not passed; what was measured before is in "
        "the run folder"
    )


def add_ending_to_pytest_junit(path: Path, ending: RunEnding) -> None:
    """Add an error test case for a run cut short to pytest's own junit.xml, whose counts
    would otherwise read tests=0 failures=0 (a clean pass) for a run interrupted early."""
    root, suites = parse_suites(path)
    suite = suites[0] if suites else ET.SubElement(root, "testsuite", name="pytest")
    case = ET.SubElement(suite, "testcase", classname="run", name=f"run {ending.how}", time="0")
    ET.SubElement(
        case, "error", message=ending_message(ending), type=ending.how
    ).text = ending.reason
    for key in ("tests", "errors"):
        suite.set(key, str(int(suite.get(key, "0")) + 1))
    if root is not suite:
        for key in ("tests", "errors"):
            if root.get(key) is not None:
                root.set(key, str(int(root.get(key, "0")) + 1))
    write_atomic(path, ET.tostring(root, encoding="utf-8", xml_declaration=True))


def junit_xml(run: RunFolder, inconclusive: InconclusiveAs = "failure") -> str:
    return str(to_xml_report_string(junit_suites(run, inconclusive), prettyprint=True))


def write_junit(
    run_dir: Path, out: Path | None = None, *, inconclusive: InconclusiveAs = "failure"
) -> Path:
    """Write the run folder's JUnit (default ``<run_dir>/slo-junit.xml``) and return its path.

    ``inconclusive``: report an undecided objective as a failure (the sign-off default) or as
    skipped (a gate that only warns).
    """
    if inconclusive not in ("failure", "skipped"):
        raise ValueError(f"inconclusive = {inconclusive!r}: must be 'failure' or 'skipped'")
    run = load_run(run_dir)
    path = out if out is not None else run_dir / DEFAULT_NAME
    write_atomic(path, junit_xml(run, inconclusive).encode())
    return path
