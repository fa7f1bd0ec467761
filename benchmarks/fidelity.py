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

For each, two server views of exactly those requests:

- per request, exact: vLLM's OpenTelemetry span of each request (benchmarks/spans.py) carries
  the TTFT vLLM observed for it and its id, which the client has from the response (the runner
  keeps it as ``response_id``; the peer is given ``--request-id-prefix``). Overhead = client
  TTFT - vLLM's TTFT, request by request: its median is the median overhead.
- the distribution: vLLM's ``vllm:time_to_first_token_seconds`` histogram, scraped before and
  after, with 1 ms buckets up to 2 s (``--custom-histogram-buckets``; vLLM's default ones are
  20-150 ms wide there; a vLLM without that flag keeps them): its mean is exact (sum / count),
  its median is within a bucket.

Overhead is the client, the loopback and the API server's own work outside vLLM's timer (HTTP,
tokenizing, detokenizing, SSE), which both tools pay alike. The client's part on the reading
side is shown apart: a 1 ms ticker beside the runner on its event loop (benchmarks/looplag.py)
records how late it wakes, the wait a chunk arriving then has before it is timestamped.
Exporting spans may cost the API server a little; ``--no-spans`` measures without them (the
histogram only).

Usage: python benchmarks/fidelity.py [--streams 1,16,64,128]
       [--requests-per-stream 4] [--input-len 128] [--output-len 32] [--profile cpu-tiny]
       [--no-peer] [--no-spans] [--processes N]
Another version of the runner: RUNNER_ROOT=<its checkout> python benchmarks/fidelity.py
Prints figures; asserts nothing (the machine may be shared: repeat a level that looks off).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from looplag import loop_lateness  # noqa: E402
from spans import SERVER_ENV, SpanSink  # noqa: E402

from fixtures.engine_args import check_engine_args  # noqa: E402
from fixtures.host import usable_cpus  # noqa: E402
from fixtures.metrics import scrape  # noqa: E402
from fixtures.models import resolve_model  # noqa: E402
from fixtures.runner import Target, run_plan  # noqa: E402
from fixtures.server import ServerConfig, VllmServer  # noqa: E402
from fixtures.targets import MODEL_CACHE, load_tokenizer  # noqa: E402
from fixtures.workload import PlannedRequest, PromptFactory, WorkloadPlan  # noqa: E402
from slo.errors import EngineArgError  # noqa: E402
from slo.histogram import Histogram  # noqa: E402
from slo.scenario import load_profile  # noqa: E402

TTFT = "vllm:time_to_first_token_seconds"
# 1 ms up to 2 s, then 50 ms up to 60 s: the median of the server's view to within 1 ms.
FINE_BUCKETS = [k / 1000 for k in range(1, 2001)] + [2 + k / 20 for k in range(1, 1161)]
PEER = (
    "import argparse, sys, vllm.benchmarks.serve as s; p = argparse.ArgumentParser(); "
    "s.add_cli_args(p); s.main(p.parse_args(sys.argv[1:]))"
)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def server_ttft(metrics_url: str, before: dict[str, Histogram]) -> Histogram:
    return scrape(metrics_url)[TTFT].minus(before[TTFT])


