"""Quantities with units: parsing SLO thresholds and formatting measured values.

Every threshold in a scenario file must carry its unit ("450ms", not "450"): a bare number
is the most common way a TTFT SLO ends up off by a factor of 1000.
"""

from __future__ import annotations

import math
import re

from slo.errors import UnitError
from slo.vocabulary import METRIC_DIMENSIONS as METRIC_DIMENSIONS
from slo.vocabulary import Dimension as Dimension

# Unit spellings (lower case, inner whitespace removed) -> factor to the canonical unit.
# Both the micro sign (U+00B5) and the Greek mu (U+03BC) are accepted: keyboards differ.
_TIME_UNITS: dict[str, float] = {
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "usec": 1e-6,
    "microsecond": 1e-6,
    "microseconds": 1e-6,
    "ms": 1e-3,
    "msec": 1e-3,
    "millisecond": 1e-3,
    "milliseconds": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
}
_TOKEN_RATE_UNITS: dict[str, float] = {
    "tok/s": 1.0,
    "tokens/s": 1.0,
    "token/s": 1.0,
    "tok/sec": 1.0,
    "tokens/sec": 1.0,
}
_REQUEST_RATE_UNITS: dict[str, float] = {
    "req/s": 1.0,
    "reqs/s": 1.0,
    "request/s": 1.0,
    "requests/s": 1.0,
    "req/sec": 1.0,
    "requests/sec": 1.0,
    "rps": 1.0,
}
_RATIO_UNITS: dict[str, float] = {"%": 0.01}

_UNITS: dict[Dimension, dict[str, float]] = {
    Dimension.TIME: _TIME_UNITS,
    Dimension.TOKEN_RATE: _TOKEN_RATE_UNITS,
    Dimension.REQUEST_RATE: _REQUEST_RATE_UNITS,
    Dimension.RATIO: _RATIO_UNITS,
}

# (noun, the rule, unit to suggest in the fix) per dimension, for error messages.
_NOUN: dict[Dimension, str] = {
    Dimension.TIME: "a time",
    Dimension.TOKEN_RATE: "a token rate",
    Dimension.REQUEST_RATE: "a request rate",
    Dimension.RATIO: "a ratio",
}
_RULE: dict[Dimension, str] = {
    Dimension.TIME: "a time needs one of ms, s, us, min",
    Dimension.TOKEN_RATE: "a token rate needs tok/s (or tokens/s)",
    Dimension.REQUEST_RATE: "a request rate needs req/s (or rps)",
    Dimension.RATIO: "a ratio needs % or a bare number in [0, 1]",
}
_SUGGESTED_UNIT: dict[Dimension, str] = {
    Dimension.TIME: "ms",
    Dimension.TOKEN_RATE: " tok/s",
    Dimension.REQUEST_RATE: " req/s",
    Dimension.RATIO: "%",
}

# ASCII digits only: float() also accepts e.g. Arabic-Indic digits, which would then be valid
# here and surprising everywhere else.
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_NON_FINITE = r"[+-]?(?:nan|inf(?:inity)?)\b"
_QUANTITY_RE = re.compile(
    rf"(?P<number>{_NUMBER}|{_NON_FINITE})\s*(?P<unit>.*)", re.IGNORECASE | re.DOTALL
)
_SPACE_RE = re.compile(r"\s+")


def _unit_dimension(unit: str) -> Dimension | None:
    for dimension, units in _UNITS.items():
        if unit in units:
            return dimension
    return None


