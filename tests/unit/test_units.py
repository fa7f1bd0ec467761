"""Tests for slo.units: threshold parsing, verdict formatting, metric dimensions."""

from __future__ import annotations

import math
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slo.errors import UnitError
from slo.units import (
    METRIC_DIMENSIONS,
    Dimension,
    dimension_of,
    format_quantity,
    parse_quantity,
)

TIME = Dimension.TIME
TOKEN_RATE = Dimension.TOKEN_RATE
REQUEST_RATE = Dimension.REQUEST_RATE
RATIO = Dimension.RATIO

ACCEPTED: list[tuple[str, Dimension, float]] = [
    ("450ms", TIME, 0.45),
    ("2s", TIME, 2.0),
    ("1.5 s", TIME, 1.5),
    ("250 us", TIME, 250e-6),
    ("250µs", TIME, 250e-6),  # micro sign U+00B5
    ("250μs", TIME, 250e-6),  # Greek mu U+03BC
    ("0.5min", TIME, 30.0),
    ("  450 MS  ", TIME, 0.45),
    ("1.5S", TIME, 1.5),
    ("2 Min", TIME, 120.0),
    ("1e3ms", TIME, 1.0),
    ("2E-3 s", TIME, 0.002),
    (".5s", TIME, 0.5),
    ("5.ms", TIME, 0.005),
    ("+5ms", TIME, 0.005),
    ("0ms", TIME, 0.0),
    ("3 seconds", TIME, 3.0),
    ("1200 tok/s", TOKEN_RATE, 1200.0),
    ("1200 tokens/s", TOKEN_RATE, 1200.0),
    ("1200TOK/S", TOKEN_RATE, 1200.0),
    ("1200 tok / s", TOKEN_RATE, 1200.0),
    ("4 req/s", REQUEST_RATE, 4.0),
    ("4 rps", REQUEST_RATE, 4.0),
    ("4.5 RPS", REQUEST_RATE, 4.5),
    ("1%", RATIO, 0.01),
    ("0.5 %", RATIO, 0.005),
    ("100%", RATIO, 1.0),
    ("0.25", RATIO, 0.25),
    ("0", RATIO, 0.0),
    ("1", RATIO, 1.0),
]


@pytest.mark.parametrize(("text", "dimension", "expected"), ACCEPTED)
def test_parse_accepts(text: str, dimension: Dimension, expected: float) -> None:
    assert parse_quantity(text, dimension) == pytest.approx(expected, rel=1e-12, abs=0.0)


REJECTED: list[tuple[str, Dimension, str]] = [
    ("800", TIME, "has no unit"),
    ("1200", TOKEN_RATE, "has no unit"),
    ("4", REQUEST_RATE, "has no unit"),
    ("5 tok/s", TIME, "which is a token rate, not a time"),
    ("4 tok/s", REQUEST_RATE, "which is a token rate, not a request rate"),
    ("4 req/s", TOKEN_RATE, "which is a request rate, not a token rate"),
    ("5ms", RATIO, "which is a time, not a ratio"),
    ("5 parsecs", TIME, 'unknown unit "parsecs"'),
    ("5 h", TIME, 'unknown unit "h"'),
    ("1,5s", TIME, "unknown unit"),
    ("5 tok/min", TOKEN_RATE, "unknown unit"),
    ("-5ms", TIME, "is negative"),
    ("-1%", RATIO, "is negative"),
    ("-0.1", RATIO, "is negative"),
    ("nan ms", TIME, "not a finite number"),
    ("inf s", TIME, "not a finite number"),
    ("-inf", RATIO, "not a finite number"),
    ("1e400ms", TIME, "not a finite number"),
    ("1e308 min", TIME, "too large"),
    ("", TIME, "is empty"),
    ("   ", TIME, "is empty"),
    ("ms", TIME, "does not start with a number"),
    ("fast", TIME, "does not start with a number"),
    ("\u0668\u0660\u0660ms", TIME, "does not start with a number"),  # Arabic-Indic 800
    ("1.5", RATIO, "bare ratio above 1"),
    ("150%", RATIO, "above 100%"),
]


