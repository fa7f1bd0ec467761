"""Interleaved A/B on real CPU vLLM: the same server against itself is NO CHANGE or INCONCLUSIVE;
behind a proxy that holds each request back 300 ms, it is a TTFT REGRESSION.

One vLLM serves both runs and both arms: the e2e tests' shared deployed server (prefix caching off:
the arms send the same prompts, and a cache hit in the second arm of a pair would favour it). The
proxy only delays; the tokens are vLLM's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from fixtures.server import VllmServer
from tests.e2e.helpers import DEPLOYED_ENV, junit_cases, run_suite

DELAY_S = 0.3
SESSION = web.AppKey("session", aiohttp.ClientSession)
AB = ["-m", "realtime", "--slo-ab-blocks", "4", "--slo-max-requests", "80"]


@contextlib.contextmanager
def delay_proxy(upstream: str, delay_s: float) -> Iterator[str]:
    """A reverse proxy on loopback that waits ``delay_s`` before forwarding each request and
    streams the answer back as it comes; yields its URL."""
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(delay_s)
        session = request.app[SESSION]
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        async with session.request(
            request.method, upstream + request.path_qs, data=await request.read(), headers=headers
        ) as up:
            out = web.StreamResponse(status=up.status)
            out.content_type = up.content_type
            await out.prepare(request)
            async for chunk in up.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    async def main() -> None:
        app = web.Application()
        app[SESSION] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        stop = asyncio.Event()
        holder["url"], holder["stop"], holder["loop"] = f"http://127.0.0.1:{port}", stop, loop
        ready.set()
        await stop.wait()
        await app[SESSION].close()
        await runner.cleanup()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30), "the delay proxy did not start"
    try:
        yield str(holder["url"])
    finally:
        stop = holder["stop"]
        assert isinstance(stop, asyncio.Event)
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)


@pytest.fixture(scope="module")
def server(deployed_vllm: VllmServer) -> str:
    """The shared deployed server (conftest.py: prefix caching off, as both arms send the same
    prompts); the runs reach it with its key (``KEY``, ``DEPLOYED_ENV``)."""
    return deployed_vllm.base_url


KEY = ["--slo-api-key-env", "E2E_KEY"]


def _regressions(out: Path) -> dict[str, dict[str, Any]]:
    cases = junit_cases(out / "junit.xml")
    return {n: c for n, c in cases.items() if n.startswith("test_regression[")}


def client_spoiled(cases: dict[str, dict[str, Any]]) -> bool:
    """Whether an arm's run was INVALID because the client lagged its schedule. On 2 cores
    vLLM's threads can stall the client's event loop for tens of ms; with 80 requests an arm,
    four such stalls past the 20 ms bound void the run. The lag also reaches the client's token
    timings, so the comparison is void, and every regression test says so."""
    invalid = [c for c in cases.values() if "slo.regression.invalid" in c["properties"]]
    if not invalid:
        return False
    assert len(invalid) == len(cases), cases
    assert all("run INVALID: " in c["message"] for c in invalid), invalid
    return all("schedule lag" in c["properties"]["slo.regression.invalid"] for c in invalid)


def test_same_server_against_itself_is_no_regression(server: str, tmp_path: Path) -> None:
    args = [*AB, *KEY, f"--slo-endpoint={server}", f"--slo-ab-baseline-endpoint={server}"]
    run_suite(args, tmp_path, env=DEPLOYED_ENV)
    cases = _regressions(tmp_path)
    if client_spoiled(cases):  # measured again: this test is about the comparison, not the client
        tmp_path = tmp_path / "again"
        run_suite(args, tmp_path, env=DEPLOYED_ENV)
        cases = _regressions(tmp_path)
    assert "test_regression[ttft p50]" in cases and "test_regression[error_rate]" in cases
    for name, case in cases.items():
        props = case["properties"]
        assert props["slo.regression.change"] in ("NO CHANGE", "INCONCLUSIVE"), (name, props)
        assert props["slo.regression.blocks"] == "4"
    p50 = cases["test_regression[ttft p50]"]["properties"]
    lower, upper = (
        float(p50["slo.regression.ratio_lower"]),
        float(p50["slo.regression.ratio_upper"]),
    )
    assert lower <= float(p50["slo.regression.ratio"]) <= upper and lower < 1.1
    assert (tmp_path / "realtime" / "comparison.json").exists()
    assert "What changed" in (tmp_path / "signoff.md").read_text()


def test_a_delayed_candidate_is_a_ttft_regression(server: str, tmp_path: Path) -> None:
    with delay_proxy(server, DELAY_S) as slow:
        proc = run_suite(
            [*AB, *KEY, f"--slo-endpoint={slow}", f"--slo-ab-baseline-endpoint={server}"],
            tmp_path,
            env=DEPLOYED_ENV,
        )
    assert proc.returncode != 0
    cases = _regressions(tmp_path)
    p50 = cases["test_regression[ttft p50]"]
    assert p50["outcome"] == "failed"
    props = p50["properties"]
    assert props["slo.regression.change"] == "REGRESSION"
    assert float(props["slo.regression.ratio_lower"]) > 1.1
    assert "REGRESSION" in str(p50["message"]) and "x" in str(p50["message"])
    # The delay is before the first token only: the error rate did not regress.
    error_rate = cases["test_regression[error_rate]"]["properties"]
    assert error_rate["slo.regression.change"] != "REGRESSION"
