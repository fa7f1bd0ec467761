# ruff: noqa: E501 - the log lines are as vLLM writes them
"""A died server's error names the cause from its log, not the shutdown noise that follows."""

from __future__ import annotations

from pathlib import Path

from fixtures.server import first_error, why_it_died

# The shape of a vLLM log whose engine core was killed: the cause, then lines of shutdown noise.
LOG = (
    """$ python -m vllm.entrypoints.openai.api_server --model tiny-llama
INFO 12-03 15:31:08 [api_server.py:1] vLLM API server version 0.32.0
INFO 12-03 15:31:40 [loggers.py:2] Engine 000: Avg prompt throughput: 310.2 tokens/s
ERROR 12-03 15:31:52 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.
ERROR 12-03 15:31:52 [async_llm.py:480] AsyncLLM output_handler failed.
ERROR 12-03 15:31:52 [async_llm.py:480] Traceback (most recent call last):
ERROR 12-03 15:31:52 [async_llm.py:480]   File "vllm/v1/engine/async_llm.py", line 439, in output_handler
ERROR 12-03 15:31:52 [async_llm.py:480]     outputs = await engine_core.get_output_async()
ERROR 12-03 15:31:52 [async_llm.py:480]   File "vllm/v1/engine/core_client.py", line 846, in get_output_async
ERROR 12-03 15:31:52 [async_llm.py:480]     raise self._format_exception(outputs) from None
ERROR 12-03 15:31:52 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""
    + "\n".join(
        f"WARNING 12-03 15:31:53 [warnings.py:{i}] resource_tracker: leaked semaphore"
        for i in range(40)
    )
    + "\nINFO 12-03 15:31:54 [launcher.py:1] Shutting down FastAPI HTTP server.\n"
)


def test_the_first_error_is_found_above_the_shutdown_noise(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOG)
    error = first_error(log)
    assert error is not None
    assert error.splitlines()[0].endswith(
        "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."
    )
    text = why_it_died(log)
    assert "EngineDeadError: EngineCore encountered an issue" in text
    assert text.index("--- first error in the log ---") < text.index(
        "--- last lines of the log ---"
    )
    assert "Shutting down FastAPI HTTP server." in text  # the tail is still shown


def test_a_log_without_errors_shows_its_tail(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO starting\nINFO ready\n")
    assert first_error(log) is None
    assert why_it_died(log) == "--- last lines of the log ---\nINFO starting\nINFO ready"
    assert first_error(tmp_path / "missing.log") is None