def exact_overheads(sink: SpanSink | None, client_ttft_ms: dict[str, float]) -> list[float]:
    """Per request: client TTFT - vLLM's TTFT from its span (ms), by response id."""
    if sink is None:
        return []
    server = sink.wait_for(client_ttft_ms)
    missing = len(client_ttft_ms) - len(server)
    if missing:
        print(f"  {missing} of {len(client_ttft_ms)} requests had no span: left out")
    return [client_ttft_ms[k] - server[k] * 1000 for k in server]


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
    target: Target, metrics_url: str, p: WorkloadPlan, sink: SpanSink | None, processes: int = 1
) -> tuple[list[float], Histogram, list[float], list[float]]:
    """Client TTFTs (ms), the server's histogram over the same requests, each request's exact
    overhead (ms; with spans) and the event loop's wake-up lateness during the run (s; one
    process)."""
    before = scrape(metrics_url)
    late: list[float] = []
    if processes > 1:
        from fixtures.spread import run_plan_spread  # absent from runners before it

        records = asyncio.run(run_plan_spread(p, target, processes))
    else:
        records, late = asyncio.run(loop_lateness(run_plan(p, target)))
    hist = server_ttft(metrics_url, before)
    bad = [r.error for r in records if r.error]
    if bad:
        print(f"  runner: {len(bad)} errors, e.g. {bad[0]}")
    good = [(r, r.ttft_s * 1000) for r in records if r.ttft_s is not None and r.error is None]
    # Runners before response_id have no key to the spans.
    keyed = {rid: t for r, t in good if (rid := getattr(r, "response_id", None))}
    return [t for _, t in good], hist, exact_overheads(sink, keyed), late


