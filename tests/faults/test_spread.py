"""The load runner spread over worker processes (fixtures/spread.py), against the fault injector.

The same plan through ``run_plan_spread`` must give what ``run_plan`` gives: one record per
planned request, error kinds intact, the schedule kept; a stop is passed on to every worker; a
failing or interrupted run leaves no worker process behind.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from fixtures.runner import Target
from fixtures.spread import run_plan_spread, split_plan
from fixtures.workload import WorkloadPlan
from slo.errors import WorkloadError
from slo.records import RequestRecord
from slo.stats import summarize
from tests.faults.injector import Fault, FaultInjector
from tests.faults.test_runner_faults import (
    LIVENESS_S,
    MIXED_KINDS,
    MODEL,
    check_mixed_records,
    closed_plan,
    mixed_plan,
    open_plan,
    planned,
)

ROOT = Path(__file__).resolve().parents[2]


def spread(plan: WorkloadPlan, url: str, workers: int, **kw: object) -> list[RequestRecord]:
    return asyncio.run(run_plan_spread(plan, Target(url, MODEL), workers, **kw))  # type: ignore[arg-type]


def test_split_deals_every_request_once_and_splits_the_streams() -> None:
    plan = WorkloadPlan(
        api="chat",
        timeout_s=1.0,
        requests=(
            *(planned(i, "w", offset_s=None, warmup=True) for i in range(3)),
            *(planned(3 + i, "o", offset_s=i * 0.01) for i in range(7)),
            *(planned(10 + i, "c", offset_s=None) for i in range(10)),
        ),
        streams=(("faults", 5, False),),
    )
    shares = split_plan(plan, 3)
    got = sorted(r.index for s in shares for r in s.requests)
    assert got == [r.index for r in plan.requests]  # each exactly once
    # Open-loop requests keep their intended times, dealt round-robin.
    assert [[r.offset_s for r in s.measured if r.offset_s is not None] for s in shares] == [
        [0.0, 0.03, 0.06],
        [0.01, 0.04],
        [0.02, 0.05],
    ]
    # 5 streams over 3 workers: 2, 2, 1; requests in proportion to the streams.
    assert [s.streams for s in shares] == [(("faults", n, False),) for n in (2, 2, 1)]
    assert [sum(r.offset_s is None for r in s.measured) for s in shares] == [4, 4, 2]
    assert [len(s.warmup) for s in shares] == [1, 1, 1]
    # More workers than streams: the extra ones get no stream and none of its requests.
    few = split_plan(closed_plan(["a", "b", "c"], concurrency=2), 3)
    assert [s.streams for s in few] == [(("faults", 1, False),)] * 2 + [()]
    assert [len(s.requests) for s in few] == [2, 1, 0]
    with pytest.raises(WorkloadError, match="client processes = 0"):
        split_plan(plan, 0)


@pytest.mark.parametrize("arrival", ["open", "closed"])
def test_spread_run_gives_every_record_with_its_error_kind(
    injector: FaultInjector, arrival: str
) -> None:
    plan = mixed_plan(injector, arrival)
    seen: list[int] = []
    t0 = time.monotonic()
    records = spread(plan, injector.url, 3, on_record=lambda r: seen.append(r.index))
    assert time.monotonic() - t0 < LIVENESS_S + 30  # worker start-up included
    assert [r.index for r in records] == [q.index for q in plan.requests]
    assert sorted(seen) == [q.index for q in plan.requests]  # each reported as it completed
    check_mixed_records(injector, records)
    assert summarize(records).errors_by_kind == MIXED_KINDS


def test_spread_open_loop_keeps_one_schedule(injector: FaultInjector) -> None:
    plan = open_plan([f"p{i}" for i in range(40)], gap_s=0.01)
    records = spread(plan, injector.url, 4)
    assert all(r.ok for r in records), [r.error for r in records if not r.ok]
    # One origin for all workers: intended times are the plan's offsets from it.
    origin = records[0].intended_send_ns
    offsets = [(r.intended_send_ns - origin) / 1e9 for r in records]
    assert offsets == pytest.approx([i * 0.01 for i in range(40)], abs=1e-6)
    assert max(r.schedule_lag_s for r in records) < 0.5


def test_a_stop_reaches_every_worker(injector: FaultInjector) -> None:
    injector.faults.update({f"p{i}": Fault("slow", chunks=2, delay_s=0.05) for i in range(400)})
    plan = open_plan([f"p{i}" for i in range(400)], gap_s=0.01)  # 4 s of sends
    records = spread(plan, injector.url, 2, stop_when=lambda rs: len(rs) >= 10)
    # Stopped after about 10 completions: what was in flight finished, nothing more was sent.
    assert 10 <= len(records) < 100
    assert all(r.ok for r in records)
    assert len(injector.seen) == len(records)


def test_a_failing_callback_fails_the_run(injector: FaultInjector) -> None:
    def broken(r: RequestRecord) -> None:
        raise RuntimeError("progress broke")

    with pytest.raises(RuntimeError, match="progress broke"):
        spread(open_plan(["a", "b"]), injector.url, 2, on_record=broken)


def test_a_failing_worker_fails_the_run_and_none_is_left(injector: FaultInjector) -> None:
    # A request that cannot be encoded as JSON (a bug, not a server error): the worker's
    # run_plan raises, and the run fails with the worker's traceback.
    bad = planned(0, "x", offset_s=0.0)
    object.__setattr__(bad, "max_tokens", {1j})
    plan = WorkloadPlan(api="completions", timeout_s=1.0, requests=(bad,))
    before = set(psutil.Process().children(recursive=True))
    with pytest.raises(WorkloadError, match=r"client worker 0 failed:(.|\n)*Error"):
        spread(plan, injector.url, 2)
    left = set(psutil.Process().children(recursive=True)) - before
    # multiprocessing's resource tracker, started by the first spawn of this process, stays
    # for the process's life by design; the workers must not.
    assert [p for p in left if not _resource_tracker(p)] == []


def _resource_tracker(p: psutil.Process) -> bool:
    try:
        return "resource_tracker" in " ".join(p.cmdline())
    except psutil.Error:  # a worker left as a zombie has no command line
        return False


SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from fixtures.runner import Target
    from fixtures.spread import run_plan_spread
    from tests.faults.test_runner_faults import MODEL, open_plan

    plan = open_plan([f"h{i}" for i in range(50)], gap_s=0.01, timeout_s=60.0)

    async def after_warmup():
        print("measuring", flush=True)
        return None

    asyncio.run(run_plan_spread(plan, Target(sys.argv[1], MODEL), 3, after_warmup=after_warmup))
    """
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_spread_run_leaves_no_worker(
    injector: FaultInjector, sig: signal.Signals
) -> None:
    injector.default = Fault("hang")  # every request in flight until the run is stopped
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, injector.url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        # Ctrl-C as a terminal delivers it, also when this run was started with SIGINT ignored
        # (a background job of a shell without job control).
        preexec_fn=functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "measuring", proc.stderr
        workers = psutil.Process(proc.pid).children(recursive=True)
        assert len(workers) >= 3  # the three workers (and multiprocessing's helper)
        while len(injector.seen) < 6:  # requests in flight from the workers
            time.sleep(0.05)
        proc.send_signal(sig)
        proc.wait(timeout=30)
        psutil.wait_procs(workers, timeout=10)
        assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert Counter(s.path for s in injector.seen)["/v1/chat/completions"] >= 6
