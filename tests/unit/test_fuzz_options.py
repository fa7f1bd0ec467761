"""Hypothesis fuzzing of the suite's command-line options (and their ini keys).

The property of tests/unit/test_fuzz_parsers.py, for what users type on the command line: any
value of any option gives either settings a run can start with, or one line of error (pytest's
UsageError, or the suite's own SuiteError) that names it, never a traceback.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fixtures.options import BY_DEST, OPTIONS
from fixtures.selection import select
from fixtures.settings import Settings, resolve
from slo.errors import SuiteError

_FLAGS = {"slo_sequential": False, "slo_no_progress": True}


class _Config:
    """What resolve() reads of a pytest config: the options given, else the ini defaults."""

    rootpath = Path.cwd()

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def getoption(self, name: str) -> Any:
        return self.options.get(name, _FLAGS.get(name))

    def getini(self, name: str) -> Any:
        opt = BY_DEST[name]
        return False if opt.is_switch else opt.default


_value = st.one_of(
    st.text(max_size=30),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats().map(repr),
    st.sampled_from(
        [
            *("", "0", "-1", "1", "nan", "inf", "-inf", "1e400", "10%", "%", "150%", "-5%"),
            *("not-a-url", "http://", "http://h:99999", "https://h/v1", "ftp://h", "http://[::1"),
            *("cpu-tiny", "h200-llama2-7b", "ci", "explore", "signoff", "tiny-llama", "."),
        ]
    ),
)
_VALUED = [opt.dest for opt in OPTIONS if not opt.is_switch]
_options = st.dictionaries(st.sampled_from(_VALUED), _value, max_size=4)


def _one_line(error: BaseException) -> None:
    text = str(error)
    assert text.strip() and "\n" not in text, text
    assert "Traceback" not in text


def _usable(s: Settings) -> None:
    assert math.isfinite(s.startup_timeout_s) and s.startup_timeout_s >= 1
    assert math.isfinite(s.tighten) and s.tighten > 0
    assert s.max_requests is None or (type(s.max_requests) is int and s.max_requests >= 1)
    assert type(s.client_processes) is int and s.client_processes >= 1
    assert math.isfinite(s.regression_limit) and s.regression_limit >= 0
    assert s.endpoint is None or s.endpoint.startswith(("http://", "https://"))
    assert s.metrics_url is None or s.endpoint is not None


@given(_options)
@example({"slo_endpoint": "not-a-url"})
@example({"slo_endpoint": "http://h:99999"})
@example({"slo_startup_timeout": "nan"})
@example({"slo_tighten": "inf"})
@example({"slo_report_dir": "a\x00b"})
@example({"slo_regression": "%"})
def test_any_option_value_gives_settings_or_one_line_of_error(options: dict[str, str]) -> None:
    try:
        settings = resolve(_Config(options))
    except (pytest.UsageError, SuiteError) as e:
        _one_line(e)
        return
    _usable(settings)
    try:
        select("realtime", settings)  # the profile and model options are read here
    except SuiteError as e:
        _one_line(e)
