# ruff: noqa: E501 - the log lines are as vLLM writes them
"""A died server's error names the cause from its log, not the shutdown noise that follows."""

from __future__ import annotations

from pathlib import Path

from fixtures.server_log import first_error, log_cause, why_it_died

# As vLLM writes it when its engine core is killed: the cause, then long shutdown noise.
_P = "(APIServer pid=11473) ERROR 12-03 15:47:58 [async_llm.py:906] "
LOG = (
    "$ python -m vllm.entrypoints.openai.api_server --model tiny-llama\n"
    "(APIServer pid=11473) WARNING 12-03 15:46:25 [system_utils.py:255] Found ulimit of 20000 and failed to automatically increase with error current limit exceeds maximum limit.\n"
    "(APIServer pid=11473) INFO 12-03 15:47:40 [loggers.py:2] Engine 000: Avg prompt throughput: 310.2 tokens/s\n"
    + _P
    + "AsyncLLM output_handler failed.\n"
    + _P
    + "Traceback (most recent call last):\n"
    + _P
    + '  File "vllm/v1/engine/async_llm.py", line 849, in output_handler\n'
    + _P
    + "    outputs = await engine_core.get_output_async()\n"
    + _P
    + '  File "vllm/v1/engine/core_client.py", line 1235, in get_output_async\n'
    + _P
    + "    raise self._format_exception(outputs) from None\n"
    + _P
    + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
    + "".join(f' - leaked function "f{i}"\n' for i in range(40))
    + "nanobind: this is likely caused by a reference counting issue in the binding code.\n"
)


def test_the_first_error_is_found_above_the_shutdown_noise(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOG)
    error = first_error(log)
    assert error is not None
    assert error.splitlines()[0].endswith("AsyncLLM output_handler failed.")
    assert log_cause(log) == (
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
        "See stack trace (above) for the root cause."
    )
    text = why_it_died(log)
    assert "EngineDeadError: EngineCore encountered an issue" in text
    assert text.index("--- first error in the log ---") < text.index(
        "--- last lines of the log ---"
    )
    assert "reference counting issue" in text  # the tail is still shown


def test_a_log_without_errors_shows_its_tail(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO starting\nINFO ready\n")
    assert first_error(log) is None and log_cause(log) is None
    assert why_it_died(log) == "--- last lines of the log ---\nINFO starting\nINFO ready"
    assert first_error(tmp_path / "missing.log") is None
