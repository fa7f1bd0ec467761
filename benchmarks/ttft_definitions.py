"""The gap between two TTFT definitions on a running server: first chunk vs first text.

vLLM bench serve times TTFT at the first streamed chunk with a choice (``ttft_chunk``: in chat the
role-only chunk, or a chunk whose token decoded to no text yet); this suite's ``ttft`` at the
first chunk carrying generated output (docs/metrics.md). This script sends ``--requests``
streamed requests one at a time (no queueing, so the gap is the stream's own) through the
suite's load runner and prints, over the successful ones, the mean, median and largest
``ttft - ttft_chunk``, and how many first chunks carried no generated output.

Usage: python benchmarks/ttft_definitions.py --endpoint http://127.0.0.1:8000
       [--model NAME] [--api chat|completions ...] [--requests 60] [--prompt-words 64]
       [--max-tokens 16] [--api-key KEY]
   or: python benchmarks/ttft_definitions.py --serve MODEL [--profile cpu-tiny] [...]
The model defaults to the first one the server lists. ``--serve`` starts vLLM on MODEL (a bundled
name or a model folder, dummy weights) as the suite does under the profile (its engine args,
environment and CPU pinning; the client on the profile's client CPUs), measures, and stops it.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.engine_args import OFFLINE_ENV, check_engine_args  # noqa: E402
from fixtures.host import usable_cpus  # noqa: E402
from fixtures.models import resolve_model  # noqa: E402
from fixtures.runner import Target, run_plan  # noqa: E402
from fixtures.server import ServerConfig, VllmServer  # noqa: E402
from fixtures.targets import MODEL_CACHE  # noqa: E402
from fixtures.workload import PlannedRequest, WorkloadPlan  # noqa: E402
from slo.profiles import load_profile  # noqa: E402
from slo.records import RequestRecord  # noqa: E402


@dataclass(frozen=True)
class DefinitionGap:
    """``ttft - ttft_chunk`` over the successful requests that recorded both."""

    requests: int
    """Requests sent, failed ones included."""
    gaps_s: tuple[float, ...]
    textless_first: int
    """Requests whose first chunk carried no generated output (role only, or empty)."""

    @property
    def measured(self) -> int:
        return len(self.gaps_s)

    @property
    def mean_s(self) -> float:
        return statistics.fmean(self.gaps_s) if self.gaps_s else float("nan")

    @property
    def median_s(self) -> float:
        return statistics.median(self.gaps_s) if self.gaps_s else float("nan")

    @property
    def max_s(self) -> float:
        return max(self.gaps_s, default=float("nan"))


def definition_gap(records: Sequence[RequestRecord]) -> DefinitionGap:
    gaps, textless = [], 0
    for r in records:
        if not r.ok or r.first_chunk_ns is None or r.first_text_ns is None:
            continue
        gaps.append((r.first_text_ns - r.first_chunk_ns) / 1e9)
        textless += r.first_chunk_ns != r.first_text_ns
    return DefinitionGap(len(records), tuple(gaps), textless)


def report(g: DefinitionGap, api: str) -> str:
    if not g.measured:
        return f"{g.requests} requests, none succeeded: no figures (see the server's log)"

    def ms(seconds: float) -> str:
        return f"{seconds * 1e3:.2f} ms"

    return "\n".join(
        [
            f"{g.measured} of {g.requests} requests succeeded ({api} API)",
            "ttft - ttft_chunk (first text - first chunk):",
            f"  mean {ms(g.mean_s)}   p50 {ms(g.median_s)}   max {ms(g.max_s)}",
            f"first chunks without generated output: {g.textless_first} of {g.measured}",
        ]
    )


def plan(api: str, requests: int, prompt_words: int, max_tokens: int) -> WorkloadPlan:
    """``requests`` requests through one closed-loop stream: each waits for the one before."""
    reqs = tuple(
        PlannedRequest(
            index=i,
            request_class="gap",
            offset_s=None,
            # A different first word each time: no request is a prefix-cache hit of another.
            prompt=" ".join([f"r{i}"] + ["word"] * (prompt_words - 1)),
            prompt_tokens=prompt_words,
            expected_prompt_tokens=None,
            max_tokens=max_tokens,
            priority=None,
        )
        for i in range(requests)
    )
    return WorkloadPlan(api, 120.0, reqs, streams=(("gap", 1, False),))


def first_model(endpoint: str, api_key: str | None) -> str:
    req = urllib.request.Request(endpoint.rstrip("/") + "/v1/models")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(req, timeout=30) as r:
        models = json.load(r).get("data") or []
    if not models:
        raise SystemExit(f"{endpoint}/v1/models lists no model: pass --model NAME")
    return str(models[0]["id"])


@contextlib.contextmanager
def served(model: str, profile_name: str) -> Iterator[str]:
    """vLLM on ``model`` with the profile's engine args, environment and server CPUs, this
    process on its client CPUs; yields the server root."""
    profile = load_profile(profile_name)
    spec = resolve_model(model, cache_dir=MODEL_CACHE)
    config = ServerConfig.build(
        spec, profile.server, profile.env, cpus=usable_cpus(profile.server_cpus)
    )
    argv = check_engine_args(sys.executable, config.args, origin=f"profile {profile_name}").argv
    log = Path(tempfile.mkdtemp(prefix="ttft-definitions-")) / "vllm.log"
    affinity = os.sched_getaffinity(0)
    with VllmServer(config, log_path=log, argv=argv) as server:
        print(f"$ {' '.join(server.command)}  (env {dict(profile.env)}, log {log})")
        if cpus := usable_cpus(profile.client_cpus):
            os.sched_setaffinity(0, cpus)
        try:
            yield server.base_url
        finally:
            os.sched_setaffinity(0, affinity)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint", help="Server root, e.g. http://127.0.0.1:8000")
    where.add_argument("--serve", metavar="MODEL", help="Start vLLM on a bundled model or folder")
    ap.add_argument("--profile", default="cpu-tiny", help="With --serve (default: cpu-tiny)")
    ap.add_argument("--model", help="Model name (default: the first the server lists)")
    ap.add_argument("--api", choices=("chat", "completions"), nargs="+", default=["chat"])
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--prompt-words", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--api-key")
    a = ap.parse_args()
    if a.requests < 1 or a.prompt_words < 1 or a.max_tokens < 1:
        ap.error("--requests, --prompt-words and --max-tokens must be at least 1")
    os.environ.update(OFFLINE_ENV)  # the tokenizer is local; nothing is fetched
    with served(a.serve, a.profile) if a.serve else contextlib.nullcontext(a.endpoint) as root:
        model = a.model or first_model(root, a.api_key)
        target = Target(root.rstrip("/"), model, api_key=a.api_key)
        print(f"{a.serve or root}, model {model}")
        for api in a.api:
            work = plan(api, a.requests, a.prompt_words, a.max_tokens)
            print(report(definition_gap(asyncio.run(run_plan(work, target))), api))


if __name__ == "__main__":
    main()
