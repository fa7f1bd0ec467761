"""Client overhead benchmark: client TTFT against vLLM's own TTFT histogram, by concurrency.

For each concurrency C, a closed-loop workload of C streams runs against one vLLM server (one
start for all levels: the scenarios share the server config). The same measured requests are
seen by the client (perf_counter, first text chunk) and by vLLM (vllm:time_to_first_token_seconds,
scraped after the warm-up and after the workload); the difference of the means is what the
client side (HTTP, SSE parsing, the openai client, the event loop) adds.

Usage: .venv/bin/python benchmarks/client_overhead.py [--streams 1,16,64,128]
       [--requests-per-stream 8]
       [--profile cpu-tiny] [--output-tokens 64] [extra pytest args, e.g. --slo-vllm-python PATH]
Prints a table; asserts nothing (figures vary with the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCENARIO = """\
[scenario]
name = "overhead-{c}"
description = "client overhead at {c} streams"

[server]
max_num_seqs = {seqs}

[workload]
api = "chat"
arrival = "closed"
concurrency = {c}
requests = {n}
warmup_requests = 4
prompt_tokens = {{ min = 128, max = 128 }}
output_tokens = {out}
seed = 7
timeout = "300s"

[validity]
schedule_lag_p99 = "1s"
error_rate = "1%"

[objectives.{profile}]                # only so the run has a verdict; the figures are the point
"output_throughput" = ">= 1 tok/s"
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="1,16,64,128")
    ap.add_argument("--requests-per-stream", type=int, default=8)
    ap.add_argument("--profile", default="cpu-tiny")
    ap.add_argument("--output-tokens", type=int, default=64)
    args, extra = ap.parse_known_args()
    levels = [int(c) for c in args.streams.split(",")]
    work = Path(tempfile.mkdtemp(prefix="overhead-"))
    seqs = max(levels)  # every stream is served at once: what is measured is the client
    module = ["import pytest\n"]
    for c in levels:
        path = work / f"overhead-{c}.toml"
        path.write_text(
            SCENARIO.format(
                c=c,
                n=max(c * args.requests_per_stream, 32),
                seqs=seqs,
                out=args.output_tokens,
                profile=args.profile,
            )
        )
        module.append(
            f"\n@pytest.mark.scenario({str(path)!r})\n"
            f"def test_overhead_{c}(slo_check, objective):\n    slo_check(objective)\n"
        )
    (work / "test_overhead.py").write_text("".join(module))
    out = work / "run"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(work / "test_overhead.py"),
        "-p",
        "fixtures.plugin",
        f"--slo-report-dir={out}",
        f"--slo-profile={args.profile}",
        "-p",
        "no:cacheprovider",
        "--slo-no-progress",
        "-q",
        *extra,
    ]
    print("$", " ".join(cmd), flush=True)
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        cmd, cwd=work, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": pythonpath}
    )
    print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-3000:])
    print(f"\nreports: {out}")
    print(
        f"{'streams':>8} {'requests':>9} {'client mean':>12} {'vLLM mean':>10} {'diff':>8} "
        f"{'client p50':>11} {'client p99':>11} {'tok/s':>8}"
    )
    for c in levels:
        folder = out / f"overhead-{c}"
        if not (folder / "summary.json").exists():
            print(f"{c:>8}  (no result)")
            continue
        summary = json.loads((folder / "summary.json").read_text())
        rows = [json.loads(line) for line in (folder / "records.jsonl").open()]
        ttft = sorted(r["ttft_s"] * 1000 for r in rows if not r["warmup"] and r["ttft_s"])
        server = summary["server_metrics"].get("vllm:time_to_first_token_seconds") or {}
        client_mean = statistics.mean(ttft)
        server_mean = (server.get("mean") or float("nan")) * 1000
        print(
            f"{c:>8} {len(ttft):>9} {client_mean:>9.2f} ms {server_mean:>7.2f} ms "
            f"{client_mean - server_mean:>+6.2f} ms {ttft[len(ttft) // 2]:>8.2f} ms "
            f"{ttft[int(0.99 * (len(ttft) - 1))]:>8.2f} ms "
            f"{summary['summary']['output_throughput']:>8.0f}"
        )
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
