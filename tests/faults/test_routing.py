"""Multi-instance routing: each class's requests go to its own server, and each record says which.

Two fault injectors stand in for two vLLM instances (one per class); every request is answered
with a good stream, so what is checked is only where it went.
"""

from __future__ import annotations

import asyncio
import dataclasses

from fixtures.runner import Target, run_plan
from fixtures.workload import WorkloadPlan
from tests.faults.injector import FaultInjector
from tests.faults.test_runner_faults import MODEL, TIMEOUT_S, planned


def test_requests_go_to_their_class_instance_and_records_name_it() -> None:
    reqs = [
        dataclasses.replace(planned(i, f"rt{i}", offset_s=i * 0.005), request_class="realtime")
        for i in range(4)
    ]
    reqs += [
        dataclasses.replace(planned(4 + i, f"bt{i}", offset_s=None), request_class="batch")
        for i in range(3)
    ]
    plan = WorkloadPlan(
        api="chat",
        timeout_s=TIMEOUT_S,
        requests=tuple(reqs),
        streams=(("batch", 2, False),),
    )
    with FaultInjector() as rt, FaultInjector() as bt:
        routes = {
            "realtime": Target(rt.url, MODEL, name="realtime"),
            "batch": Target(bt.url, MODEL, name="batch"),
        }
        records = asyncio.run(run_plan(plan, routes["realtime"], routes=routes))
        # Which server saw each request's prompt: exactly its class's one, and only once.
        served = {
            r.index: [
                n for n, inj in (("realtime", rt), ("batch", bt)) if inj.count(reqs[r.index].prompt)
            ]
            for r in records
        }
    assert all(r.ok for r in records), [r.error for r in records]
    assert {r.index: r.instance for r in records} == {r.index: r.request_class for r in records}
    assert served == {r.index: [r.request_class] for r in records}
