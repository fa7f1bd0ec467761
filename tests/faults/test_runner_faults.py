"""The load runner under faults: every failed request becomes one record with a clear error kind.

Real vLLM cannot fail on demand, so these tests run ``fixtures.runner.run_plan`` against the fault
injector (injector.py), which answers each request as the test asks: a good stream, a 503, a
stream cut mid-way, a malformed SSE line, a first byte that never comes, and so on. The records
then go through the real statistics and verdicts: errors must count, never vanish.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import openai
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from fixtures.runner import Target, run_plan
from fixtures.workload import PlannedRequest, WorkloadPlan
from slo.records import RequestRecord
from slo.scenario import Validity, parse_objective
from slo.stats import summarize
from slo.verdict import Outcome, check_server, check_validity, evaluate, judge
from tests.faults.injector import Fault, FaultInjector

MODEL = "fault-injector-model"
CLASS = "faults"
TIMEOUT_S = 1.0
"""The plans' per-request limit: a request that hangs costs this much."""
LIVENESS_S = TIMEOUT_S + 5.0
"""Generous bound on a run's wall time: a check that it ends, not a speed target."""


def planned(
    index: int, prompt: str, *, offset_s: float | None, max_tokens: int = 4, warmup: bool = False
) -> PlannedRequest:
    return PlannedRequest(
        index=index,
        request_class=CLASS,
        offset_s=offset_s,
        prompt=prompt,
        prompt_tokens=len(prompt.split()),
        expected_prompt_tokens=None,
        max_tokens=max_tokens,
        priority=None,
        warmup=warmup,
    )


def open_plan(
    prompts: Sequence[str],
    *,
    api: str = "chat",
    gap_s: float = 0.005,
    warmup: Sequence[str] = (),
    timeout_s: float = TIMEOUT_S,
) -> WorkloadPlan:
    """Warm-up requests (closed loop), then one request per prompt every ``gap_s`` (open loop)."""
    reqs = [planned(i, p, offset_s=None, warmup=True) for i, p in enumerate(warmup)]
    reqs += [planned(len(reqs) + i, p, offset_s=i * gap_s) for i, p in enumerate(prompts)]
    return WorkloadPlan(api=api, timeout_s=timeout_s, requests=tuple(reqs))


def closed_plan(
    prompts: Sequence[str], *, api: str = "chat", concurrency: int = 4, warmup: Sequence[str] = ()
) -> WorkloadPlan:
    """Warm-up requests, then the prompts through ``concurrency`` closed-loop streams."""
    reqs = [planned(i, p, offset_s=None, warmup=True) for i, p in enumerate(warmup)]
    reqs += [planned(len(reqs) + i, p, offset_s=None) for i, p in enumerate(prompts)]
    return WorkloadPlan(
        api=api, timeout_s=TIMEOUT_S, requests=tuple(reqs), streams=((CLASS, concurrency, False),)
    )


def run(plan: WorkloadPlan, base_url: str) -> tuple[list[RequestRecord], float]:
    """The plan's records and the run's wall time (s)."""
    t0 = time.monotonic()
    records = asyncio.run(run_plan(plan, Target(base_url, MODEL)))
    return records, time.monotonic() - t0


def kind(r: RequestRecord) -> str | None:
    """The error kind, as ``slo.stats.summarize`` counts it."""
    return None if r.error is None else r.error.split(":", 1)[0]


def only(records: list[RequestRecord]) -> RequestRecord:
    assert len(records) == 1, records
    return records[0]


# -- a good stream, for contrast -------------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_good_stream_is_measured(injector: FaultInjector, api: str) -> None:
    injector.faults["one two three"] = Fault(chunks=5)
    r = only(run(open_plan(["one two three"], api=api), injector.url)[0])
    assert r.ok and r.error is None
    assert r.output_tokens == 5 and r.prompt_tokens == 3  # from the usage chunk
    assert len(r.chunk_ns) == 5
    assert r.first_text_ns is not None and r.end_ns is not None
    assert r.sent_ns <= r.first_text_ns == r.chunk_ns[0] <= r.chunk_ns[-1] <= r.end_ns
    assert r.response_id == ("chatcmpl-" if api == "chat" else "cmpl-") + "fault-injector"
    (seen,) = injector.seen
    assert seen.path == ("/v1/chat/completions" if api == "chat" else "/v1/completions")
    assert seen.body["stream"] is True and seen.body["stream_options"] == {"include_usage": True}
    assert seen.body["ignore_eos"] is True and seen.body["max_tokens"] == 4
    assert seen.body["model"] == MODEL and "priority" not in seen.body
    if api == "chat":
        assert seen.body["messages"] == [{"role": "user", "content": "one two three"}]
    else:
        assert seen.body["prompt"] == "one two three"
    s = summarize([r])
    assert s.errors_by_kind == {} and s.error_rate == 0.0


