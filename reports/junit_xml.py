"""pytest's junit.xml as the reports read it: its test cases, their status and properties."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from slo.errors import SuiteError

TestStatus = Literal["passed", "failed", "error", "skipped"]

_STATUS_TAGS: tuple[tuple[str, TestStatus], ...] = (
    ("failure", "failed"),
    ("error", "error"),
    ("skipped", "skipped"),
)


@dataclass(frozen=True)
class JunitCase:
    """One test case of pytest's junit.xml."""

    classname: str
    name: str
    file: str | None
    time_s: float | None
    status: TestStatus
    message: str
    properties: Mapping[str, str]

    @property
    def test_id(self) -> str:
        """pytest's node id, as verdicts.json's ``test`` field spells it."""
        path = self.file or self.classname.replace(".", "/") + ".py"
        return f"{path}::{self.name}"

    def is_test(self, test_id: str) -> bool:
        """Whether this case is the test of that node id. Without the ``file`` attribute
        (junit_family xunit2, pytest's default) the node id is turned into a class name the
        way pytest does it: an SLO file's (``gates/chat.slo.toml``) cannot be turned back."""
        if self.file is not None:
            return self.test_id == test_id
        path, *names = test_id.split("::")
        module = path.replace("/", ".").removesuffix(".py")
        return (self.classname, self.name) == (".".join([module, *names[:-1]]), names[-1])


@dataclass(frozen=True)
class Junit:
    cases: tuple[JunitCase, ...]
    timestamp: str | None
    hostname: str | None


def parse_suites(
    path: Path,
    fix: str = "render the run from verdicts.json by moving junit.xml away",
    error: type[SuiteError] = SuiteError,
) -> tuple[ET.Element, list[ET.Element]]:
    """pytest's junit.xml as (root, its <testsuite> elements): the root is one <testsuite>
    (pytest's own) or <testsuites> (a merged run); ``fix`` ends the error for unreadable XML."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise error(
            f"{path}: not well-formed XML ({e}): pytest did not finish writing it; {fix}"
        ) from None
    return root, [root] if root.tag == "testsuite" else list(root.iter("testsuite"))


def read_junit(path: Path) -> Junit:
    root, suites = parse_suites(path)
    cases: list[JunitCase] = []
    for suite in suites:
        for tc in suite.iter("testcase"):
            status: TestStatus = "passed"
            message = ""
            for tag, st in _STATUS_TAGS:
                child = tc.find(tag)
                if child is not None:
                    status = st
                    message = child.get("message") or (child.text or "").strip()
                    break
            props = {
                p.get("name", ""): p.get("value", "")
                for p in tc.iter("property")
                if p.get("name") is not None
            }
            time_attr = tc.get("time")
            cases.append(
                JunitCase(
                    classname=tc.get("classname", ""),
                    name=tc.get("name", ""),
                    file=tc.get("file"),
                    time_s=float(time_attr) if time_attr else None,
                    status=status,
                    message=message,
                    properties=props,
                )
            )
    first = suites[0] if suites else root
    return Junit(tuple(cases), first.get("timestamp"), first.get("hostname"))