def peer(
    base_url: str,
    metrics_url: str,
    model: Any,
    n: int,
    c: int,
    args: argparse.Namespace,
    sink: SpanSink | None,
) -> tuple[list[float], Histogram, dict[str, Any], list[float]] | None:
    out = Path(tempfile.mkdtemp(prefix="peer-"))
    prefix = f"bench-{c}-"  # its request i is then cmpl-{prefix}{i}
    cmd = [
        sys.executable, "-c", PEER, "--backend", "vllm", "--base-url", base_url,
        "--model", model.name, "--tokenizer", model.path, "--dataset-name", "random",
        "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
        "--random-range-ratio", "0", "--ignore-eos", "--num-prompts", str(n),
        "--max-concurrency", str(c), "--request-rate", "inf", "--num-warmups", "0",
        "--percentile-metrics", "ttft", "--metric-percentiles", "50,99", "--disable-tqdm",
        "--save-result", "--save-detailed", "--result-dir", str(out), "--result-filename", "r.json",
        "--seed", str(c), "--request-id-prefix", prefix,
    ]  # fmt: skip
    before = scrape(metrics_url)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    hist = server_ttft(metrics_url, before)
    if proc.returncode != 0 or not (out / "r.json").exists():
        print(f"  vllm bench serve failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        return None
    result = json.loads((out / "r.json").read_text())
    done = [
        (i, t * 1000)
        for i, (t, e) in enumerate(zip(result["ttfts"], result["errors"], strict=True))
        if not e
    ]
    exact = exact_overheads(sink, {f"cmpl-{prefix}{i}": t for i, t in done})
    return [t for _, t in done], hist, result, exact


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


def describe_exact(name: str, exact: list[float]) -> str:
    if not exact:
        return f"  {name:<17} per request: no spans"
    return (
        f"  {name:<17} per request (exact, n={len(exact)}): overhead p50 {pct(exact, 0.5):+.2f}  "
        f"p99 {pct(exact, 0.99):+.2f}  mean {statistics.mean(exact):+.2f} ms"
    )


def main() -> int:  # noqa: C901  (a flat script: argparse, then one measurement per option)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="1,16,64,128")
    ap.add_argument("--requests-per-stream", type=int, default=4)
    ap.add_argument("--min-requests", type=int, default=48)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--profile", default="cpu-tiny")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--no-spans", action="store_true", help="the histogram only")
    ap.add_argument(
        "--processes", type=int, default=1, help="spread the runner over N worker processes"
    )
    args = ap.parse_args()
    levels = [int(c) for c in args.streams.split(",")]
    profile = load_profile(args.profile)
    model = resolve_model(profile.model, cache_dir=MODEL_CACHE)
    with contextlib.ExitStack() as stack:
        sink = None if args.no_spans else stack.enter_context(SpanSink())
        engine_args = {
            **profile.server,
            "max_num_seqs": max(levels),
            "custom_histogram_buckets": {"time_to_first_token": FINE_BUCKETS},
            **({"otlp_traces_endpoint": sink.url} if sink else {}),
        }
        try:
            check = check_engine_args(sys.executable, engine_args, origin="fidelity.py")
        except EngineArgError as e:
            if "custom_histogram_buckets" not in str(e):
                raise
            print("this vLLM has no --custom-histogram-buckets: its default TTFT buckets")
            del engine_args["custom_histogram_buckets"]
            check = check_engine_args(sys.executable, engine_args, origin="fidelity.py")
        env = {**profile.env, **(SERVER_ENV if sink else {})}
        config = ServerConfig.build(model, engine_args, env, cpus=usable_cpus(profile.server_cpus))
        client_cpus = usable_cpus(profile.client_cpus)
        log = Path(tempfile.mkdtemp(prefix="fidelity-")) / "vllm.log"
        prompts = PromptFactory(load_tokenizer(model))
        print(
            f"runner {sys.modules[run_plan.__module__].__file__}\n"
            f"vLLM {check.vllm_version}, profile {profile.name}, server CPUs "
            f"{config.cpus or 'all'}, client CPUs {client_cpus or 'all'}; input "
            f"{args.input_len} / output {args.output_len} tokens; runner processes "
            f"{args.processes}; spans {'on' if sink else 'off'}; "
            f"load {os.getloadavg()[0]:.2f}; log {log}",
            flush=True,
        )
        server = stack.enter_context(VllmServer(config, log, argv=check.argv))
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
            p = plan(prompts, n, c, args.input_len, args.output_len, c)
            ttft, hist, exact, late = ours(target, metrics_url, p, sink, args.processes)
            print(f"\n{c} streams, {n} requests (load {os.getloadavg()[0]:.2f})", flush=True)
            row, ours_mean, ours_p50 = describe("runner", ttft, hist)
            print(row, f"  ({time.monotonic() - t0:.0f} s)", flush=True)
            if late:
                print(
                    f"  runner's event loop: wake-up lateness p50 {pct(late, 0.5) * 1e3:.2f}  p99 "
                    f"{pct(late, 0.99) * 1e3:.2f}  max {max(late) * 1e3:.1f} ms (what a chunk "
                    "arriving then waits)",
                    flush=True,
                )
            if sink:
                print(describe_exact("runner", exact), flush=True)
            peer_mean = peer_p50 = float("nan")
            peer_exact: list[float] = []
            if not args.no_peer:
                got = peer(server.base_url, metrics_url, model, n, c, args, sink)
                if got:
                    pttft, phist, result, peer_exact = got
                    row, peer_mean, peer_p50 = describe("vllm bench serve", pttft, phist)
                    print(row, flush=True)
                    print(
                        f"  vllm bench serve's own report: TTFT p50 "
                        f"{result.get('median_ttft_ms', float('nan')):.2f}  p99 "
                        f"{result.get('p99_ttft_ms', float('nan')):.2f} ms",
                        flush=True,
                    )
                    if sink:
                        print(describe_exact("vllm bench serve", peer_exact), flush=True)
            summary.append((c, ours_mean, ours_p50, peer_mean, peer_p50, exact, peer_exact))
    print(
        "\noverhead = client TTFT - vLLM's TTFT (ms): mean and p50~ from its histogram; "
        "p50 / p99 exact, request by request, from its spans; ratio = runner / vllm bench (mean)"
    )
    print(f"{'streams':>7}  {'runner mean':>11}  {'bench mean':>10}  {'ratio':>6}  "
          f"{'runner p50~':>11}  {'bench p50~':>10}  {'runner p50':>10}  {'bench p50':>9}  "
          f"{'runner p99':>10}  {'bench p99':>9}")  # fmt: skip
    for c, om, op, pm, pp, ex, pex in summary:
        ratio = om / pm if pm and pm == pm else float("nan")
        print(
            f"{c:>7}  {om:>+11.2f}  {pm:>+10.2f}  {ratio:>6.2f}  {op:>+11.2f}  {pp:>+10.2f}  "
            f"{pct(ex, 0.5):>+10.2f}  {pct(pex, 0.5):>+9.2f}  {pct(ex, 0.99):>+10.2f}  "
            f"{pct(pex, 0.99):>+9.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
