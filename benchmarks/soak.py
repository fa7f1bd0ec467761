"""Soak benchmark: a long run at a steady rate, the load generator's memory sampled throughout.

The workload goes through the suite's own load runner (fixtures.runner.run_plan, the code path
of every scenario) as one open-loop run of constant arrivals. A thread samples this process's
resident set size (psutil) every few seconds with the number of requests completed so far.
Printed: RSS at start and end, and the growth per 1000 requests as the least-squares slope of RSS
against completed requests (the first fifth of the run left out: allocator and connection-pool
warm-up), next to what the kept records themselves need (run_plan returns every record, so that
much growth is expected; anything well above it is a leak).

Targets:
  --target vllm      real vLLM, started as the suite starts it (the realtime scenario's engine
                     args under the profile); machine-wide CPU, so run it on a quiet machine
  --target injector  the fault injector's good stream, in a child process (so its memory is not
                     counted): a client-only soak, no vLLM needed

Usage: .venv/bin/python benchmarks/soak.py [--target vllm|injector] [--minutes 5] [--rate 4]
       [--sample-every 5] [--output-tokens 32] [--prompt-tokens 32-128]
Not a test: prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.engine_args import check_engine_args  # noqa: E402
from fixtures.pool import ServerPool  # noqa: E402
from fixtures.runner import Target, run_plan  # noqa: E402
from fixtures.selection import select  # noqa: E402
from fixtures.server import VllmServer  # noqa: E402
from fixtures.session import ScenarioRunner  # noqa: E402
from fixtures.settings import programmatic  # noqa: E402
from fixtures.targets import load_tokenizer  # noqa: E402
from fixtures.workload import PromptFactory, plan_workload  # noqa: E402
from slo.records import RequestRecord  # noqa: E402
from slo.scenario import PromptLengths  # noqa: E402

MODEL = "tiny-llama"


@contextmanager
def injector_target() -> Iterator[Target]:
    """The fault injector (good streams) in a child process; yields its target."""
    code = (
        "import sys, threading\n"
        "from tests.faults.injector import FaultInjector\n"
        "with FaultInjector() as inj:\n"
        "    print(inj.port, flush=True)\n"
        "    sys.stdin.read()\n"  # until the parent closes stdin
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        yield Target(f"http://127.0.0.1:{port}", MODEL)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


@contextmanager
def vllm_target(log_dir: Path) -> Iterator[Target]:
    settings = programmatic("cpu-tiny", run_dir=log_dir)
    runner = ScenarioRunner(settings, ServerPool(settings))
    config = runner.server_config(select("realtime", settings))
    argv = check_engine_args(config.python, config.args, origin="soak").argv
    with VllmServer(config, log_path=log_dir / "soak-server.log", argv=argv) as server:
        print(f"vLLM ready in {server.ready_s:.0f} s at {server.base_url}", flush=True)
        yield Target(server.base_url, config.model.name)


def record_bytes(r: RequestRecord) -> int:
    """Memory a kept record needs: the object, its chunk-time tuple and its ints and strings."""
    ints = [r.intended_send_ns, r.sent_ns, r.first_text_ns, r.end_ns, *r.chunk_ns]
    return (
        sys.getsizeof(r)
        + sys.getsizeof(r.__dict__)
        + sys.getsizeof(r.chunk_ns)
        + sum(sys.getsizeof(t) for t in ints if t is not None)
        + (sys.getsizeof(r.error) if r.error else 0)
    )


def slope_per_1000(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of RSS bytes against completed requests, times 1000."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return 1000 * sxy / sxx if sxx else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", choices=["vllm", "injector"], default="vllm")
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=4.0, help="requests per second, constant")
    ap.add_argument("--sample-every", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", default="32-128", help="MIN-MAX, uniform")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.prompt_tokens.split("-"))
    n = int(a.minutes * 60 * a.rate)

    settings = programmatic("cpu-tiny")
    sel = select("realtime", settings)
    base = sel.scenario.workload
    cls = dataclasses.replace(
        base.classes[0],
        arrival="constant",
        rate=a.rate,
        requests=n,
        prompt_tokens=PromptLengths(lo, hi),
        output_tokens=a.output_tokens,
        priority=None,
    )
    workload = dataclasses.replace(base, classes=(cls,), warmup_requests=8)
    runner = ScenarioRunner(settings, ServerPool(settings))
    tokenizer = load_tokenizer(runner.model_spec(sel))
    plan = plan_workload(workload, PromptFactory(tokenizer))
    print(
        f"soak: {a.target}, {n} requests at {a.rate:g} req/s ({a.minutes:g} min), "
        f"prompts {lo}-{hi} tokens, {a.output_tokens} output tokens; RSS every "
        f"{a.sample_every:g} s",
        flush=True,
    )

    me = psutil.Process()
    done = [0]
    samples: list[tuple[float, int, int]] = []  # (s since start, completed, rss bytes)
    stop = threading.Event()

    def sampler() -> None:
        t0 = time.monotonic()
        while True:
            samples.append((time.monotonic() - t0, done[0], me.memory_info().rss))
            if stop.wait(a.sample_every):
                samples.append((time.monotonic() - t0, done[0], me.memory_info().rss))
                return

    def on_record(r: RequestRecord) -> None:
        if not r.warmup:
            done[0] += 1

    with tempfile.TemporaryDirectory() as tmp:
        target_cm = vllm_target(Path(tmp)) if a.target == "vllm" else injector_target()
        with target_cm as target:
            thread = threading.Thread(target=sampler, daemon=True)
            thread.start()
            t0 = time.monotonic()
            records = asyncio.run(run_plan(plan, target, on_record=on_record))
            wall = time.monotonic() - t0
            stop.set()
            thread.join()

    measured = [r for r in records if not r.warmup]
    errors = sum(1 for r in measured if r.error is not None)
    kept = sum(record_bytes(r) for r in records) / max(len(records), 1)
    steady = [(c, rss) for s, c, rss in samples if c >= 0.2 * n]
    mib = 1024 * 1024
    print(f"\n{'t (s)':>7} {'requests':>9} {'RSS (MiB)':>10}")
    step = max(1, len(samples) // 20)
    for s, c, rss in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        print(f"{s:7.0f} {c:9d} {rss / mib:10.1f}")
    first, last = samples[0][2] / mib, samples[-1][2] / mib
    print(
        f"\nrequests {len(measured)} in {wall:.0f} s, {errors} errors; "
        f"RSS {first:.1f} -> {last:.1f} MiB"
    )
    if len(steady) >= 3:
        growth = slope_per_1000(steady)
        print(
            f"RSS growth per 1000 requests (last 80% of the run, {len(steady)} samples): "
            f"{growth / 1024:.0f} KiB; the kept records account for {kept * 1000 / 1024:.0f} KiB "
            f"per 1000 ({kept:.0f} B each)"
        )
    else:
        print("too few samples for a growth figure: run longer or sample more often")


if __name__ == "__main__":
    main()
