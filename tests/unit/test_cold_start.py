"""Cold-start objectives: their keys and table, the interval over starts on known inputs, the
verdicts (one start, a failed cold request, a server the suite did not start), the run-folder
codec and the A/B comparison of start pairs. Error rates by simulation:
tests/unit/test_cold_start_simulation.py; the starts themselves: tests/faults/test_cold_start.py."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from scipy import stats as sps

from fixtures.ab import compare
from fixtures.cold_start import compare_ab_starts
from fixtures.measure import stop_rule
from fixtures.result import ScenarioResult
from fixtures.selection import select
from fixtures.session import stored_cold_starts
from fixtures.settings import programmatic
from fixtures.targets import ServerInfo
from fixtures.workload import PlannedRequest, WorkloadPlan
from reports.files import write_json
from reports.junit_report import write_junit
from reports.run_files import verdict_row
from reports.run_folder import read_scenario
from reports.signoff import write_signoff
from slo.cold_start import (
    ColdStart,
    ColdStartRun,
    compare_starts,
    judge_cold,
    log_t_interval,
    start_interval,
)
from slo.compare import Change
from slo.errors import ScenarioFileError, SuiteError
from slo.judging import RunEvidence
from slo.scenario import SCENARIO_DIR, load_scenario
from slo.stats import summarize
from slo.verdict import Outcome
from tests.unit.builders import obj, rec
from tests.unit.test_ab_fixture import _block

COLD = (SCENARIO_DIR / "cold-start.toml").read_text()
DATA = Path(__file__).parent / "data"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def starts(ready: list[float], cold_ms: list[float] | None = None) -> ColdStartRun:
    """Starts with these startup seconds, each followed by one request of this TTFT (ms)."""
    cold_ms = cold_ms or [50.0] * len(ready)
    return ColdStartRun(
        tuple(
            ColdStart(r, (rec(0, c),), pid=100 + i)
            for i, (r, c) in enumerate(zip(ready, cold_ms, strict=True))
        ),
        requests=1,
    )


# -- the objective keys and the [cold_start] table --------------------------------------------


def test_cold_start_objectives_take_a_statistic_over_starts() -> None:
    o = obj("startup p50", "<= 2min")
    assert (o.metric, o.statistic, o.threshold) == ("startup", "p50", 120.0)
    assert obj("ttft_cold max", "<= 800ms").threshold == pytest.approx(0.8)


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("startup", "<= 60s", "needs a statistic over the starts"),
        ("startup mean", "<= 60s", "needs a statistic over the starts"),
        ("ttft_cold p50 class=chat", "<= 1s", "takes no class="),
        ("startup p50", ">= 60s", "upper bound"),
        ("startup p50", "<= 60 tok/s", "unit"),
    ],
)
def test_bad_cold_start_objectives_name_the_rule(key: str, value: str, match: str) -> None:
    with pytest.raises(ScenarioFileError, match=match):
        obj(key, value)


def test_the_bundled_cold_start_scenario_loads() -> None:
    s = load_scenario("cold-start")
    assert s.cold_start is not None and s.cold_start.starts >= 2
    assert {o.metric for o in s.objectives_for("cpu-tiny")} >= {"startup", "ttft_cold"}


@pytest.mark.parametrize(
    "edit,match",
    [
        (
            lambda t: (
                t.split("\n[cold_start]\n")[0] + '[objectives.cpu-tiny]\n"startup p50" = "<= 1s"\n'
            ),
            "needs a \\[cold_start\\] table",
        ),
        (
            lambda t: (
                t.split("[objectives.cpu-tiny]")[0]
                + '[objectives.cpu-tiny]\n"ttft p50" = "<= 1s"\n'
            ),
            "judged by nothing",
        ),
        (lambda t: t.replace("requests = 4 ", "requests = 61 "), "at most the workload's 60"),
        (lambda t: t.replace("starts = 3 ", "starts = 101 "), "at most 100"),
        (lambda t: t.replace("starts = 3 ", "starts = 0 "), "integer >= 1"),
        (lambda t: t.replace("requests = 4 ", "requests = 4\nrestarts = 2 "), "unknown key"),
        (lambda t: t + "\n[servers.a]\nmax_num_seqs = 4\n", "server"),
    ],
)
def test_bad_cold_start_tables_name_the_key(tmp_path: Path, edit: object, match: str) -> None:
    assert callable(edit)
    with pytest.raises(ScenarioFileError, match=match):
        load_scenario(write(tmp_path, edit(COLD)))


def test_a_cold_start_with_server_instances_is_refused(tmp_path: Path) -> None:
    text = COLD.replace('timeout = "60s"', 'timeout = "60s"\nserver = "a"')
    text += "\n[servers.a]\nmax_num_seqs = 4\n"
    with pytest.raises(ScenarioFileError, match="measured on one server"):
        load_scenario(write(tmp_path, text))


# -- the interval over starts -----------------------------------------------------------------


def test_the_median_is_the_t_interval_of_the_log_values() -> None:
    iv = log_t_interval([math.e, math.e**2, math.e**3], 0.95)
    half = float(sps.t.ppf(0.975, 2)) * 1.0 / math.sqrt(3)  # sd of 1, 2, 3 is 1
    assert iv.estimate == pytest.approx(math.e**2)
    assert iv.lower == pytest.approx(math.exp(2 - half))
    assert iv.upper == pytest.approx(math.exp(2 + half))
    assert iv.n == 3 and iv.note == ""


def test_a_median_of_six_starts_or_more_is_judged_on_order_statistics() -> None:
    few = start_interval([20.0, 21.0, 22.0, 23.0, 24.0], "p50", 0.95)
    assert few.estimate == pytest.approx(math.exp(sum(math.log(v) for v in range(20, 25)) / 5))
    six = start_interval([20.0, 21.0, 22.0, 23.0, 24.0, 60.0], "p50", 0.95)
    # At 95% the median's interval of 6 values is [X(1), X(6)]; the estimate is the median.
    assert (six.lower, six.estimate, six.upper) == (20.0, 22.5, 60.0)
    ten = start_interval([float(v) for v in range(20, 30)], "p50", 0.95)
    assert (ten.lower, ten.upper) == (21.0, 28.0)  # X(2), X(9)


def test_one_start_or_identical_starts_give_no_interval() -> None:
    one = log_t_interval([20.0], 0.95)
    assert (one.lower, one.upper) == (-math.inf, math.inf) and "one start" in one.note
    same = log_t_interval([20.0, 20.0], 0.95)
    assert same.upper == math.inf and "identical" in same.note


def test_a_tail_quantile_over_few_starts_is_bounded_below_only() -> None:
    iv = start_interval([20.0, 22.0, 21.0], "p90", 0.95)
    assert iv.lower == 20.0 and iv.upper == math.inf
    assert "needs 36 starts" in iv.note
    many = start_interval([20.0 + i / 10 for i in range(40)], "p90", 0.95)
    assert math.isfinite(many.upper) and many.upper <= 23.9


def test_max_is_the_runs_own_slowest_start() -> None:
    iv = start_interval([20.0, 25.0, 21.0], "max", 0.95)
    assert (iv.lower, iv.estimate, iv.upper) == (25.0, 25.0, 25.0)


# -- verdicts ---------------------------------------------------------------------------------


def test_startup_passes_fails_or_cannot_tell() -> None:
    run = starts([20.0, 21.0, 22.0])
    v = judge_cold(obj("startup p50", "<= 30s"), run, confidence=0.95, profile="p")
    assert v.outcome is Outcome.PASS and v.n == 3 and v.upper < 30
    assert "3 server starts (t interval of the log values" in v.message
    six = judge_cold(
        obj("startup p50", "<= 30s"), starts([20.0] * 5 + [29.0]), confidence=0.95, profile="p"
    )
    assert six.outcome is Outcome.PASS and "6 server starts (order statistics)" in six.note
    assert judge_cold(obj("startup p50", "<= 15s"), run, confidence=0.95, profile="p").outcome is (
        Outcome.FAIL
    )
    close = judge_cold(obj("startup p50", "<= 21.5s"), run, confidence=0.95, profile="p")
    assert close.outcome is Outcome.INCONCLUSIVE


def test_one_start_cannot_pass_a_median_but_can_meet_a_max() -> None:
    run = starts([20.0])
    v = judge_cold(obj("startup p50", "<= 10min"), run, confidence=0.95, profile="p")
    assert v.outcome is Outcome.INCONCLUSIVE and "one start gives no spread" in v.note
    assert judge_cold(
        obj("startup max", "<= 10min"), run, confidence=0.95, profile="p"
    ).outcome is (Outcome.PASS)
    assert judge_cold(obj("startup max", "<= 10s"), run, confidence=0.95, profile="p").outcome is (
        Outcome.FAIL
    )


def test_ttft_cold_is_the_slowest_first_request_and_a_failed_one_fails() -> None:
    s = ColdStart(20.0, (rec(0, 30), rec(1, 400), rec(2, 60)))
    assert s.ttft_cold_s == pytest.approx(0.4)
    bad = dataclasses.replace(s, requests=(rec(0, 30), rec(1, 0, error="HTTP 500: boom")))
    assert bad.ttft_cold_s == math.inf
    run = ColdStartRun((s, s, bad), requests=3)
    v = judge_cold(obj("ttft_cold p50", "<= 10s"), run, confidence=0.95, profile="p")
    assert v.outcome is Outcome.FAIL and "start 3 failed a cold request" in v.note
    # The start itself was fine: its startup is judged as usual.
    up = judge_cold(obj("startup max", "<= 30s"), run, confidence=0.95, profile="p")
    assert up.outcome is Outcome.PASS


def test_a_server_the_suite_did_not_start_is_invalid_with_the_reason() -> None:
    run = ColdStartRun((), requests=4, unmeasured="the suite did not start this server")
    v = judge_cold(obj("startup p50", "<= 1min"), run, confidence=0.95, profile="p")
    assert v.outcome is Outcome.INVALID and "did not start this server" in v.note
    none = judge_cold(obj("startup p50", "<= 1min"), None, confidence=0.95, profile="p")
    assert none.outcome is Outcome.INVALID


def test_evidence_judges_cold_objectives_on_the_starts_not_the_records() -> None:
    ev = RunEvidence(
        records=tuple(rec(i, 50) for i in range(50)),
        profile="p",
        confidence=0.95,
        invalid=("schedule lag p99 = 80 ms > 20 ms",),
        cold_starts=starts([20.0, 21.0, 22.0]),
    )
    v = ev.judge(obj("startup p50", "<= 30s"))
    assert v.outcome is Outcome.PASS  # the workload's lagging client does not spoil the starts
    assert ev.judge(obj("ttft p50", "<= 1s")).outcome is Outcome.INVALID
    assert ev.requests_for_pass(v, 1.5) is None


# -- the run folder ---------------------------------------------------------------------------


def test_cold_starts_survive_summary_json(tmp_path: Path) -> None:
    run = ColdStartRun(
        (ColdStart(21.5, (rec(3, 80), rec(4, 0, error="Timeout")), pid=7, log="servers/a.log"),),
        requests=2,
    )
    write_json(tmp_path / "summary.json", {"cold_starts": run.as_dict()})
    raw = json.loads((tmp_path / "summary.json").read_text())
    assert raw["cold_starts"]["starts"][0]["ttft_cold_s"] is None  # +inf is not JSON
    back = stored_cold_starts(raw, tmp_path)
    assert back is not None
    assert back.samples("startup") == (21.5,) and back.samples("ttft_cold") == (math.inf,)
    assert back.starts[0].pid == 7 and back.starts[0].log == "servers/a.log"
    assert read_scenario(tmp_path).cold_starts == back
    props = run.properties()
    assert props["cold_starts"] == 1 and props["cold_starts.startup_s"] == "21.500"


def test_a_damaged_cold_starts_entry_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="cold_starts is not as the suite writes it"):
        stored_cold_starts({"cold_starts": {"starts": [{"requests": []}]}}, tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"cold_starts": [1, 2]}))
    with pytest.raises(SuiteError, match="cold_starts is not as the suite writes it"):
        read_scenario(tmp_path)


# -- between releases -------------------------------------------------------------------------


def test_start_pairs_give_the_ratio_of_geometric_means() -> None:
    a, b = starts([20.0, 22.0, 21.0, 20.5]), starts([30.0, 34.0, 31.0, 31.0])
    c = compare_starts("startup p50", a, b, "startup", margin=0.1, confidence=0.95)
    d = [math.log(y / x) for x, y in zip(a.samples("startup"), b.samples("startup"), strict=True)]
    mean, sd = sum(d) / 4, float(sps.tstd(d))
    half = float(sps.t.ppf(0.975, 3)) * sd / 2
    assert c.ratio == pytest.approx(math.exp(mean))
    assert c.lower == pytest.approx(math.exp(mean - half))
    assert c.upper == pytest.approx(math.exp(mean + half))
    assert c.change is Change.REGRESSION and c.n_blocks == 4
    assert "4 interleaved start pairs" in c.method
    same = compare_starts("startup p50", a, a, "startup", margin=0.1, confidence=0.95)
    assert same.change is Change.NO_CHANGE


def test_an_arm_without_starts_cannot_be_compared() -> None:
    a = ColdStartRun((), requests=1, unmeasured="the suite did not start this server")
    c = compare_starts(
        "startup p50", a, starts([20.0, 21.0]), "startup", margin=0.1, confidence=0.95
    )
    assert c.change is Change.INCONCLUSIVE and "baseline has no cold starts" in c.note


def test_the_ab_comparisons_keep_cold_objectives_apart_from_the_blocks() -> None:
    sel = select("cold-start", programmatic("cpu-tiny"))
    per_block = {
        "baseline": [_block(j, 1.0) for j in range(4)],
        "candidate": [_block(50 + j, 1.0) for j in range(4)],
    }
    blocks = compare(sel, per_block, margin=0.1, confidence=0.95)
    assert "startup p50" not in blocks and "ttft p50" in blocks
    runs = {"baseline": starts([20.0, 21.0, 22.0]), "candidate": starts([40.0, 43.0, 44.0])}
    cold = compare_ab_starts(sel, runs, margin=0.1, confidence=0.95)
    assert set(cold) == {o.name for o in sel.objectives if o.metric in ("startup", "ttft_cold")}
    assert cold["startup p50"].change is Change.REGRESSION
    assert compare_ab_starts(sel, {}, margin=0.1, confidence=0.95) == {}


def test_the_signoff_and_junit_show_the_starts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "run-new", run)
    cold = starts([21.5, 23.0, 22.0], [120.0, 130.0, 110.0])
    summary = json.loads((run / "realtime" / "summary.json").read_text())
    write_json(run / "realtime" / "summary.json", {**summary, "cold_starts": cold.as_dict()})
    v = judge_cold(obj("startup p50", "<= 1min"), cold, confidence=0.95, profile="cpu-tiny")
    rows = json.loads((run / "verdicts.json").read_text())
    row = verdict_row(
        "realtime",
        "suites/test_realtime.py::test_objective[startup p50]",
        "0.32.0",
        "tiny-llama",
        v.as_dict(),
    )
    write_json(run / "verdicts.json", [*rows, row])
    files = write_signoff([run], tmp_path / "out")
    md = files.markdown.read_text()
    assert "### Cold starts" in md and "| 2 | 23.0 s | 130 ms | 130 ms |" in md
    assert "startup, ttft_cold: n is server starts" in md
    assert "| realtime | startup p50 | PASS | 22.2 s |" in md
    junit = ET.parse(write_junit(run, tmp_path / "j.xml"))
    # slo-junit.xml: one case per objective, this one too.
    assert "startup p50 <= 60.0 s" in [c.get("name") for c in junit.iter("testcase")]


def test_a_cold_start_verdicts_junit_properties_carry_each_start() -> None:
    s = programmatic("cpu-tiny")
    sel = select("cold-start", s)
    records = tuple(rec(i, 50) for i in range(60))
    server = ServerInfo("http://x", "tiny-llama", "0.32.0", True, 22.0)
    result = ScenarioResult(
        sel, server, records, summarize(records), (), 1.0, s, cold_starts=starts([21.0, 22.0])
    )
    cold = dict(result.properties(result.judge(obj("startup max", "<= 1min"))))
    assert cold["slo.outcome"] == "PASS" and cold["slo.n"] == 2
    assert cold["slo.cold_starts.startup_s"] == "21.000 22.000"
    assert str(cold["slo.claim"]).startswith("Each cold-start objective")
    warm = dict(result.properties(result.judge(obj("ttft p50", "<= 1s"))))
    assert "slo.cold_starts" not in warm and str(warm["slo.claim"]).startswith("Each objective")


def test_a_sequential_workload_leaves_the_cold_start_objectives_to_the_starts() -> None:
    settings = programmatic("cpu-tiny", sequential=True)
    sel = select("cold-start", settings)
    plan = WorkloadPlan(
        "chat",
        10.0,
        tuple(PlannedRequest(i, "default", 0.1 * i, "p", 1, None, 1, None) for i in range(300)),
    )
    rule, stop_when, _ = stop_rule(sel, settings, plan)
    assert rule is not None and stop_when is not None and rule.looks[0] == 200
    # The look judges the workload's own objective (ttft p50), far under its threshold.
    assert stop_when([rec(i, 50) for i in range(200)]) is True
