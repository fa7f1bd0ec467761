"""How long the /metrics sampler holds the client's event loop.

A local HTTP server answers /metrics with a vLLM-sized exposition (histograms with many buckets
for several label sets, about the size of vLLM 0.32's). A ticker task on the event loop sleeps
1 ms at a time and records how late it wakes; that lateness is what a streamed chunk's timestamp
would suffer. Measured without the sampler, with it (fetch in a thread, parse afterwards), and
with a naive sampler that parses on the event loop, each for the same number of seconds.

Usage: .venv/bin/python benchmarks/sampler_overhead.py [--seconds 10] [--interval 0.1]
Not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import urllib.request
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from looplag import loop_lateness
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from fixtures.metrics import MetricsSampler, parse, parse_series

BUCKETS = tuple(x / 1000 for x in (1, 5, 10, 20, 40, 60, 80, 100, 250, 500, 750, 1000))


def exposition() -> bytes:
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    for name in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
        Gauge(f"vllm:{name}", name, labels, registry=reg).labels("m", "0").set(3)
    for name in ("num_preemptions", "prompt_tokens", "generation_tokens"):
        Counter(f"vllm:{name}", name, labels, registry=reg).labels("m", "0").inc(100)
    for i in range(24):  # vLLM exports a few dozen histograms, some with many buckets
        h = Histogram(
            f"vllm:hist_{i}_seconds",
            "h",
            labels,
            registry=reg,
            buckets=tuple(
                sorted({*BUCKETS, *(b * 7 for b in BUCKETS), *(b * 31 for b in BUCKETS)})
            ),
        )
        for engine in ("0", "1"):
            h.labels("m", engine).observe(0.02)
    Histogram(
        "vllm:time_to_first_token_seconds", "ttft", labels, registry=reg, buckets=BUCKETS
    ).labels("m", "0").observe(0.02)
    return generate_latest(reg)


def serve(body: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def lateness(seconds: float) -> list[float]:
    return (await loop_lateness(asyncio.sleep(seconds)))[1]


async def naive(url: str, interval: float, work: Awaitable[list[float]]) -> list[float]:
    """Fetch in a thread but parse every histogram on the event loop."""

    async def loop() -> None:
        while True:
            text = await asyncio.to_thread(lambda: urllib.request.urlopen(url).read().decode())
            parse(text)
            parse_series(text)
            await asyncio.sleep(interval)

    task = asyncio.create_task(loop())
    try:
        return await work
    finally:
        task.cancel()


def report(name: str, late: list[float]) -> None:
    s = sorted(late)
    p99 = s[int(0.99 * (len(s) - 1))]
    print(
        f"{name:<38} wake-ups {len(s):>6}  lateness median {statistics.median(s) * 1e3:6.3f} ms"
        f"  p99 {p99 * 1e3:6.3f} ms  max {s[-1] * 1e3:6.3f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=0.1, help="sampling interval (s)")
    args = ap.parse_args()
    body = exposition()
    server = serve(body)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    print(f"/metrics body {len(body) / 1024:.0f} KiB, sampled every {args.interval} s")
    cases: list[tuple[str, Callable[[], Awaitable[list[float]]]]] = [
        ("no sampler", lambda: lateness(args.seconds)),
        (
            "MetricsSampler (thread, parse after)",
            lambda: MetricsSampler(url, interval_s=args.interval).around(lateness(args.seconds)),
        ),
        ("parse on the event loop", lambda: naive(url, args.interval, lateness(args.seconds))),
    ]
    for name, run in cases:
        report(name, asyncio.run(run()))  # type: ignore[arg-type]
    server.shutdown()


if __name__ == "__main__":
    main()
