"""vLLM's prefix-cache hit rate as the suite measures it, cold and warm, on one server.

Runs four workloads through the suite's own path (scenario file -> ScenarioRunner, one vLLM for
all, started as the profile says) and prints, for each, what was done to the cache, the hit
rate from vLLM's counters over the measured requests, the forecast from the prompts, TTFT and
whether the run stands:

1. a shared-prefix mix (every prompt starts with one of ``--prefixes`` prefixes), cold;
2. the same mix, warm (the warm-up caches the prefixes first);
3. unique prompts, cold: the contrast, nothing to share;
4. the unique prompts again with the same seed and the reset left out: what a fixed seed
   against a long-running server measures (the suite marks it INVALID).

Usage: python benchmarks/prefix_cache.py [--profile cpu-tiny] [--requests 60] [--rate 2]
       [--prompt-tokens 600 900] [--prefix-tokens 512] [--prefixes 4] [--warmup 8]
Starts vLLM (about a minute on 2 cores), about 4 x (requests / rate) s of traffic.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures import measure  # noqa: E402
from fixtures.pool import ServerPool  # noqa: E402
from fixtures.result import ScenarioResult  # noqa: E402
from fixtures.selection import select  # noqa: E402
from fixtures.session import ScenarioRunner  # noqa: E402
from fixtures.settings import programmatic  # noqa: E402
from slo.stats import safe_percentile  # noqa: E402

SCENARIO = """\
[scenario]
name = "{name}"

[workload]
api = "chat"
arrival = "poisson"
rate = "{rate} req/s"
requests = {requests}
warmup_requests = {warmup}
prompt_tokens = {{ min = {lo}, max = {hi} }}
output_tokens = 16
seed = 20261204
timeout = "60s"
prefix_cache = "{mode}"
{shared}
[validity]
schedule_lag_p99 = "50ms"

[objectives.{profile}]
"ttft p50" = "<= 10s"
"""


def scenario_file(folder: Path, name: str, mode: str, shared: bool, a: argparse.Namespace) -> str:
    table = f"[workload.shared_prefix]\ntokens = {a.prefix_tokens}\ncount = {a.prefixes}\n"
    path = folder / f"{name}.toml"
    path.write_text(
        SCENARIO.format(
            name=name,
            rate=a.rate,
            requests=a.requests,
            warmup=a.warmup,
            lo=a.prompt_tokens[0],
            hi=a.prompt_tokens[1],
            mode=mode,
            shared=table if shared else "",
            profile=a.profile,
        )
    )
    return str(path)


def row(label: str, r: ScenarioResult) -> str:
    c = r.prefix_cache
    ttft = r.summary.samples("ttft")
    p50 = safe_percentile(ttft, 50) * 1e3
    mean = sum(ttft) / len(ttft) * 1e3 if ttft else float("nan")
    if c is None or c.counters is None or c.forecast is None:
        return f"{label}: no prefix-cache figures ({c.describe() if c else 'none'})"
    f, n = c.forecast, c.counters
    rate = "n/a" if c.hit_rate is None else f"{c.hit_rate:6.1%}"
    verdict = "INVALID: " + r.invalid_reasons[0][:70] + "..." if r.invalid_reasons else "valid"
    return (
        f"{label:<38} {c.mode:<5} hit rate {rate} ({n.hits:>6.0f} of {n.queries:>6.0f} tokens); "
        f"forecast cold <= {f.share(f.cold_ceiling):5.1%}, warm-up {f.share(f.warm_floor):5.1%}; "
        f"TTFT p50 {p50:6.1f} ms, mean {mean:6.1f} ms; {c.reset or 'no reset'}; {verdict}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu-tiny")
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--rate", type=float, default=2.0, help="req/s, Poisson")
    ap.add_argument(
        "--prompt-tokens", type=int, nargs=2, default=[600, 900], metavar=("MIN", "MAX")
    )
    ap.add_argument("--prefix-tokens", type=int, default=512)
    ap.add_argument("--prefixes", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=8)
    a = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="prefix-cache-"))
    settings = programmatic(a.profile, run_dir=folder / "run")
    pool = ServerPool(settings)
    runner = ScenarioRunner(settings, pool)

    def run(name: str, mode: str, shared: bool) -> ScenarioResult:
        return runner.result(select(scenario_file(folder, name, mode, shared, a), settings))

    try:
        results = [
            ("1. shared prefixes, cold", run("shared-cold", "cold", True)),
            ("2. shared prefixes, warm", run("shared-warm", "warm", True)),
            ("3. unique prompts, cold", run("unique-cold", "cold", False)),
        ]
        # The reset left out: the same prompts meet the cache that run 3 filled.
        with mock.patch.object(measure, "reset_all", lambda targets, when: f"not reset {when}"):
            results.append(("4. unique prompts again, reset left out", run("again", "cold", False)))
    finally:
        pool.close()
    (start,) = pool.starts
    print(f"{a.profile}, model {runner.results['shared-cold'].server.model}, one vLLM for all runs")
    print(f"$ {' '.join(start.command)}")
    print(
        f"{a.requests} measured chat requests per run (Poisson {a.rate} req/s) after {a.warmup} "
        f"warm-up; prompts {a.prompt_tokens[0]}-{a.prompt_tokens[1]} tokens; shared: "
        f"{a.prefixes} prefixes of {a.prefix_tokens} tokens; 16 output tokens"
    )
    block = results[0][1].prefix_cache
    if block is not None and block.forecast is not None:
        print(f"block size {block.forecast.block_sizes}; hit rate = hits / queried prompt tokens")
    for label, r in results:
        print(row(label, r))
    print(f"run folder: {settings.run_dir}")


if __name__ == "__main__":
    main()
