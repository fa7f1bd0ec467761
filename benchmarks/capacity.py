"""Load-generator capacity: how many streams and chunks/s the client side sustains.

Against benchmarks/minimal_server.py (pre-encoded SSE, its own process and CPU), so what runs out
is the client, never the server. Two parts:

1. Top speed, closed loop (``--top STREAMSxCHUNKS``, every stream back to back, chunks sent at
   once): chunks/s and chunks per client CPU-second of
     - openai-typed: the openai client's stream iterator (a model object per chunk),
     - openai-raw:   the same client's raw streaming response + fixtures.runner.SSEChunks,
     - runner:       fixtures.runner.run_plan itself (records every chunk's time),
     - vllm-bench:   vLLM bench serve's own request function (aiohttp), when vllm is installed.
2. Capacity, open loop (``--streams``): run_plan sends requests at a constant rate so that about
   S streams are in flight, each streaming ``--chunks`` chunks one per ``--interval-ms`` (100
   tokens/s by default, a GPU's pace); prints schedule lag, TTFT (the client's own cost here: the
   server sends the first chunk at once), the worst inter-chunk gap and chunks/s. A level is
   sustained when schedule lag p99 <= 5 ms with no errors.

Usage: python benchmarks/capacity.py [--top 64x200] [--streams 64,128,256,512,768,1024]
       [--interval-ms 10] [--chunks 100] [--seconds 4] [--no-peer] [--processes N]
The client runs pinned to one CPU and the server to another when the machine has two or more;
with ``--processes N`` the runner is spread over N worker processes (fixtures.spread), one per
CPU after the server's, and the top-speed part adds a row for them.
To measure another version of the runner: RUNNER_ROOT=<its checkout> python benchmarks/capacity.py
Prints figures; asserts nothing (the machine may be shared: repeat a level that looks off).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The runner measured: this checkout's, or another's (RUNNER_ROOT=DIR) for a before/after.
sys.path.insert(0, os.environ.get("RUNNER_ROOT") or str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp  # noqa: E402
import openai  # noqa: E402
from minimal_server import minimal_server  # noqa: E402

from fixtures.runner import Target, make_client, run_plan  # noqa: E402
from fixtures.spread import run_plan_spread  # noqa: E402
from fixtures.workload import PlannedRequest, WorkloadPlan  # noqa: E402
from slo.records import RequestRecord  # noqa: E402

LAG_BOUND_S = 0.005
MESSAGES: Any = [{"role": "user", "content": "hello"}]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


async def typed(client: openai.AsyncOpenAI, n: int) -> int:
    stream = await client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        max_tokens=n,
        stream=True,
        stream_options={"include_usage": True},
    )
    count = 0
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            count += 1
    return count


async def raw(client: openai.AsyncOpenAI, n: int) -> int:
    from fixtures.runner import SSEChunks  # absent from runners before the raw path

    count = 0
    async with client.chat.completions.with_streaming_response.create(
        model="m",
        messages=MESSAGES,
        max_tokens=n,
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        events = SSEChunks(response.http_response.request)
        async for block in response.http_response.aiter_bytes():
            for data in events.feed(block):
                if (choices := data.get("choices")) and choices[0]["delta"].get("content"):
                    count += 1
            if events.done:
                break
    return count


async def closed_loop(
    streams: int, per_stream: int, one: Callable[[], Awaitable[int]]
) -> tuple[int, float, float]:
    """(text chunks, wall s, client CPU s) for ``streams`` workers of ``per_stream`` requests."""

    async def worker() -> int:
        return sum([await one() for _ in range(per_stream)])

    await one()  # connect and warm up before the clock starts
    t0, c0 = time.perf_counter(), time.process_time()
    chunks = sum(await asyncio.gather(*(worker() for _ in range(streams))))
    return chunks, time.perf_counter() - t0, time.process_time() - c0


async def top_speed(
    url: str, streams: int, chunks: int, peer: bool, processes: int = 1, cpus: tuple[int, ...] = ()
) -> list[tuple[str, ...]]:
    per_stream = max(1, 20_000 // (streams * chunks) + 1) * 2
    client = make_client(Target(url, "m"), 60.0)
    rows: list[tuple[str, ...]] = []

    async def timed(name: str, one: Callable[[], Awaitable[int]]) -> None:
        n, wall, cpu = await closed_loop(streams, per_stream, one)
        rows.append((name, f"{n}", f"{n / wall:,.0f}", f"{n / cpu:,.0f}", f"{cpu / wall:.0%}"))

    await timed("openai-typed", lambda: typed(client, chunks))
    try:
        await timed("openai-raw", lambda: raw(client, chunks))
    except ImportError:
        rows.append(("openai-raw", "(this runner has no SSEChunks)", "", "", ""))
    await client.close()

    reqs = tuple(
        PlannedRequest(i, "c", None, "hello", 1, None, chunks, None)
        for i in range(streams * per_stream)
    )
    plan = WorkloadPlan("chat", 60.0, reqs, streams=(("c", streams, False),))
    await run_plan(WorkloadPlan("chat", 60.0, reqs[:streams]), Target(url, "m"))  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    records = await run_plan(plan, Target(url, "m"))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = sum(len(r.chunk_ns) for r in records)
    bad = sum(1 for r in records if r.error)
    rows.append(
        (f"runner{f' ({bad} errors)' if bad else ''}", f"{n}", f"{n / wall:,.0f}",
         f"{n / cpu:,.0f}", f"{cpu / wall:.0%}")
    )  # fmt: skip
    if processes > 1:
        # Each worker gets the streams above: chunks/s from the first send to the last chunk
        # (worker start-up left out); CPU not shown, the workers' start-up would be in it.
        many = tuple(
            PlannedRequest(i, "c", None, "hello", 1, None, chunks, None)
            for i in range(len(reqs) * processes)
        )
        spread = WorkloadPlan("chat", 60.0, many, streams=(("c", streams * processes, False),))
        records = await run_plan_spread(spread, Target(url, "m"), processes, cpus=cpus)
        n = sum(len(r.chunk_ns) for r in records)
        wall = (max(r.end_ns or 0 for r in records) - min(r.sent_ns for r in records)) / 1e9
        bad = sum(1 for r in records if r.error)
        rows.append(
            (f"runner, {processes} processes{f' ({bad} errors)' if bad else ''}", f"{n}",
             f"{n / wall:,.0f}", "", "")
        )  # fmt: skip

    if peer:
        try:
            m: Any = importlib.import_module("vllm.benchmarks.lib.endpoint_request_func")
        except ImportError:
            rows.append(("vllm-bench", "(vllm not installed)", "", "", ""))
            return rows
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        async with aiohttp.ClientSession(connector=connector, timeout=m.AIOHTTP_TIMEOUT) as s:
            inp = m.RequestFuncInput(
                prompt="hello", api_url=f"{url}/v1/chat/completions", prompt_len=1,
                output_len=chunks, model="m", ignore_eos=True,
            )  # fmt: skip

            async def peer_one() -> int:
                out = await m.async_request_openai_chat_completions(inp, s)
                if not out.success:
                    raise RuntimeError(out.error)
                return len(out.itl) + 1

            await timed("vllm-bench (aiohttp)", peer_one)
    return rows


async def per_request(url: str, streams: int, n: int, peer: bool) -> list[tuple[str, ...]]:
    """Client CPU per request (ms): one-chunk completions, ``streams`` closed-loop streams. At a
    burst (every stream's request due at once) the last one waits for all the others' share."""
    reqs = tuple(PlannedRequest(i, "c", None, "hello", 1, None, 1, None) for i in range(n))
    plan = WorkloadPlan("completions", 60.0, reqs, streams=(("c", streams, False),))
    await run_plan(
        WorkloadPlan("completions", 60.0, reqs[:streams], plan.streams), Target(url, "m")
    )
    c0 = time.process_time()
    records = await run_plan(plan, Target(url, "m"))
    assert not any(r.error for r in records), records[0].error
    rows: list[tuple[str, ...]] = [("runner", f"{(time.process_time() - c0) / n * 1000:.2f}")]
    if peer:
        try:
            m: Any = importlib.import_module("vllm.benchmarks.lib.endpoint_request_func")
        except ImportError:
            return rows
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=m.AIOHTTP_TIMEOUT) as s:
            inp = m.RequestFuncInput(
                prompt="hello", api_url=f"{url}/v1/completions", prompt_len=1, output_len=1,
                model="m", ignore_eos=True,
            )  # fmt: skip

            async def one() -> int:
                out = await m.async_request_openai_completions(inp, s)
                if not out.success:
                    raise RuntimeError(out.error)
                return 1

            await closed_loop(streams, 1, one)  # connections up first
            _, _, cpu = await closed_loop(streams, n // streams, one)
            rows.append(("vllm-bench (aiohttp)", f"{cpu / n * 1000:.2f}"))
    return rows


async def open_loop(
    url: str,
    streams: int,
    chunks: int,
    interval_s: float,
    seconds: float,
    processes: int = 1,
    cpus: tuple[int, ...] = (),
) -> Any:
    duration = (chunks - 1) * interval_s
    rate = streams / duration
    n = max(streams, int(rate * seconds))
    # Warm-up first, as in a run (the openai client imports its resources on first use); the
    # client CPU share below includes it.
    warm = tuple(PlannedRequest(i, "o", None, "hello", 1, None, 2, None, True) for i in range(8))
    reqs = warm + tuple(
        PlannedRequest(8 + i, "o", i / rate, "hello", 1, None, chunks, None) for i in range(n)
    )
    plan = WorkloadPlan("chat", 60.0, reqs)
    t0, c0 = time.perf_counter(), cpu_s()
    records: list[RequestRecord] = await (
        run_plan(plan, Target(url, "m"))
        if processes == 1
        else run_plan_spread(plan, Target(url, "m"), processes, cpus=cpus)
    )
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    records = [r for r in records if not r.warmup]
    ok = [r for r in records if r.error is None]
    lag = [r.schedule_lag_s * 1000 for r in records]
    ttft = [r.ttft_s * 1000 for r in ok if r.ttft_s is not None]
    gaps = [g * 1000 for r in ok for g in r.itl_s]
    start = min(r.sent_ns for r in records)
    end = max(r.end_ns or 0 for r in records)
    got = sum(len(r.chunk_ns) for r in records)
    return (
        streams, f"{rate:.0f}", f"{pct(lag, 0.5):.2f}", f"{pct(lag, 0.99):.2f}",
        f"{pct(ttft, 0.5):.2f}", f"{pct(ttft, 0.99):.2f}", f"{pct(gaps, 0.99):.1f}",
        f"{got / ((end - start) / 1e9):,.0f}", f"{cpu / wall:.0%}", f"{len(records) - len(ok)}",
        "yes" if pct(lag, 0.99) <= LAG_BOUND_S * 1000 and len(ok) == len(records) else "NO",
    )  # fmt: skip


def cpu_s() -> float:
    """CPU seconds of this process and of its finished worker processes."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    cells = [header, *[tuple(str(c) for c in r) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)), flush=True)


def pin(processes: int) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    """(server CPUs, client worker CPUs, description): the server on the first CPU, the client
    (or each of its worker processes) on the next ones."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return (), (), "not pinned (one CPU)"
    client = tuple(cpus[1 : 1 + processes])
    os.sched_setaffinity(0, set(client))
    return (
        (cpus[0],),
        client,
        f"client on CPU {','.join(map(str, client))}, server on CPU {cpus[0]}",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", default="64x200", help="STREAMSxCHUNKS for the top-speed part")
    ap.add_argument("--streams", default="64,128,256,512,768,1024")
    ap.add_argument("--interval-ms", type=float, default=10.0)
    ap.add_argument("--chunks", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument(
        "--processes",
        type=int,
        default=1,
        help="open loop: spread the runner over N worker processes (fixtures.spread), each on "
        "its own CPU where there are enough",
    )
    args = ap.parse_args()
    server_cpus, client_cpus, where = pin(args.processes)
    import fixtures.runner

    print(f"runner: {fixtures.runner.__file__}; {where}; load {os.getloadavg()[0]:.2f}")
    if args.top:
        s, c = (int(x) for x in args.top.split("x"))
        print(f"\n1. top speed: {s} streams x {c} chunks, closed loop, chunks sent at once")
        with minimal_server(server_cpus) as url:
            rows = asyncio.run(top_speed(url, s, c, not args.no_peer, args.processes, client_cpus))
        table(("client", "chunks", "chunks/s", "chunks/CPU-s", "client CPU"), rows)
        print(f"\n   client CPU per request, {s} streams of one-chunk completions")
        with minimal_server(server_cpus) as url:
            rows = asyncio.run(per_request(url, s, 2000, not args.no_peer))
        table(("client", "CPU ms/request"), rows)
    if args.streams:
        print(
            f"\n2. open loop: {args.chunks} chunks per stream, one per {args.interval_ms:g} ms, "
            f"{args.processes} client process(es); "
            f"sustained = schedule lag p99 <= {LAG_BOUND_S * 1000:g} ms, no errors"
        )
        header = (
            "streams", "req/s", "lag p50 ms", "lag p99 ms", "TTFT p50 ms", "TTFT p99 ms",
            "gap p99 ms", "chunks/s", "client CPU", "errors", "sustained",
        )  # fmt: skip
        rows = []
        with minimal_server(server_cpus, args.interval_ms / 1000) as url:
            for streams in (int(x) for x in args.streams.split(",")):
                rows.append(
                    asyncio.run(
                        open_loop(
                            url,
                            streams,
                            args.chunks,
                            args.interval_ms / 1000,
                            args.seconds,
                            args.processes,
                            client_cpus,
                        )
                    )
                )
        table(header, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
