"""Live progress: how often a line is due on a terminal and in a log, what it says, and how it
goes through pytest's terminal reporter."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from fixtures.progress import Progress, ProgressWriter
from tests.unit.builders import rec


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_in_a_log_a_line_only_at_each_tenth() -> None:
    p = Progress("realtime", 608, live=False)
    lines = [(i + 1, p.add(rec(i, 20))) for i in range(608)]
    shown = [(done, line) for done, line in lines if line is not None]
    assert [done for done, _ in shown] == [61, 122, 183, 244, 304, 365, 426, 487, 548, 608]
    assert shown[-1][1] == ("realtime: 608/608 requests (100%), TTFT p99 so far 20 ms, 0 errors")


def test_in_a_log_a_small_workload_shows_each_step_once() -> None:
    p = Progress("batch", 4, live=False)
    assert [p.add(rec(i, 10)) is not None for i in range(4)] == [True] * 4
    assert p.finished


def test_on_a_terminal_about_once_a_second_and_at_the_end() -> None:
    clock = Clock()
    p = Progress("mixed", 100, live=True, interval_s=1.0, clock=clock)
    due = []
    for i in range(100):
        clock.t = i * 0.25  # four requests a second
        if p.add(rec(i, 10)) is not None:
            due.append(i)
    # The first request, then every fourth (one second), then the last.
    assert due == [*range(0, 100, 4), 99]


def test_the_line_counts_errors_and_leaves_out_warm_up() -> None:
    p = Progress("realtime", 10, live=False)
    p.add(rec(0, 5000, warmup=True))
    rng = random.Random(7)
    ttfts = [rng.uniform(10, 90) for _ in range(7)]
    for i, t in enumerate(ttfts, 1):
        p.add(rec(i, t))
    p.add(rec(8, 0, error="timeout"))
    line = p.add(rec(9, 0, error="http 500"))
    ordered = sorted(ttfts)
    expected = ordered[int(0.99 * (len(ordered) - 1))]
    assert line == f"realtime: 10/10 requests (100%), TTFT p99 so far {expected:.0f} ms, 2 errors"
    assert Progress("x", 1, live=False).line().endswith("TTFT p99 so far n/a, 0 errors")


class FakeReporter:
    def __init__(self, isatty: bool) -> None:
        self.isatty = isatty
        self.calls: list[tuple[str, Any]] = []

    def write_line(self, text: str) -> None:
        self.calls.append(("write_line", text))

    def ensure_newline(self) -> None:
        self.calls.append(("ensure_newline", None))

    def rewrite(self, text: str, erase: bool = False) -> None:
        self.calls.append(("rewrite", text))

    def write(self, text: str) -> None:
        self.calls.append(("write", text))


def _writer(reporter: FakeReporter) -> ProgressWriter:
    plugins = {"terminalreporter": reporter, "capturemanager": None}
    config = SimpleNamespace(pluginmanager=SimpleNamespace(getplugin=plugins.get))
    return ProgressWriter(config)  # type: ignore[arg-type]


def test_writer_rewrites_in_place_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    reporter = FakeReporter(isatty=True)
    write = _writer(reporter)
    assert write.live
    write("a", False)
    write("b", False)
    write("c", True)
    assert [c[0] for c in reporter.calls] == [
        "ensure_newline",
        "rewrite",
        "rewrite",
        "rewrite",
        "write",
    ]
    assert reporter.calls[-1] == ("write", "\n")


@pytest.mark.parametrize(("isatty", "ci"), [(False, None), (True, "true")])
def test_writer_writes_whole_lines_in_a_log_or_ci(
    monkeypatch: pytest.MonkeyPatch, isatty: bool, ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    reporter = FakeReporter(isatty=isatty)
    write = _writer(reporter)
    assert not write.live
    write("a", False)
    write("b", True)
    assert reporter.calls == [("write_line", "  [slo] a"), ("write_line", "  [slo] b")]
