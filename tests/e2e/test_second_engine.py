"""A second serving engine behind --slo-endpoint: Hugging Face's ``transformers serve`` (PyPI, CPU,
continuous batching) with the bundled tiny model given random weights here.

It answers /v1/models with HTTP 500, refuses vLLM's request fields (HTTP 422), streams a usage
chunk and has no /metrics or /version: the suite must name the model from
--slo-served-model, send the plain OpenAI API, judge the realtime objectives on the client's
figures, and say there are no server figures. Then the same SLO file on vLLM, side by side.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.models import MODELS_DIR
from fixtures.server import VllmServer
from tests.e2e.helpers import DEPLOYED_ENV, deployed_args, junit_cases, run_suite

REQUESTS = 12
# The realtime scenario's five objectives.
OBJECTIVES = {"ttft p50", "ttft p99", "tpot p99", "output_throughput", "goodput"}


def _interval_holds(v: dict[str, Any]) -> bool:
    """The estimate lies in its interval (JSON null: an unbounded side; 12 requests are too
    few to bound a rate, or a clustered percentile, at all)."""
    lower = -math.inf if v["ci_lower"] is None else v["ci_lower"]
    upper = math.inf if v["ci_upper"] is None else v["ci_upper"]
    return bool(lower <= v["estimate"] <= upper)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _random_weights(folder: Path) -> None:
    """The bundled tiny-llama (config and tokenizer only) with random weights saved."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    src = MODELS_DIR / "tiny-llama"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(src))  # type: ignore[no-untyped-call]
    model.save_pretrained(folder)
    for f in src.iterdir():
        if f.name != "config.json" and f.suffix in (".json", ".jinja"):
            shutil.copy(f, folder / f.name)


@pytest.fixture(scope="module")
def transformers_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(URL, model folder) of a running ``transformers serve``; stopped, with its group, after."""
    folder = tmp_path_factory.mktemp("tiny-llama-random")
    _random_weights(folder)
    port = _free_port()
    log = folder / "serve.log"
    # The KV cache is bounded: on CPU, continuous batching otherwise sizes it from the
    # machine's memory (about 20 GB here, and the kernel's OOM killer ends it).
    cmd = [
        sys.executable, "-m", "transformers.cli.transformers", "serve", str(folder),
        "--device", "cpu", "--continuous-batching", "--cb-block-size", "32",
        "--cb-num-blocks", "256", "--cb-max-batch-tokens", "1024",
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"transformers serve did not start:\n{log.read_text()[-3000:]}")
                time.sleep(1)
        yield url, folder
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture(scope="module")
def transformers_run(
    transformers_serve: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    url, folder = transformers_serve
    reports = tmp_path_factory.mktemp("transformers") / "reports"
    args = ["-m", "realtime", "--slo-endpoint", url, f"--slo-served-model={folder}"]
    proc = run_suite([*args, "--slo-max-requests", str(REQUESTS)], reports)
    return reports, proc


def test_realtime_objectives_judged_against_transformers_serve(
    transformers_serve: tuple[str, Path],
    transformers_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    url, _ = transformers_serve
    reports, proc = transformers_run
    # The server as a user meets it: no model list, vLLM's fields refused.
    with pytest.raises(urllib.error.HTTPError, match="500"):
        urllib.request.urlopen(f"{url}/v1/models", timeout=10)
    assert proc.returncode in (0, 1), proc.returncode  # verdicts reached (FAILs allowed)
    cases = junit_cases(reports / "junit.xml")
    assert {c for c in cases if c.startswith("test_objective")} == {
        f"test_objective[{o}]" for o in OBJECTIVES
    }
    assert all(c["outcome"] in ("passed", "failed") for c in cases.values()), cases
    verdicts = json.loads((reports / "verdicts.json").read_text())
    assert {v["objective"].split(" <")[0].split(" >")[0] for v in verdicts} == OBJECTIVES
    for v in verdicts:
        assert v["outcome"] in ("PASS", "FAIL", "INCONCLUSIVE"), v
        assert v["n"] == REQUESTS and _interval_holds(v), v

    summary = json.loads((reports / "realtime" / "summary.json").read_text())
    server = summary["server"]
    assert server["engine"] == "openai" and server["started_by_suite"] is False
    assert "refused: ignore_eos, min_tokens, priority" in server["requests"], server
    assert "server's usage counts" in server["requests"], server
    assert server["server_figures"] == f"{url}/metrics answered HTTP 404"
    assert summary["server_metrics"] == {} and summary["invalid_reasons"] == []
    assert not (reports / "realtime" / "server_series.jsonl").exists()
    rows = [
        json.loads(x) for x in (reports / "realtime" / "records.jsonl").read_text().splitlines()
    ]
    measured = [r for r in rows if not r["warmup"]]
    assert len(measured) == REQUESTS
    for r in measured:
        assert r["error"] is None, r
        # The server's counts: the prompt as the suite's tokenizer built it (the model folder's,
        # chat template included), the output up to max_tokens (it may end at EOS).
        assert r["prompt_tokens"] == r["expected_prompt_tokens"], r
        assert 1 <= r["output_tokens"] <= r["max_tokens"], r
    signoff = (reports / "signoff.md").read_text()
    assert "No server figures: " in signoff
    assert "TTFT decomposition (" not in signoff and "TTFT decomposition: not" not in signoff


def test_same_slo_file_on_vllm_and_transformers_side_by_side(
    transformers_run: tuple[Path, subprocess.CompletedProcess[str]],
    deployed_vllm: VllmServer,
    tmp_path: Path,
) -> None:
    other, _ = transformers_run
    reports = tmp_path / "vllm"
    # The shared deployed vLLM, sent the same plain OpenAI requests (--slo-engine openai).
    args = ["-m", "realtime", *deployed_args(deployed_vllm), "--slo-engine", "openai"]
    proc = run_suite([*args, "--slo-max-requests", str(REQUESTS)], reports, env=DEPLOYED_ENV)
    assert proc.returncode in (0, 1), proc.returncode
    out = subprocess.run(
        [sys.executable, "-m", "reports.engines", str(reports), str(other)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.returncode == 0, out.stderr
    data = json.loads((reports / "engines.json").read_text())
    assert data["a"]["engine"].startswith("openai requests") and data["a"]["endpoint"]
    assert "refused: ignore_eos" in data["b"]["engine"]
    assert {r["objective"].split(" <")[0].split(" >")[0] for r in data["rows"]} == OBJECTIVES
    for row in data["rows"]:
        for side in ("a", "b"):
            cell = row[side]
            assert cell["n"] == REQUESTS and _interval_holds(cell), cell
    page = (reports / "signoff.html").read_text()
    assert "Engines side by side" in page and "refused: ignore_eos" in page
    assert "## Engines side by side" in (reports / "signoff.md").read_text()
