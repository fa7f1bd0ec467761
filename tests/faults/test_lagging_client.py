"""A client that falls behind its schedule makes the run INVALID, with the lag in the message;
the suite's own work during a run (a sequential look) does not make it fall behind.

The lag is real, not made up in the records: the per-record callback blocks the event loop, as
a starved client CPU would, while an open-loop schedule keeps coming due. The records then go
through the suite's own validity check and verdict, as a run's do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from pathlib import Path

from fixtures.result import ScenarioResult
from fixtures.runner import Target, run_plan
from fixtures.selection import Selection
from fixtures.settings import Settings
from fixtures.targets import ServerInfo
from slo.judging import invalid_reasons
from slo.records import RequestRecord
from slo.scenario import load_profile, load_scenario
from slo.stats import summarize
from slo.verdict import Outcome
from tests.faults.injector import FaultInjector
from tests.faults.test_runner_faults import CLASS, MODEL, open_plan

SCENARIO = f"""\
[scenario]
name = "lagging"
description = "open-loop requests; the client cannot keep up"

[workload]
api = "chat"
class = "{CLASS}"
arrival = "constant"
rate = "200 req/s"
requests = 40
warmup_requests = 0
prompt_tokens = {{ min = 4, max = 4 }}
output_tokens = 4
timeout = "5s"

[validity]
schedule_lag_p99 = "5ms"
error_rate = "1%"

[objectives.faults]
"ttft p50" = "<= 10s"
"""


def test_lagging_client_is_invalid_never_pass(tmp_path: Path) -> None:
    path = tmp_path / "lagging.toml"
    path.write_text(SCENARIO)
    scenario = load_scenario(path)
    (objective,) = scenario.objectives_for("faults")
    # 40 callbacks of 30 ms hold the loop for 1.2 s: the default 1 s request limit would turn
    # the late ones into timeouts on a busy machine (a second reason); give them 10 s.
    plan = open_plan([f"p{i}" for i in range(40)], gap_s=0.005, timeout_s=10.0)

    def starved(r: RequestRecord) -> None:
        time.sleep(0.03)  # the event loop is held: sends due meanwhile go out late

    with FaultInjector() as inj:
        records = asyncio.run(run_plan(plan, Target(inj.url, MODEL), on_record=starved))
    summary = summarize(records)
    assert summary.n_ok == 40
    assert max(r.schedule_lag_s for r in records) > 0.005

    reasons = invalid_reasons(scenario, records, summary)
    assert len(reasons) == 1, reasons
    assert reasons[0].startswith("schedule lag p99 = ") and " ms > 5.0 ms: " in reasons[0]
    assert "of 40 requests were sent more than 5.0 ms late" in reasons[0]
    assert "the client, not the server, was the bottleneck" in reasons[0]

    settings = Settings(
        profile="faults", profile_source="option", endpoint=inj.url, api_key_env="VLLM_API_KEY",
        api_key=None, vllm_python="python", startup_timeout_s=1.0, tighten=1.0,
        max_requests=None, model=None, run_dir=tmp_path, host="127.0.0.1", progress=False,
    )  # fmt: skip
    result = ScenarioResult(
        selection=Selection(scenario, load_profile("cpu-tiny"), (objective,), MODEL, {}),
        server=ServerInfo(inj.url, MODEL, "none", False, None),
        records=tuple(records),
        summary=summary,
        invalid_reasons=reasons,
        workload_s=1.0,
        settings=settings,
    )
    verdict = result.judge(objective)
    assert verdict.outcome is Outcome.INVALID
    # The held loop inflated TTFT as well: the figure is the client's, and the verdict says so.
    assert "INVALID, run INVALID: schedule lag p99 = " in verdict.message
    # The same records without the lag reason are not INVALID: the lag is what made them so.
    # (The held loop delayed requests in bursts, so their TTFTs are clustered, and the interval
    # says it cannot decide rather than PASS on them.)
    on_time = dataclasses.replace(result, invalid_reasons=()).judge(objective)
    assert on_time.outcome is Outcome.INCONCLUSIVE and "clustered" in on_time.note


def _busy(seconds: float) -> None:
    """Pure-Python work, holding the GIL as judging a sequential look does."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_slow_stop_check_does_not_hold_back_the_schedule() -> None:
    """--slo-sequential judges every objective at a look (17-32 ms for 200-500 real records on 2
    cores). Run on the sending loop, that held back the requests coming due: a real run was
    INVALID with 19 of 550 requests up to 218 ms late, most of them just after a look. Here each
    tenth check takes 200 ms; on the loop, the next requests would be that late."""
    loop_threads: list[int] = []
    checks: list[int] = []

    def stop_when(records: list[RequestRecord]) -> bool:
        checks.append(threading.get_ident())
        if len(records) % 10 == 0:
            _busy(0.2)
        return len(records) >= 30

    async def run(url: str) -> list[RequestRecord]:
        loop_threads.append(threading.get_ident())
        plan = open_plan([f"s{i}" for i in range(80)], gap_s=0.02, timeout_s=10.0)
        return await run_plan(plan, Target(url, MODEL), stop_when=stop_when)

    with FaultInjector() as inj:
        records = asyncio.run(run(inj.url))
    assert checks and loop_threads[0] not in checks  # judged off the sending loop
    assert 30 <= len(records) < 80  # and still stopped the run
    late = [round(r.schedule_lag_s * 1000) for r in records if r.schedule_lag_s > 0.1]
    assert late == [], late
