"""--slo-engine and --slo-served-model: bad values stop the run before anything starts."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.helpers import run_suite


def test_an_unknown_engine_is_named_with_the_choices(tmp_path: Path) -> None:
    proc = run_suite(["--collect-only", "-m", "realtime", "--slo-engine", "sglang"], tmp_path)
    assert proc.returncode == 4
    assert "--slo-engine = 'sglang': expected one of auto, vllm, openai (vllm: send" in proc.stderr


def test_a_served_model_needs_an_endpoint(tmp_path: Path) -> None:
    proc = run_suite(["--collect-only", "-m", "realtime", "--slo-served-model", "m"], tmp_path)
    assert proc.returncode == 4
    assert "--slo-served-model m: it names the model of a server started apart" in proc.stderr
