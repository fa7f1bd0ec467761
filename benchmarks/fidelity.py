"""Measurement fidelity on real vLLM: the load runner's TTFT against vLLM's own, and against the
peer tool's (vLLM's ``bench serve``), same server, same workload, same run.

One vLLM server (the profile's engine args and CPU pinning; ``max_num_seqs`` = the largest
concurrency, so no request waits for a slot). For each concurrency C, the same closed-loop
workload (completions API, prompts of exactly ``--input-len`` tokens, ``--output-len`` tokens
with ignore_eos, C streams, C x ``--requests-per-stream`` requests) is sent twice:

- by fixtures.runner.run_plan (this suite's load runner), in this process, pinned to the
  profile's client CPUs;
- by ``vllm bench serve`` (random dataset, same lengths, ``--max-concurrency C``, request rate
  inf), in a subprocess on the same CPUs.

For each, vLLM's ``vllm:time_to_first_token_seconds`` histogram is scraped before and after, so
the server's view covers exactly those requests: its mean is exact (sum / count), its median is
interpolated within a bucket (the bucket is printed; vLLM's are 20 ms wide around 20-40 ms).
Overhead = client TTFT - server TTFT: the client, the loopback and the API server's own work
outside vLLM's timer (HTTP, tokenizing, detokenizing, SSE), which both tools pay alike.
At C=1 the runner's requests are also matched one by one: the histogram's sum grows by exactly
that request's server TTFT, so the per-request overhead is exact.

Usage: python benchmarks/fidelity.py [--streams 1,16,64,128]
       [--requests-per-stream 4] [--input-len 128] [--output-len 32] [--profile cpu-tiny]
       [--no-peer] [--processes N]
Another version of the runner: RUNNER_ROOT=<its checkout> python benchmarks/fidelity.py
Prints figures; asserts nothing (the machine may be shared: repeat a level that looks off).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The runner measured: this checkout's, or another's (RUNNER_ROOT=DIR) for a before/after.
sys.path.insert(0, os.environ.get("RUNNER_ROOT") or str(ROOT))

from fixtures.metrics import scrape  # noqa: E402
from fixtures.models import resolve_model  # noqa: E402
from fixtures.runner import Target, run_plan  # noqa: E402
from fixtures.server import ServerConfig, VllmServer, check_engine_args  # noqa: E402
from fixtures.session import MODEL_CACHE, load_tokenizer, usable_cpus  # noqa: E402
from fixtures.workload import PlannedRequest, PromptFactory, WorkloadPlan  # noqa: E402
from slo.histogram import Histogram  # noqa: E402
from slo.records import RequestRecord  # noqa: E402
from slo.scenario import load_profile  # noqa: E402

TTFT = "vllm:time_to_first_token_seconds"
PEER = (
    "import argparse, sys, vllm.benchmarks.serve as s; p = argparse.ArgumentParser(); "
    "s.add_cli_args(p); s.main(p.parse_args(sys.argv[1:]))"
)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def server_ttft(metrics_url: str, before: dict[str, Histogram]) -> Histogram:
    return scrape(metrics_url)[TTFT].minus(before[TTFT])


def plan(
    prompts: PromptFactory, n: int, streams: int, input_len: int, output_len: int, seed: int
) -> WorkloadPlan:
    rng = random.Random(seed)
    reqs = tuple(
        PlannedRequest(
            i, "c", None, prompts.prompt(input_len, rng), input_len, None, output_len, None
        )
        for i in range(n)
    )
    return WorkloadPlan("completions", 300.0, reqs, streams=(("c", streams, False),))


def ours(
    target: Target, metrics_url: str, p: WorkloadPlan, per_request: bool, processes: int = 1
) -> tuple[list[float], Histogram, list[float]]:
    """Client TTFTs (ms), the server's histogram over the same requests, and (``per_request``:
    one stream only) each request's exact overhead (ms)."""
    before = scrape(metrics_url)
    last = [before[TTFT]]
    exact: list[float] = []

    def each(r: RequestRecord) -> None:
        # One stream: nothing else is in flight while this blocks the loop to scrape.
        now = scrape(metrics_url)[TTFT]
        d = now.minus(last[0])
        last[0] = now
        if r.ttft_s is not None and d.count == 1:
            exact.append(r.ttft_s * 1000 - d.sum * 1000)

    on_record = each if per_request else None
    if processes > 1:
        from fixtures.spread import run_plan_spread  # absent from runners before it

        records = asyncio.run(run_plan_spread(p, target, processes, on_record=on_record))
    else:
        records = asyncio.run(run_plan(p, target, on_record=on_record))
    bad = [r.error for r in records if r.error]
    if bad:
        print(f"  runner: {len(bad)} errors, e.g. {bad[0]}")
    ttft = [r.ttft_s * 1000 for r in records if r.ttft_s is not None and r.error is None]
    return ttft, server_ttft(metrics_url, before), exact


