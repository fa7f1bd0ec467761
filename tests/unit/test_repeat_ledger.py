"""The ledger of benchmarks/repeat_scenarios.py (in benchmarks/run_ledger.py): a run still
counts once its folder is gone; a tally counts each calibration apart."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "benchmarks"))

from repeat_scenarios import print_tally
from run_ledger import Judged, append_ledger, load, read_ledger, record_of

RUN = Path(__file__).parent / "data" / "run-new"


@pytest.fixture
def run_pair(tmp_path: Path) -> Path:
    """A copy of a stored run and a -tightened replay of it in which every objective FAILed."""
    folder = tmp_path / "run1"
    shutil.copytree(RUN, folder)
    replay = tmp_path / "run1-tightened"
    replay.mkdir()
    rows = json.loads((RUN / "verdicts.json").read_text())
    for row in rows:
        row["outcome"] = "FAIL"
        row["threshold"] /= 3
        row["objective"] = row["objective"].split(" <=")[0] + " <= 1 ms"
    (replay / "verdicts.json").write_text(json.dumps(rows))
    return folder


def test_a_run_is_named_by_its_end_and_commit_and_keeps_its_calibration(run_pair: Path) -> None:
    record = record_of(run_pair)
    commit = json.loads((RUN / "benchmark.json").read_text())["commit_info"]["id"][:7]
    # The stored run's checkout had uncommitted changes (benchmark.json: "dirty": true).
    assert record.run == f"2026-12-02T19:49 {commit}+changes"
    assert record.profile == "cpu-tiny"
    assert record.requests == {"realtime": 120}
    objectives = [v for v in record.verdicts if v.scenario == "realtime"]
    # The stored run's two p99s were INCONCLUSIVE at 120 requests, the rest PASSed.
    assert {v.key.split(" <=")[0].split(" >=")[0]: v.outcome for v in objectives} == {
        "realtime: ttft p50": "PASS",
        "realtime: ttft p99": "INCONCLUSIVE",
        "realtime: tpot p99": "INCONCLUSIVE",
        "realtime: output_throughput": "PASS",
    }
    assert {v.tightened for v in objectives} == {"FAIL"}
    assert objectives[0].estimate == pytest.approx(0.0285701885)


def test_the_ledger_keeps_each_run_once_and_reads_back_what_was_written(
    run_pair: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "runs.jsonl"
    record = record_of(run_pair)
    assert append_ledger(ledger, [record]) == 1
    assert append_ledger(ledger, [record]) == 0
    assert read_ledger(ledger) == [record]
    # The folder and the ledger name the same run: it counts once.
    assert load([run_pair, ledger]) == [record]


def test_a_tally_from_the_ledger_is_the_tally_from_the_folder(
    run_pair: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "runs.jsonl"
    append_ledger(ledger, [record_of(run_pair)])
    print_tally(load([run_pair]))
    from_folder = capsys.readouterr().out
    shutil.rmtree(run_pair)
    print_tally(load([ledger]))
    assert capsys.readouterr().out == from_folder
    assert "realtime (120 requests)" in from_folder
    assert "0 of 1" in from_folder  # two p99s were INCONCLUSIVE: the run did not fully PASS
    # Each objective is counted under its run's calibration, its replay too.
    assert re.search(
        r"\nrealtime \(120 requests\)\n(  .*\n)*  ttft p50 <= 60 ms +1 +0", from_folder
    )
    assert "realtime (120 requests)\n  output_throughput" in from_folder.split("judged tighter")[1]


def test_runs_of_two_profiles_are_not_tallied_together(run_pair: Path, tmp_path: Path) -> None:
    record = record_of(run_pair)
    other = type(record)("2026-12-03T10:00 abcdef0", "h200-llama2-7b", {}, record.verdicts)
    with pytest.raises(SystemExit, match="span profiles cpu-tiny, h200-llama2-7b"):
        print_tally([record, other])


def test_a_damaged_ledger_line_is_named(tmp_path: Path) -> None:
    ledger = tmp_path / "runs.jsonl"
    ledger.write_text('{"run": "x"}\n')
    with pytest.raises(SystemExit, match=r"runs.jsonl:1: not a ledger line"):
        read_ledger(ledger)
    with pytest.raises(SystemExit, match=r"neither a run folder nor a \.jsonl ledger"):
        load([tmp_path / "missing"])


def test_a_background_class_does_not_split_the_calibration(run_pair: Path) -> None:
    """A mixed run's batch class sends for as long as its realtime class runs, so its count
    (and the scenario's total) moves from run to run: the smallest class names the run's
    calibration."""
    rows = json.loads((run_pair / "verdicts.json").read_text())
    background = dict(rows[-1], request_class="batch", n=2792)
    background["objective"] = "output_throughput class=batch >= 300 tok/s"
    (run_pair / "verdicts.json").write_text(json.dumps([*rows, background]))
    summary_path = run_pair / "realtime" / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["summary"]["requests"] = 120 + 2792
    summary_path.write_text(json.dumps(summary))
    assert record_of(run_pair).requests == {"realtime": 120}


def test_an_objective_that_reached_no_verdict_keeps_the_run_from_passing(
    run_pair: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that dies or will not start fails its objective tests before any verdict: the
    run still counts, as one that did not PASS."""
    rows = json.loads((run_pair / "verdicts.json").read_text())
    for row in rows:
        row["outcome"] = "PASS"
    # ttft p99's test failed (junit.xml) but, as when its server died, left no verdict row.
    kept = [r for r in rows if not r["test"].endswith("[ttft p99]")]
    (run_pair / "verdicts.json").write_text(json.dumps(kept))
    record = record_of(run_pair)
    lost = [v for v in record.verdicts if v.outcome != "PASS"]
    assert [(v.key, v.outcome, v.scenario) for v in lost] == [
        ("realtime: test_objective[ttft p99] (no verdict)", "FAIL", "realtime")
    ]
    print_tally([record])
    assert re.search(r"realtime \(120 requests\) +0 of 1", capsys.readouterr().out)
    # Nothing judged at all: the run is named by the profile it started with, and counted.
    (run_pair / "verdicts.json").unlink()
    record = record_of(run_pair)
    assert record.profile == "cpu-tiny"
    print_tally([record])
    out = capsys.readouterr().out
    assert re.search(r"suites/test_realtime.py \(\? requests\) +0 of 1", out), out


def test_runs_judged_against_other_thresholds_count_apart(
    run_pair: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scenario whose bounds changed between runs, at the same request count, is two
    calibrations: runs against the looser bound must not count towards the tighter one. A run
    whose server died before one objective's verdict counts under the calibration that judged
    the rest of its thresholds."""
    rows = json.loads((run_pair / "verdicts.json").read_text())
    for row in rows:
        row["outcome"] = "PASS"
    (run_pair / "verdicts.json").write_text(json.dumps(rows))
    tight = record_of(run_pair)
    p50, p99 = "realtime: ttft p50 <= 60 ms", "realtime: ttft p99 <= 200 ms"
    looser = dataclasses.replace(
        tight,
        run="looser",
        verdicts=tuple(
            dataclasses.replace(v, key=v.key.replace(p50, "realtime: ttft p50 <= 960 ms"))
            for v in tight.verdicts
        ),
    )
    lost = Judged("realtime: test_objective[ttft p99] (no verdict)", "FAIL", "realtime")
    died = dataclasses.replace(
        tight, run="died", verdicts=(*(v for v in tight.verdicts if v.key != p99), lost)
    )
    print_tally([tight, looser, died])
    out = capsys.readouterr().out.split("runs in which every verdict PASSed")[1]
    assert re.search(r"realtime \(120 requests; [^\n]*p50 <= 60 ms[^\n]*\n +1 of 2", out), out
    assert re.search(r"realtime \(120 requests; [^\n]*p50 <= 960 ms[^\n]*\n +1 of 1", out), out
