"""The runner's own SSE reading gives the records openai's typed stream iterator gives.

The runner reads the response body raw through the openai client and parses the events itself
(fixtures.runner.SSEChunks), because the typed iterator costs several times more CPU per chunk.
Here both read the same fuzzed streams from the fault injector, and must agree on what a record
holds: the error kind, the number of text chunks, and the token counts.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import openai
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from fixtures.runner import SSEChunks, Target, make_client, run_plan
from tests.faults.injector import Fault, FaultInjector
from tests.faults.test_runner_faults import (
    _BAD_USAGE,
    MODEL,
    _no_text_stream,
    _stream,
    kind,
    open_plan,
)

Outcome = tuple[str | None, int, Any, Any]
"""(error kind, text chunks, prompt tokens, completion tokens)"""


def _typed_has_text(choice: Any, api: str) -> bool:
    if api != "chat":
        return bool(choice.text)
    d = choice.delta
    return bool(
        d.content
        or getattr(d, "reasoning_content", None)
        or getattr(d, "reasoning", None)
        or d.tool_calls
    )


async def typed(url: str, api: str, prompt: str) -> Outcome:  # noqa: C901  (the former code path, kept whole as the reference)
    """One request read through openai's typed stream iterator (the runner's former path)."""
    client = make_client(Target(url, MODEL), 2.0)
    chunks = 0
    usage: Any = None
    kind_: str | None = None
    ended = False
    try:
        if api == "chat":
            stream: Any = await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": prompt}],
                max_tokens=4,
                stream=True,
                stream_options={"include_usage": True},
            )
        else:
            stream = await client.completions.create(
                model=MODEL,
                prompt=prompt,
                max_tokens=4,
                stream=True,
                stream_options={"include_usage": True},
            )
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage
                if chunk.choices and _typed_has_text(chunk.choices[0], api):
                    chunks += 1
                if chunk.choices and chunk.choices[0].finish_reason is not None:
                    ended = True
        finally:
            await stream.close()
    except openai.APIConnectionError:
        kind_ = "StreamCut"
    except openai.APIError:
        kind_ = "StreamError"
    except (ValueError, RecursionError):
        kind_ = "MalformedSSE"
    except (AttributeError, TypeError, IndexError, KeyError):
        kind_ = "MalformedChunk"
    finally:
        await client.close()
    done = getattr(usage, "completion_tokens", None)
    if kind_ is None and chunks == 0 and ended and type(done) is int and done > 0:
        chunks = 1  # tokens that decoded to no text: the chunk that ended the choice has them
    if kind_ is None and chunks == 0:
        kind_ = "NoText"
    if kind_ is None and usage is None:
        kind_ = "NoUsage"
    tokens = (getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None))
    if any(t is not None and type(t) is not int for t in tokens):
        tokens = (None, None)
        kind_ = kind_ or "MalformedChunk"
    return kind_, chunks, *tokens


def _bool_count(fault: Fault) -> bool:
    """A usage token count of true/false: openai's models read it as 1/0, the runner refuses it
    (MalformedChunk: a boolean is no token count), the one place they differ on purpose."""
    for line in fault.lines:
        try:
            data = json.loads(line.removeprefix(b"data:"))
        except ValueError:
            continue
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict) and any(isinstance(v, bool) for v in usage.values()):
            return True
    return False


def test_a_boolean_token_count_is_a_malformed_chunk() -> None:
    usage = b'{"prompt_tokens": 3, "completion_tokens": true}'
    line = b'data: {"choices": [{"delta": {"content": "x"}}], "usage": ' + usage + b"}"
    fault = Fault("raw", lines=(line, b"", b"data: [DONE]", b""))
    assert _bool_count(fault)
    with FaultInjector() as inj:
        inj.faults["p"] = fault
        assert ours(inj.url, "chat", "p") == ("MalformedChunk", 1, None, None)


def ours(url: str, api: str, prompt: str) -> Outcome:
    (r,) = asyncio.run(run_plan(open_plan([prompt], api=api, timeout_s=2.0), Target(url, MODEL)))
    return kind(r), len(r.chunk_ns), r.prompt_tokens, r.output_tokens


_CRLF = Fault(
    "raw",
    lines=(
        b'data: {"choices": [{"delta": {"content": "a"}, "text": "a"}]}\r',
        b"\r",
        b': keep-alive\r\ndata: {"choices": [{"delta": {"content": "b"}, "text": "b"}]}\r\n\r',
        b'data: {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}\r\r',
        b"data: [DONE]\r\n\r",
    ),
)


def test_runner_reads_streams_as_openai_iterator_does() -> None:
    with FaultInjector() as inj:
        runs = itertools.count()

        @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(api=st.sampled_from(["chat", "completions"]), fault=_stream)
        @example(api="chat", fault=Fault("raw", lines=(_BAD_USAGE, b"", b"data: [DONE]")))
        @example(api="completions", fault=_CRLF)
        @example(api="chat", fault=_no_text_stream(1, "length"))
        @example(api="chat", fault=_no_text_stream(0, "length"))
        @example(api="chat", fault=Fault("raw", lines=(b"id: 7", b"", b"data: [DONE]", b"")))
        @example(api="chat", fault=Fault("raw", lines=(b"event: thread.x", b"data: {}", b"")))
        @example(api="chat", fault=Fault("raw", lines=(b"data", b"", b"data: [DONE]", b"")))
        @example(
            api="chat",
            fault=Fault("raw", lines=(b'data: {"usage": {"prompt_tokens": []}}', b"", b"")),
        )
        def check(api: str, fault: Fault) -> None:
            assume(not _bool_count(fault))
            prompt = f"parity {next(runs)}"
            inj.faults[prompt] = fault
            expected = asyncio.run(typed(inj.url, api, prompt))
            assert ours(inj.url, api, prompt) == expected

        check()
    assert inj.errors == [], "the fault injector itself failed"


def test_events_split_anywhere_in_the_bytes_give_the_same_chunks() -> None:
    # With an event id set, every blank line dispatches an event: a CRLF taken for two line
    # ends would make an empty one (not JSON).
    body = (
        b"id: 1\r\n"
        b'data: {"choices": [{"delta": {"content": "x"}}]}\r\n\r\n'
        b": ping\n"
        b'data: {"choices": [],\ndata: "usage": {"completion_tokens": 1}}\r\r'
        b"data: [DONE]\n\n"
    )
    whole = list(SSEChunks(None).feed(body))  # type: ignore[arg-type]
    assert len(whole) == 2 and whole[1]["usage"] == {"completion_tokens": 1}
    for cut in range(1, len(body)):
        events = SSEChunks(None)  # type: ignore[arg-type]
        got = [*events.feed(body[:cut]), *events.feed(body[cut:])]
        assert got == whole, cut
        assert events.done
