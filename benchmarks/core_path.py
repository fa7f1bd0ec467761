"""Benchmark of the core path: run the realtime scenario as a user does, print where time goes.

Prints
  - server start-to-ready seconds (process start -> /health 200),
  - harness overhead: suite wall time minus server start and workload time,
  - client TTFT against vLLM's own vllm:time_to_first_token_seconds histogram for the same
    measured requests (scraped after the warm-up and after the workload).

Usage: .venv/bin/python benchmarks/core_path.py [extra pytest args, e.g. --slo-max-requests 200]
Not a test: figures vary with the machine; nothing here asserts a speed.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(extra: list[str]) -> int:
    out = Path(tempfile.mkdtemp(prefix="core-path-"))
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "realtime",
        f"--slo-report-dir={out}",
        "-p",
        "no:cacheprovider",
        "--slo-no-progress",
        "-q",
        *extra,
    ]
    print("$", " ".join(cmd))
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:])
    starts = json.loads((out / "servers" / "starts.json").read_text())
    summary = json.loads((out / "realtime" / "summary.json").read_text())
    ready = sum(s["ready_s"] for s in starts)
    workload = summary["workload_s"]
    rows = [json.loads(line) for line in (out / "realtime" / "records.jsonl").open()]
    ttft_ms = sorted(
        r["ttft_s"] * 1000 for r in rows if not r["warmup"] and r["ttft_s"] is not None
    )
    server = summary["server_metrics"].get("vllm:time_to_first_token_seconds")

    def pct(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    print(f"\nreports: {out}")
    print(f"server start-to-ready      {ready:8.1f} s   ({len(starts)} start)")
    print(f"workload (warm-up + measured) {workload:5.1f} s")
    print(f"suite wall time            {wall:8.1f} s")
    print(
        f"harness overhead           {wall - ready - workload:8.1f} s   (wall - start - workload)"
    )
    print(f"\nTTFT over the same {len(ttft_ms)} measured requests:")
    print(
        f"  client  mean {statistics.mean(ttft_ms):7.2f} ms  p50 {pct(ttft_ms, 0.5):7.2f} ms  "
        f"p99 {pct(ttft_ms, 0.99):7.2f} ms"
    )
    if server and server["count"]:
        (p50, lo50, hi50), (p99, lo99, hi99) = server["p50"], server["p99"]
        print(
            f"  server  mean {server['mean'] * 1000:7.2f} ms  p50 {p50 * 1000:7.2f} ms  "
            f"p99 {p99 * 1000:7.2f} ms  (vLLM histogram, {server['count']:.0f} requests; "
            f"quantiles interpolated in buckets {lo50 * 1000:g}-{hi50 * 1000:g} ms and "
            f"{lo99 * 1000:g}-{hi99 * 1000:g} ms)"
        )
        print(f"  client - server mean: {statistics.mean(ttft_ms) - server['mean'] * 1000:+.2f} ms")
    else:
        print("  server histogram: not available")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
