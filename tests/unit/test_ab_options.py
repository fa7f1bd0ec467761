"""Bad A/B options stop the run with a one-line error naming the value, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.settings import parse_engine_args
from tests.e2e.helpers import run_suite


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--slo-ab-blocks", "1"], "--slo-ab-blocks = '1': expected a number >= 2"),
        (["--slo-ab-baseline-args", "max_num_seqs"], "'max_num_seqs' is not NAME=VALUE"),
        (["--slo-ab-baseline-endpoint", "localhost:8000"], "expected the server's http://"),
        (["--slo-ab-baseline-python", "/no/such/python"], "no such interpreter"),
        (["--slo-ab-margin", "0%"], "--slo-ab-margin '0%': must be above 0%"),
        (["--slo-ab-blocks", "4", "--slo-baseline=x"], "give one or the other"),
    ],
)
def test_bad_ab_option(tmp_path: Path, args: list[str], needle: str) -> None:
    proc = run_suite(["--collect-only", "-m", "realtime", *args], tmp_path)
    assert proc.returncode == 4
    assert needle in proc.stderr


def test_engine_args_parse_as_json_where_they_can() -> None:
    got = parse_engine_args("max_num_batched_tokens=256, --enable-chunked-prefill=true,x=a b", "o")
    assert got == {"max_num_batched_tokens": 256, "enable_chunked_prefill": True, "x": "a b"}
