"""What the live endpoint (--slo-metrics-port) costs the load runner per request.

The runner calls ``Observer.sent`` as each request starts and ``Observer.record`` as each one
finishes; both run on the client's event loop. Timed here on real records, with the endpoint
serving and, in the second pass, scraped in a thread 10 times a second (100x Prometheus' usual
rate), against the same loop calling a no-op.

Usage: .venv/bin/python benchmarks/live_metrics.py [--records 200000] [--repeats 5]
Not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import socket
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable

from fixtures.live_metrics import LiveMetrics
from slo.records import RequestRecord


def records(n: int) -> list[RequestRecord]:
    rng = random.Random(1)
    out = []
    for i in range(n):
        sent = i * 1_000_000
        first = sent + int(rng.lognormvariate(-3.5, 0.6) * 1e9)
        out.append(
            RequestRecord(
                index=i,
                request_class="default",
                intended_send_ns=sent,
                sent_ns=sent,
                first_text_ns=first,
                end_ns=first + 100_000_000,
                output_tokens=32,
                warmup=i < 8,
                error="HTTP 503" if i % 500 == 0 else None,
            )
        )
    return out


def per_record_ns(
    sent: Callable[[], None], record: Callable[[RequestRecord], None], rows: list[RequestRecord]
) -> float:
    t0 = time.perf_counter_ns()
    for r in rows:
        sent()
        record(r)
    return (time.perf_counter_ns() - t0) / len(rows)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rows = records(args.records)
    live = LiveMetrics(free_port(), run_id="bench", profile="bench")
    live.start()
    obs = live.observer("bench")

    def noop_sent() -> None:
        pass

    def noop_record(r: RequestRecord) -> None:
        pass

    stop = threading.Event()
    scrapes = 0

    def scraper() -> None:
        nonlocal scrapes
        while not stop.is_set():
            with urllib.request.urlopen(live.url, timeout=5) as r:
                r.read()
            scrapes += 1
            stop.wait(0.1)

    results: dict[str, list[float]] = {"no-op": [], "live": [], "live, scraped 10/s": []}
    for _ in range(args.repeats):
        results["no-op"].append(per_record_ns(noop_sent, noop_record, rows))
        results["live"].append(per_record_ns(obs.sent, obs.record, rows))
    thread = threading.Thread(target=scraper, daemon=True)
    thread.start()
    for _ in range(args.repeats):
        results["live, scraped 10/s"].append(per_record_ns(obs.sent, obs.record, rows))
    stop.set()
    thread.join()
    live.close(linger_s=0)
    print(f"{args.records} records x {args.repeats} repeats, per request (sent + record):")
    base = statistics.median(results["no-op"])
    for name, values in results.items():
        med = statistics.median(values)
        extra = "" if name == "no-op" else f"  (+{(med - base) / 1000:.2f} us over the no-op)"
        print(f"  {name:<20} median {med / 1000:.2f} us, min {min(values) / 1000:.2f} us{extra}")
    print(f"  scrapes served during the scraped pass: {scrapes}")


if __name__ == "__main__":
    main()