def test_priority_reaches_the_server_in_the_body(injector: FaultInjector) -> None:
    base = open_plan(["urgent"])
    plan = replace(base, requests=(replace(base.requests[0], priority=-5),))
    assert only(run(plan, injector.url)[0]).ok
    (seen,) = injector.seen
    assert seen.body["priority"] == -5 and seen.body["ignore_eos"] is True


def test_building_the_request_is_schedule_lag_not_ttft(
    injector: FaultInjector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Time the openai client spends building a request is the instrument's: the request counts
    as sent when the transport gets it, so it shows as schedule lag, never as TTFT."""
    build = openai.AsyncOpenAI._build_request

    def slow_build(self: openai.AsyncOpenAI, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.08)
        return build(self, *args, **kwargs)

    monkeypatch.setattr(openai.AsyncOpenAI, "_build_request", slow_build)
    injector.faults["slow to build"] = Fault(chunks=3)
    r = only(run(open_plan(["slow to build"]), injector.url)[0])
    assert r.ok
    assert r.schedule_lag_s >= 0.08
    assert r.ttft_s is not None and r.ttft_s < 0.08


# -- one fault at a time ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 503])
def test_http_error_is_recorded_once(injector: FaultInjector, status: int) -> None:
    injector.faults["p"] = Fault("status", status=status)
    r = only(run(open_plan(["p"]), injector.url)[0])
    assert kind(r) == f"HTTP {status}"
    assert r.error is not None and f"fault injector: HTTP {status} as asked" in r.error
    assert r.first_text_ns is None and r.chunk_ns == () and r.end_ns is not None
    # max_retries=0: a retry would hide inside the measurement, even with Retry-After sent.
    assert injector.count("p") == 1


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
def test_stream_cut_mid_way_keeps_what_arrived(injector: FaultInjector, reset: bool) -> None:
    injector.faults["p"] = Fault("cut", chunks=2, reset=reset)
    r = only(run(open_plan(["p"]), injector.url)[0])
    assert kind(r) == "StreamCut"
    assert r.error is not None
    # The transport says the body ended short; a reset is named, a clean close is not one.
    assert "payload is not completed" in r.error
    assert ("Connection reset" in r.error) is reset
    assert r.first_text_ns is not None and len(r.chunk_ns) == 2  # TTFT seen, response incomplete
    assert r.output_tokens is None and not r.ok and r.ttft_s is not None


def test_stream_cut_before_any_text(injector: FaultInjector) -> None:
    injector.faults["p"] = Fault("cut", chunks=0)
    r = only(run(open_plan(["p"], api="completions"), injector.url)[0])
    assert kind(r) == "StreamCut" and r.first_text_ns is None and r.chunk_ns == ()


def test_connection_closed_before_any_response(injector: FaultInjector) -> None:
    injector.faults["p"] = Fault("drop")
    r = only(run(open_plan(["p"]), injector.url)[0])
    assert kind(r) == "NoResponse" and r.first_text_ns is None and r.end_ns is not None


def test_connection_refused() -> None:
    # A bound socket that does not listen: the port is taken (no one else gets it) and refuses.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        records, wall = run(open_plan(["p"]), f"http://127.0.0.1:{port}")
    r = only(records)
    assert kind(r) == "ConnectError" and r.error is not None and "Refused" in r.error
    assert r.first_text_ns is None and r.end_ns is not None
    assert wall < LIVENESS_S


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"data: {not json", "MalformedSSE"),
        (b"data: \xff\xfe not utf-8", "MalformedSSE"),
        (b"data: null", "MalformedChunk"),
        (b'data: {"choices": 7}', "MalformedChunk"),
        (b'data: {"choices": [{"delta": "text"}]}', "MalformedChunk"),
        (b'data: {"error": {"message": "engine died"}}', "StreamError"),
    ],
    ids=["not-json", "not-utf8", "null", "choices-int", "delta-str", "error-event"],
)
def test_bad_line_after_good_chunks(injector: FaultInjector, line: bytes, expected: str) -> None:
    injector.faults["p"] = Fault("malformed", chunks=2, lines=(line,))
    r = only(run(open_plan(["p"]), injector.url)[0])
    assert kind(r) == expected
    assert r.first_text_ns is not None and len(r.chunk_ns) == 2
    if expected == "StreamError":
        assert r.error is not None and "engine died" in r.error


def test_first_byte_never_comes_ends_at_the_timeout(injector: FaultInjector) -> None:
    injector.faults["p"] = Fault("hang")
    records, wall = run(open_plan(["p"]), injector.url)
    r = only(records)
    assert wall < LIVENESS_S
    assert kind(r) == "Timeout" and r.first_text_ns is None and r.end_ns is not None
    assert (r.end_ns - r.sent_ns) / 1e9 >= 0.9 * TIMEOUT_S  # ended by the timeout, not before


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_slow_chunks_are_timed_from_the_first_text(injector: FaultInjector, api: str) -> None:
    # The chat role chunk comes at once: it carries no text, so it must not end TTFT.
    injector.faults["p"] = Fault("slow", chunks=3, delay_s=0.2)
    r = only(run(open_plan(["p"], api=api), injector.url)[0])
    assert r.ok and r.output_tokens == 3
    assert r.ttft_s is not None and r.ttft_s >= 0.2
    assert len(r.itl_s) == 2 and min(r.itl_s) >= 0.15


def _no_text_stream(tokens: int, finish: str | None) -> Fault:
    """What vLLM streams when its one generated token decodes to no text (a lone byte of a
    multi-byte character): the role chunk, an empty delta that ends the choice, the usage."""
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": finish}]},
        {"choices": [], "usage": {"prompt_tokens": 18, "completion_tokens": tokens}},
    ]
    lines = [x for c in chunks for x in (b"data: " + json.dumps(c).encode(), b"")]
    return Fault("raw", lines=(*lines, b"data: [DONE]", b""))


@pytest.mark.parametrize(
    ("tokens", "finish", "expected"),
    [(1, "length", None), (0, "length", "NoText"), (1, None, "NoText")],
    ids=["one-token-no-text", "no-token", "not-ended"],
)
def test_tokens_that_decode_to_no_text_are_timed_where_the_choice_ends(
    injector: FaultInjector, tokens: int, finish: str | None, expected: str | None
) -> None:
    # 19 of 300 single-token answers of the tiny model on CPU vLLM came so: the server did its
    # work, and the request must not count as failed (it made a worst-case search FAIL).
    injector.faults["p"] = _no_text_stream(tokens, finish)
    r = only(run(open_plan(["p"]), injector.url)[0])
    assert kind(r) == expected
    if expected is None:
        assert r.ok and r.output_tokens == 1 and r.first_content_ns is None
        assert r.first_text_ns is not None and r.chunk_ns == (r.first_text_ns,)
        assert r.first_chunk_ns is not None and r.first_chunk_ns <= r.first_text_ns
        assert r.ttft_s is not None and r.e2e_s == r.ttft_s and r.tpot_s is None


def test_slow_stream_past_the_timeout(injector: FaultInjector) -> None:
    injector.faults["p"] = Fault("slow", chunks=50, delay_s=0.2)
    records, wall = run(open_plan(["p"]), injector.url)
    r = only(records)
    assert wall < LIVENESS_S
    assert kind(r) == "Timeout"
    assert r.first_text_ns is not None and 1 <= len(r.chunk_ns) < 50
    assert summarize([r]).ttft == (float("inf"),)  # a TTFT was seen, but the request failed


# -- many faults in one run: records, accounting, verdicts -----------------------------------------

MIXED = {
    "ok 0": Fault(),
    "ok 1": Fault(),
    "ok 2": Fault(),
    "ok 3": Fault(),
    "ok 4": Fault(),
    "ok 5": Fault(),
    "503": Fault("status", status=503),
    "429": Fault("status", status=429),
    "500": Fault("status", status=500),
    "cut": Fault("cut", chunks=1),
    "malformed": Fault("malformed", chunks=1),
    "hang": Fault("hang"),
    "drop": Fault("drop"),
}
MIXED_KINDS = {
    "HTTP 503": 1,
    "HTTP 429": 1,
    "HTTP 500": 1,
    "StreamCut": 1,
    "MalformedSSE": 1,
    "Timeout": 1,
    "NoResponse": 1,
}


def mixed_plan(injector: FaultInjector, arrival: str) -> WorkloadPlan:
    """A failing warm-up request, then one request per fault of MIXED (open or closed loop)."""
    injector.faults.update(MIXED)
    injector.faults["warm"] = Fault("status", status=503)
    prompts = list(MIXED)
    if arrival == "open":
        return open_plan(prompts, warmup=["warm"])
    return closed_plan(prompts, warmup=["warm"])


def check_mixed_records(injector: FaultInjector, records: list[RequestRecord]) -> None:
    """One record per request of ``mixed_plan``, with its fault's outcome, none sent twice."""
    by_prompt = dict(zip(["warm", *MIXED], records, strict=True))
    assert kind(by_prompt["warm"]) == "HTTP 503"
    for p in MIXED:
        assert by_prompt[p].ok == p.startswith("ok"), by_prompt[p]
        assert injector.count(p) == 1  # nothing retried


@pytest.mark.parametrize("arrival", ["open", "closed"])
def test_every_fault_is_one_record_and_counts(injector: FaultInjector, arrival: str) -> None:
    plan = mixed_plan(injector, arrival)
    records, wall = run(plan, injector.url)
    assert wall < LIVENESS_S

    # Never dropped: one record per planned request, in index order, warm-up included.
    assert [r.index for r in records] == [q.index for q in plan.requests]
    assert [r.warmup for r in records] == [q.warmup for q in plan.requests]
    check_mixed_records(injector, records)

    # Accounting: the warm-up error is excluded, every measured error counts in the rate.
    s = summarize(records)
    assert s.n == 13 and s.n_ok == 6
    assert s.errors_by_kind == MIXED_KINDS
    assert s.error_rate == pytest.approx(7 / 13)
    assert sorted(s.ttft)[-7:] == [float("inf")] * 7  # failures are the slowest, not gone

    # A TTFT objective that every good request meets easily still FAILs: errors count as misses,
    # and past the error-rate bound the server has failed the run (not the client: not INVALID).
    ttft = parse_objective("t.toml", "objectives.t", "ttft p99", "<= 10s")
    validity = Validity(schedule_lag_p99_s=10.0, error_rate=0.01)
    assert check_validity(s, validity) == []
    (reason,) = check_server(s, validity)
    assert reason.startswith("error rate = 53.85% > 1.00% (7 of 13 requests failed: ")
    v = judge(ttft, records, confidence=0.95, profile="faults", server_failures=[reason])
    assert v.outcome is Outcome.FAIL and v.estimate == float("inf")
    rate = parse_objective("t.toml", "objectives.t", "error_rate", "<= 5%")
    assert evaluate(rate, s, confidence=0.95, profile="faults").outcome is Outcome.FAIL


def test_same_objective_without_faults_is_not_failed(injector: FaultInjector) -> None:
    prompts = [f"ok {i}" for i in range(13)]
    records, _ = run(open_plan(prompts), injector.url)
    s = summarize(records)
    assert s.n_ok == 13 and s.errors_by_kind == {} and s.error_rate == 0.0
    ttft = parse_objective("t.toml", "objectives.t", "ttft p99", "<= 10s")
    # Too few samples to PASS a p99, but nothing here makes it FAIL.
    assert evaluate(ttft, s, confidence=0.95, profile="faults").outcome is Outcome.INCONCLUSIVE


# -- fuzzed stream content -------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3)
    ),
    max_leaves=8,
)
_delta = st.fixed_dictionaries(
    {}, optional={"role": _json, "content": _json, "tool_calls": _json, "reasoning": _json}
)
_choice = st.fixed_dictionaries(
    {},
    optional={"index": _json, "delta": _delta | _json, "text": _json, "finish_reason": _json},
)
_usage = st.fixed_dictionaries(
    {}, optional={"prompt_tokens": _json, "completion_tokens": _json, "total_tokens": _json}
)
# Chunk-shaped JSON with odd field values: the likeliest damage, and the deepest path.
_chunk = st.fixed_dictionaries(
    {},
    optional={
        "object": _json,
        "choices": st.lists(_choice | _json, max_size=2) | _json,
        "usage": _usage | _json,
        "error": _json,
    },
)
# Text with a usage object of any shape: the counts reach the statistics' arithmetic.
_text_and_usage = st.builds(
    lambda u: {"choices": [{"index": 0, "delta": {"content": "x"}, "text": "x"}], "usage": u},
    _usage | _json,
)
_event = (_chunk | _text_and_usage | _json).map(lambda v: [b"data: " + json.dumps(v).encode(), b""])
_garbage = st.one_of(
    st.binary(max_size=24),
    st.text(max_size=24).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(max_size=24).map(lambda t: b"data: " + t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [b"data: {not json", b"data: [DONE]", b": keep-alive", b"event: error", b"retry: x", b""]
    ),
).map(lambda line: [line])
_stream = st.builds(
    lambda parts, end: Fault(
        "raw",
        lines=tuple(itertools.chain(*parts, [b"data: [DONE]", b""] if end == "done" else [])),
        cut_body=end == "cut",
    ),
    st.lists(_event | _garbage, max_size=8),
    st.sampled_from(["done", "no-done", "cut"]),
)
_BAD_USAGE = (
    b'data: {"choices": [{"delta": {"content": "x"}}], "usage": {"completion_tokens": "9"}}'
)
FUZZ_KINDS = {"MalformedSSE", "MalformedChunk", "StreamError", "StreamCut", "NoText", "NoUsage"}


