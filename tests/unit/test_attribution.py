"""The sign-off attributes TTFT only as far as the data allows: time no histogram measured is
labelled not attributed, vLLM's stalls are found in its /metrics series, a client - vLLM
difference is never finer than vLLM's bucket, and in endpoint mode declared engine args are
marked as declared."""

from __future__ import annotations

from reports.run_folder import ScenarioRun
from reports.server_series import find_stalls, server_series
from reports.signoff_format import declared_note, difference_text, stalls_text
from reports.ttft_decomposition import TtftComparison


def _series(rows: list[dict[str, float]], **server: object) -> ScenarioRun:
    return ScenarioRun(
        label="realtime",
        records=(),
        engine_args={"max_num_seqs": 3},
        server=server,
        invalid_reasons=(),
        server_metrics={},
        workload_s=None,
        server_series=tuple(rows),
    )


def test_a_difference_inside_vllms_bucket_gets_no_figure() -> None:
    # The p99 of the issue: client 160 ms, vLLM's bucket 100-300 ms; "-101 ms" was printed.
    coarse = TtftComparison("p99", 0.160, 0.261, (0.100, 0.300))
    assert coarse.difference is None
    assert difference_text(coarse) == "within vLLM's bucket: no finer figure"
    above = TtftComparison("p99", 0.500, 0.250, (0.200, 0.300))
    assert above.difference == (0.2, 0.3)
    assert difference_text(above) == "200 ms to 300 ms"
    mean = TtftComparison("mean", 0.030, 0.020, None)  # exact: sum / count
    assert difference_text(mean) == "10 ms"
    assert difference_text(TtftComparison("p50", 0.03, None, None)) == ""


def test_stalls_are_found_from_gaps_and_from_no_token_progress() -> None:
    rows = [
        {"t_s": float(t), "running": 2.0, "waiting": 0.0, "generation_tokens": 10.0 * t}
        for t in range(10)
    ]
    rows += [{"t_s": 40.0, "running": 2.0, "waiting": 5.0, "generation_tokens": 100.0}]  # 31 s gap
    rows += [
        {"t_s": 41.0 + t, "running": 1.0, "waiting": 6.0, "generation_tokens": 100.0}
        for t in range(5)
    ]  # busy, no token
    rows += [{"t_s": 47.0, "running": 1.0, "waiting": 0.0, "generation_tokens": 120.0}]
    stalls = find_stalls(rows, 1.0)
    assert [(s.start_s, s.end_s, s.why) for s in stalls] == [
        (9.0, 40.0, "/metrics did not answer"),
        (40.0, 45.0, "no token generated with requests in vLLM"),
    ]
    idle = [
        {"t_s": float(t), "running": 0.0, "waiting": 0.0, "generation_tokens": 5.0}
        for t in range(10)
    ]
    assert find_stalls(idle, 1.0) == ()  # nothing to do is not a stall
    sv = server_series(_series(rows))
    assert sv is not None and "stalled 2 time(s), 36 s in all" in stalls_text(sv)


def test_endpoint_mode_marks_engine_args_as_declared_and_draws_no_max_num_seqs() -> None:
    rows = [{"t_s": float(t), "running": 1.0, "generation_tokens": float(t)} for t in range(3)]
    launched = _series(rows, started_by_suite=True)
    endpoint = _series(
        rows, started_by_suite=False, endpoint="http://vllm:8000", max_model_len=4096
    )
    assert declared_note(launched) == ""
    note = declared_note(endpoint)
    assert "declared by the scenario, not verified" in note and "http://vllm:8000" in note
    assert "the server reports max_model_len 4096" in note
    assert server_series(launched).max_num_seqs == 3  # type: ignore[union-attr]
    assert server_series(endpoint).max_num_seqs is None  # type: ignore[union-attr]