def parse_quantity(text: str, dimension: Dimension, *, what: str = "threshold") -> float:  # noqa: C901  (one branch per rule, each its own message)
    """Parse ``text`` (e.g. ``"450ms"``) as a ``dimension`` and return it in canonical units.

    ``what`` names the value in error messages ("threshold", "ttft p99", ...).
    Raises ``UnitError`` for anything that is not a finite, non-negative quantity with a unit
    of ``dimension`` (RATIO alone also takes a bare fraction in [0, 1]).
    """
    text = _as_text(text, dimension, what)
    rule = _RULE[dimension]
    shown = f'{what} "{text}"'
    stripped = text.strip()
    if not stripped:
        raise UnitError(
            f'{shown} is empty: {rule} (write e.g. "{example_quantity(dimension, "1")}")'
        )
    match = _QUANTITY_RE.fullmatch(stripped)
    if match is None:
        raise UnitError(
            f"{shown} does not start with a number: {rule} "
            f'(write e.g. "{example_quantity(dimension, "1")}")'
        )
    number_text = match["number"]
    value = float(number_text)
    if not math.isfinite(value):
        raise UnitError(
            f"{shown} is not a finite number: {rule} (write e.g. "
            f'"{example_quantity(dimension, "1")}")'
        )
    if value < 0:
        positive = number_text.lstrip("+-")
        raise UnitError(
            f"{shown} is negative: {_NOUN[dimension]} must be >= 0 "
            f'(write e.g. "{example_quantity(dimension, positive)}")'
        )
    unit = _SPACE_RE.sub("", match["unit"]).lower()

    if not unit:
        if dimension is not Dimension.RATIO:
            raise UnitError(
                f'{shown} has no unit: {rule} (write "{example_quantity(dimension, number_text)}")'
            )
        if value > 1:
            raise UnitError(
                f"{shown} is a bare ratio above 1: a bare ratio is a fraction in [0, 1] "
                f'(write "{number_text}%" for percent)'
            )
        return value + 0.0  # + 0.0 turns -0.0 into 0.0

    factor = _UNITS[dimension].get(unit)
    if factor is None:
        other = _unit_dimension(unit)
        if other is not None:
            raise UnitError(
                f'{shown} has unit "{unit}", which is {_NOUN[other]}, not {_NOUN[dimension]}: '
                f'{rule} (write e.g. "{example_quantity(dimension, number_text)}")'
            )
        raise UnitError(
            f'{shown} has unknown unit "{unit}": {rule} '
            f'(write e.g. "{example_quantity(dimension, number_text)}")'
        )
    result = value * factor + 0.0
    if not math.isfinite(result):
        raise UnitError(
            f"{shown} is too large: {_NOUN[dimension]} must be finite (write a smaller number)"
        )
    if dimension is Dimension.RATIO and result > 1:
        raise UnitError(f'{shown} is above 100%: a ratio is at most 100% (write e.g. "1%")')
    return result


def _as_text(text: object, dimension: Dimension, what: str) -> str:
    if isinstance(text, str):
        return text
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        # A YAML `ttft: 800` arrives as a number; report it like the string "800".
        return repr(text)
    raise UnitError(
        f"{what} {text!r} is not text: {_RULE[dimension]} "
        f'(write e.g. "{example_quantity(dimension, "1")}")'
    )


def example_quantity(dimension: Dimension, number: str) -> str:
    """``number`` with the unit an error message suggests for ``dimension``: ``"450ms"``."""
    return f"{number}{_SUGGESTED_UNIT[dimension]}"


def _non_finite(value: float) -> str | None:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return None


def format_quantity(value: float, dimension: Dimension) -> str:
    """Human form of a canonical value for verdict messages: "812 ms", "1.25 s", "0.50%"."""
    special = _non_finite(value)
    if special is not None:
        return special
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if dimension is Dimension.TIME:
        body = _format_time(magnitude)
    elif dimension is Dimension.RATIO:
        body = _format_percent(magnitude * 100)
    else:
        body = f"{_format_rate(magnitude)} {dimension.value}"
    return sign + body


def _format_time(seconds: float) -> str:
    # Decide the band on the rounded text, so 0.9996 s reads "1.00 s" and not "1000 ms".
    ms = seconds * 1e3
    for decimals, limit in ((2, 1.0), (1, 10.0), (0, 1000.0)):
        text = f"{ms:.{decimals}f}"
        if float(text) < limit:
            return f"{text} ms"
    for decimals, limit in ((2, 10.0), (1, 100.0)):
        text = f"{seconds:.{decimals}f}"
        if float(text) < limit:
            return f"{text} s"
    return f"{seconds:.0f} s"


def _format_rate(rate: float) -> str:
    # At least three significant figures: "4.20", "42.0", "1200".
    for decimals, limit in ((2, 10.0), (1, 100.0)):
        text = f"{rate:.{decimals}f}"
        if float(text) < limit:
            return text
    return f"{rate:.0f}"


def _format_percent(percent: float) -> str:
    text = f"{percent:.2f}"
    if percent > 0 and float(text) == 0:
        # Keep tiny non-zero error rates visible instead of printing "0.00%".
        return f"{percent:.2g}%"
    return f"{text}%"


def dimension_of(metric: str) -> Dimension:
    """The dimension of a metric name such as ``"ttft"``; ``UnitError`` for unknown names."""
    try:
        return METRIC_DIMENSIONS[metric]
    except (KeyError, TypeError):
        known = ", ".join(sorted(METRIC_DIMENSIONS))
        raise UnitError(
            f"metric {metric!r} is unknown: a metric is one of {known} (fix the spelling)"
        ) from None