def peer(
    base_url: str, metrics_url: str, model: Any, n: int, c: int, args: argparse.Namespace
) -> tuple[list[float], Histogram, dict[str, Any]] | None:
    out = Path(tempfile.mkdtemp(prefix="peer-"))
    cmd = [
        sys.executable, "-c", PEER, "--backend", "vllm", "--base-url", base_url,
        "--model", model.name, "--tokenizer", model.path, "--dataset-name", "random",
        "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
        "--random-range-ratio", "0", "--ignore-eos", "--num-prompts", str(n),
        "--max-concurrency", str(c), "--request-rate", "inf", "--num-warmups", "0",
        "--percentile-metrics", "ttft", "--metric-percentiles", "50,99", "--disable-tqdm",
        "--save-result", "--save-detailed", "--result-dir", str(out), "--result-filename", "r.json",
        "--seed", str(c),
    ]  # fmt: skip
    before = scrape(metrics_url)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    hist = server_ttft(metrics_url, before)
    if proc.returncode != 0 or not (out / "r.json").exists():
        print(f"  vllm bench serve failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        return None
    result = json.loads((out / "r.json").read_text())
    ttft = [t * 1000 for t, e in zip(result["ttfts"], result["errors"], strict=True) if not e]
    return ttft, hist, result


def describe(name: str, ttft: list[float], hist: Histogram) -> tuple[str, float, float]:
    """One row; returns it with the mean overhead and the median overhead (estimate)."""
    server_mean = (hist.mean or float("nan")) * 1000
    q = hist.quantile(0.5)
    server_p50, lo, hi = ((x * 1000) for x in q) if q else (float("nan"),) * 3
    mean_oh = statistics.mean(ttft) - server_mean
    p50_oh = pct(ttft, 0.5) - server_p50
    row = (
        f"  {name:<17} n={len(ttft):<4} (server saw {hist.count:.0f})  client TTFT p50 "
        f"{pct(ttft, 0.5):7.2f}  p99 {pct(ttft, 0.99):7.2f}  mean {statistics.mean(ttft):7.2f} | "
        f"server mean {server_mean:7.2f}  p50 ~{server_p50:6.2f} [{lo:g}-{hi:g}] | "
        f"overhead mean {mean_oh:+6.2f}  p50 ~{p50_oh:+6.2f}"
    )
    return row, mean_oh, p50_oh


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="1,16,64,128")
    ap.add_argument("--requests-per-stream", type=int, default=4)
    ap.add_argument("--min-requests", type=int, default=48)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--profile", default="cpu-tiny")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument(
        "--processes", type=int, default=1, help="spread the runner over N worker processes"
    )
    args = ap.parse_args()
    levels = [int(c) for c in args.streams.split(",")]
    profile = load_profile(args.profile)
    model = resolve_model(profile.model, cache_dir=MODEL_CACHE)
    engine_args = {**profile.server, "max_num_seqs": max(levels)}
    config = ServerConfig.build(
        model, engine_args, profile.env, cpus=usable_cpus(profile.server_cpus)
    )
    check = check_engine_args(sys.executable, engine_args, origin="benchmarks/fidelity.py")
    client_cpus = usable_cpus(profile.client_cpus)
    log = Path(tempfile.mkdtemp(prefix="fidelity-")) / "vllm.log"
    prompts = PromptFactory(load_tokenizer(model))
    print(
        f"runner {sys.modules[run_plan.__module__].__file__}\n"
        f"vLLM {check.vllm_version}, profile {profile.name}, server CPUs {config.cpus or 'all'}, "
        f"client CPUs {client_cpus or 'all'}; input {args.input_len} / output "
        f"{args.output_len} tokens; runner processes {args.processes}; "
        f"load {os.getloadavg()[0]:.2f}; log {log}",
        flush=True,
    )
    with VllmServer(config, log, argv=check.argv) as server:
        print(f"server ready in {server.ready_s:.1f} s", flush=True)
        if client_cpus:
            os.sched_setaffinity(0, client_cpus)  # the peer's subprocess inherits it
        target = Target(server.base_url, model.name)
        metrics_url = f"{server.base_url}/metrics"
        warm = plan(prompts, 16, 4, args.input_len, args.output_len, 0)
        asyncio.run(run_plan(warm, target))
        summary = []
        for c in levels:
            n = max(c * args.requests_per_stream, args.min_requests)
            t0 = time.monotonic()
            ttft, hist, exact = ours(
                target,
                metrics_url,
                plan(prompts, n, c, args.input_len, args.output_len, c),
                per_request=c == 1,
                processes=args.processes,
            )
            print(f"\n{c} streams, {n} requests (load {os.getloadavg()[0]:.2f})", flush=True)
            row, ours_mean, ours_p50 = describe("runner", ttft, hist)
            print(row, f"  ({time.monotonic() - t0:.0f} s)", flush=True)
            if exact:
                print(
                    f"  runner, per request (exact): overhead p50 {pct(exact, 0.5):+.2f}  "
                    f"p99 {pct(exact, 0.99):+.2f}  mean {statistics.mean(exact):+.2f} ms "
                    f"(n={len(exact)})",
                    flush=True,
                )
            peer_mean = peer_p50 = float("nan")
            if not args.no_peer:
                got = peer(server.base_url, metrics_url, model, n, c, args)
                if got:
                    pttft, phist, result = got
                    row, peer_mean, peer_p50 = describe("vllm bench serve", pttft, phist)
                    print(row, flush=True)
                    print(
                        f"  vllm bench serve's own report: TTFT p50 "
                        f"{result.get('median_ttft_ms', float('nan')):.2f}  p99 "
                        f"{result.get('p99_ttft_ms', float('nan')):.2f} ms",
                        flush=True,
                    )
            summary.append((c, pct(ttft, 0.5), ours_mean, ours_p50, peer_mean, peer_p50))
    print("\noverhead = client TTFT - vLLM's TTFT histogram (ms); ratio = runner / vllm bench")
    print(f"{'streams':>7}  {'runner mean':>11}  {'bench mean':>10}  {'ratio':>6}  "
          f"{'runner p50~':>11}  {'bench p50~':>10}")  # fmt: skip
    for c, _, om, op, pm, pp in summary:
        ratio = om / pm if pm and pm == pm else float("nan")
        print(f"{c:>7}  {om:>+11.2f}  {pm:>+10.2f}  {ratio:>6.2f}  {op:>+11.2f}  {pp:>+10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