@pytest.mark.parametrize(("text", "dimension", "reason"), REJECTED)
def test_parse_rejects(text: str, dimension: Dimension, reason: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_quantity(text, dimension)
    message = str(info.value)
    assert f'"{text}"' in message  # names the value
    assert reason in message  # states the rule that was broken
    assert "write" in message  # says how to fix it


def test_bare_number_message_is_exact() -> None:
    with pytest.raises(UnitError) as info:
        parse_quantity("800", TIME)
    assert str(info.value) == (
        'threshold "800" has no unit: a time needs one of ms, s, us, min (write "800ms")'
    )


def test_what_names_the_value() -> None:
    with pytest.raises(UnitError, match=r'^ttft p99 "800" has no unit'):
        parse_quantity("800", TIME, what="ttft p99")


def test_number_from_yaml_is_reported_like_text() -> None:
    # `ttft: 800` in YAML reaches us as an int despite the annotation.
    with pytest.raises(UnitError, match='"800" has no unit'):
        parse_quantity(cast(str, 800), TIME)
    assert parse_quantity(cast(str, 0.5), RATIO) == 0.5


def test_negative_zero_is_zero() -> None:
    assert math.copysign(1.0, parse_quantity("-0ms", TIME)) == 1.0


FORMATTED: list[tuple[float, Dimension, str]] = [
    (0.812, TIME, "812 ms"),
    (0.01, TIME, "10 ms"),
    (0.0047, TIME, "4.7 ms"),
    (0.00035, TIME, "0.35 ms"),
    (0.0, TIME, "0.00 ms"),
    (0.9996, TIME, "1.00 s"),  # rounds up across the band edge: no "1000 ms"
    (1.25, TIME, "1.25 s"),
    (12.34, TIME, "12.3 s"),
    (125.0, TIME, "125 s"),
    (math.inf, TIME, "inf"),
    (-math.inf, TIME, "-inf"),
    (math.nan, TIME, "nan"),
    (1200.0, TOKEN_RATE, "1200 tok/s"),
    (4.2, REQUEST_RATE, "4.20 req/s"),
    (42.0, REQUEST_RATE, "42.0 req/s"),
    (math.inf, REQUEST_RATE, "inf"),
    (0.005, RATIO, "0.50%"),
    (0.0, RATIO, "0.00%"),
    (1.0, RATIO, "100.00%"),
    (1e-6, RATIO, "0.0001%"),  # tiny error rates stay visible
    (math.inf, RATIO, "inf"),
]


@pytest.mark.parametrize(("value", "dimension", "expected"), FORMATTED)
def test_format(value: float, dimension: Dimension, expected: str) -> None:
    assert format_quantity(value, dimension) == expected


def _time_resolution(seconds: float) -> float:
    """Half the last displayed digit of format_quantity for TIME, in seconds."""
    for limit, step in ((1e-3, 1e-5), (1e-2, 1e-4), (1.0, 1e-3), (10.0, 1e-2), (100.0, 1e-1)):
        if seconds < limit:
            return step / 2
    return 0.5


@given(st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False))
def test_time_round_trip(seconds: float) -> None:
    text = format_quantity(seconds, TIME)
    back = parse_quantity(text, TIME)
    assert abs(back - seconds) <= _time_resolution(seconds) + 1e-12 * seconds, text


@given(
    st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False),
    st.sampled_from([TOKEN_RATE, REQUEST_RATE]),
)
def test_rate_round_trip(rate: float, dimension: Dimension) -> None:
    back = parse_quantity(format_quantity(rate, dimension), dimension)
    assert back == pytest.approx(rate, rel=5e-3, abs=0.005)


@given(st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
def test_ratio_round_trip(ratio: float) -> None:
    back = parse_quantity(format_quantity(ratio, RATIO), RATIO)
    assert back == pytest.approx(ratio, rel=5e-2, abs=5e-5)


_UNIT_ALPHABET = "0123456789.eE+-% msuµμinMSoktqreps/ \t\n\u0668"


@given(
    st.one_of(st.text(), st.text(alphabet=_UNIT_ALPHABET, max_size=16)),
    st.sampled_from(list(Dimension)),
)
def test_parse_fuzz_raises_only_unit_error(text: str, dimension: Dimension) -> None:
    # Scenario files are user input: a bad threshold must surface as UnitError, never a crash.
    try:
        value = parse_quantity(text, dimension)
    except UnitError as error:
        assert f'"{text}"' in str(error)
    else:
        assert math.isfinite(value)
        assert value >= 0
        if dimension is RATIO:
            assert value <= 1


@pytest.mark.parametrize(
    ("metric", "dimension"),
    [
        ("ttft", TIME),
        ("tpot", TIME),
        ("itl", TIME),
        ("e2e", TIME),
        ("schedule_lag", TIME),
        ("output_throughput", TOKEN_RATE),
        ("request_throughput", REQUEST_RATE),
        ("goodput", REQUEST_RATE),
        ("error_rate", RATIO),
    ],
)
def test_dimension_of(metric: str, dimension: Dimension) -> None:
    assert dimension_of(metric) is dimension


def test_dimension_of_unknown_lists_known_metrics() -> None:
    with pytest.raises(UnitError) as info:
        dimension_of("ttfb")
    message = str(info.value)
    assert "'ttfb'" in message
    for name in METRIC_DIMENSIONS:
        assert name in message


@settings(max_examples=50)
@given(st.text())
def test_dimension_of_fuzz(metric: str) -> None:
    if metric in METRIC_DIMENSIONS:
        assert dimension_of(metric) is METRIC_DIMENSIONS[metric]
    else:
        with pytest.raises(UnitError):
            dimension_of(metric)
