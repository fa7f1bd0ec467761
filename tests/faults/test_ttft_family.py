"""The TTFT family timed at the right chunk, on the stream shapes of reasoning and tool calls.

Here these streams come from the fault injector (injector.py), which makes every shape at set
delays (tests/e2e/test_reasoning_and_tools.py gets reasoning and tool-call streams from real vLLM
on the bundled model, forced by structured outputs): a role-only chunk, an empty content delta,
``reasoning_content`` deltas, ``tool_calls`` deltas, then content, each ``DELAY_S`` after the
one before. Each metric (docs/metrics.md) must end at its own chunk.
"""

from __future__ import annotations

import pytest

from slo.records import RequestRecord
from slo.stats import summarize
from tests.faults.injector import Fault, FaultInjector
from tests.faults.test_runner_faults import only, open_plan, run

DELAY_S = 0.05
"""Between chunks: far above the loopback's and the event loop's jitter."""
SLACK_S = 0.8 * DELAY_S


def streamed(injector: FaultInjector, fault: Fault) -> RequestRecord:
    injector.faults["p"] = fault
    r = only(run(open_plan(["p"]), injector.url)[0])
    assert r.ok, r.error
    return r


def after(later: int | None, earlier: int | None, chunks: int) -> bool:
    """``later`` came ``chunks`` delays after ``earlier`` (at least most of them)."""
    assert later is not None and earlier is not None
    return (later - earlier) / 1e9 >= chunks * SLACK_S


def test_each_first_is_its_own_chunk(injector: FaultInjector) -> None:
    # role | empty | think0 think1 | call0 call1 | tok0 tok1
    fault = Fault("slow", chunks=2, delay_s=DELAY_S, empty=1, reasoning=2, tool_calls=2)
    r = streamed(injector, fault)
    assert r.first_chunk_ns is not None and r.first_text_ns is not None
    assert r.first_chunk_ns < r.first_text_ns
    assert after(r.first_text_ns, r.first_chunk_ns, 2)  # the empty delta does not count
    assert after(r.first_tool_ns, r.first_text_ns, 2)  # reasoning came first
    assert after(r.first_content_ns, r.first_tool_ns, 2)
    # Reasoning and tool-call chunks are generated output: ITL and E2E span them.
    assert len(r.chunk_ns) == 2 + 2 + 2
    assert r.chunk_ns[0] == r.first_text_ns
    ttft, chunk, content, tool = r.ttft_s, r.ttft_chunk_s, r.ttft_content_s, r.ttft_tool_s
    assert chunk is not None and ttft is not None and content is not None and tool is not None
    assert chunk < ttft < tool < content


def test_plain_answer_starts_all_but_the_tool_at_the_first_text(injector: FaultInjector) -> None:
    r = streamed(injector, Fault("slow", chunks=3, delay_s=DELAY_S))
    assert r.first_text_ns == r.first_content_ns == r.chunk_ns[0]
    assert after(r.first_text_ns, r.first_chunk_ns, 1)  # the role-only chunk came at once
    assert r.first_tool_ns is None and r.ttft_tool_s is None


def test_completions_first_chunk_is_the_first_text(injector: FaultInjector) -> None:
    injector.faults["p"] = Fault(chunks=3)
    r = only(run(open_plan(["p"], api="completions"), injector.url)[0])
    assert r.first_chunk_ns == r.first_text_ns == r.first_content_ns == r.chunk_ns[0]


def test_tool_call_without_content_leaves_ttft_content_out(injector: FaultInjector) -> None:
    r = streamed(injector, Fault(chunks=0, tool_calls=3))
    assert r.first_tool_ns == r.first_text_ns == r.chunk_ns[0]
    assert r.first_content_ns is None
    s = summarize([r])
    assert s.ttft_tool == (r.ttft_tool_s,) and s.ttft_content == ()


def test_a_stall_is_the_request_s_max_itl(injector: FaultInjector) -> None:
    r = streamed(injector, Fault(chunks=6, stall_at=3, stall_s=4 * DELAY_S))
    gap = r.max_itl_s
    assert gap is not None and gap >= 4 * SLACK_S
    assert gap == max(r.itl_s)
    assert summarize([r]).max_itl == (gap,)


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_failed_request_is_infinitely_slow_in_every_first(
    injector: FaultInjector, api: str
) -> None:
    injector.faults["p"] = Fault("status", status=503)
    r = only(run(open_plan(["p"], api=api), injector.url)[0])
    s = summarize([r])
    for values in (s.ttft, s.ttft_chunk, s.ttft_content, s.ttft_tool, s.max_itl):
        assert values == (float("inf"),)