def test_fuzzed_stream_content_gives_one_record_per_request() -> None:
    with FaultInjector() as inj:
        runs = itertools.count()

        @given(api=st.sampled_from(["chat", "completions"]), faults=st.lists(_stream, max_size=3))
        @example(api="chat", faults=[Fault("raw", lines=(_BAD_USAGE, b"", b"data: [DONE]"))])
        def check(api: str, faults: list[Fault]) -> None:
            n = next(runs)
            prompts = [f"fuzz {n} {i}" for i in range(len(faults))]
            inj.faults.update(zip(prompts, faults, strict=True))
            records, wall = run(open_plan(prompts, api=api, gap_s=0.0), inj.url)
            assert wall < LIVENESS_S
            assert [r.index for r in records] == list(range(len(prompts)))
            for r in records:
                event(f"kind: {kind(r)}")
                if r.error is None:
                    assert r.ok
                    assert r.output_tokens is None or type(r.output_tokens) is int
                else:
                    assert kind(r) in FUZZ_KINDS, r.error
            summarize(records)  # the statistics take whatever the runner recorded

        check()
    assert inj.errors == [], "the fault injector itself failed"


# -- the injector itself ---------------------------------------------------------------------------


def test_injector_serves_loopback_only_and_always_stops() -> None:
    with pytest.raises(RuntimeError, match="boom"), FaultInjector({"p": Fault("hang")}) as inj:
        assert inj.address[0] == "127.0.0.1" and inj.port > 0  # loopback, a port the OS chose
        # A request left hanging must not hold the server up when the block ends.
        conn = socket.create_connection(("127.0.0.1", inj.port), timeout=5)
        body = json.dumps({"messages": [{"role": "user", "content": "p"}], "stream": True})
        conn.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%b"
            % (len(body), body.encode())
        )
        deadline = time.monotonic() + 5
        while inj.count("p") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        t0 = time.monotonic()
        raise RuntimeError("boom")
    assert time.monotonic() - t0 < 5
    assert conn.recv(1) == b""  # closed, never answered
    conn.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", inj.port), timeout=2).close()


def test_a_failing_record_callback_fails_the_run(injector: FaultInjector) -> None:
    """An exception in the per-record callback must not vanish into asyncio's logger."""

    def broken(records: list[RequestRecord]) -> bool:
        raise RuntimeError("stop rule bug")

    for plan in (open_plan(["a", "b", "c"]), closed_plan(["a", "b", "c"])):
        with pytest.raises(RuntimeError, match="stop rule bug"):
            asyncio.run(run_plan(plan, Target(injector.url, MODEL), stop_when=broken))
