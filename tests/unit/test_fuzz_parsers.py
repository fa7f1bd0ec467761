"""Hypothesis fuzzing of every parser of outside input.

One property throughout: a parser returns a valid result or raises the suite's own error class
(slo/errors.py, shown to the user without a traceback), never another exception. Scenario and
profile files, quantities with units, Prometheus text and stored request records are fuzzed
here; the SSE stream parser is fuzzed through the fault injector in tests/faults.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from fixtures.metrics import HISTOGRAMS, parse
from fixtures.settings import ROOT
from slo.errors import MetricsError, RecordError, ScenarioFileError, SuiteError, UnitError
from slo.histogram import Histogram
from slo.records import RequestRecord, from_row, to_row
from slo.scenario import Scenario, load_profiles, load_scenario
from slo.trace import load_trace, parse_trace
from slo.units import METRIC_DIMENSIONS, Dimension, dimension_of, parse_quantity

SCENARIOS = sorted((ROOT / "slo" / "scenarios").glob("*.toml"))
PROFILES = ROOT / "slo" / "profiles.toml"

# -- TOML files: whole-text garbage, and real files with one value or line changed ----------------

_toml_scalar = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats().map(lambda f: "nan" if math.isnan(f) else repr(f)),
    st.booleans().map(lambda b: str(b).lower()),
    st.text(max_size=20).map(lambda t: json.dumps(t)),
    st.sampled_from(
        [
            *('"4 req/s"', '"<= 60ms"', '">= 100 tok/s"', '"1%"', '"closed"', '"poisson"'),
            *('"60s"', '"-1s"', '"<= nan ms"', '"200 parsecs"', "{ min = 9, max = 3 }"),
            *('"chat"', "1979-05-27"),
        ]
    ),
)
_toml_value = st.one_of(
    _toml_scalar,
    st.lists(_toml_scalar, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
    st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), _toml_scalar, max_size=2).map(
        lambda d: "{ " + ", ".join(f"{k} = {v}" for k, v in d.items()) + " }"
    ),
)
_ASSIGN = re.compile(r'^(\s*(?:"[^"]*"|[\w.-]+)\s*=\s*)(.*)$')


@st.composite
def _mutated(draw: st.DrawFn, text: str) -> str:
    """``text`` (a real TOML file) with a few of its values replaced or lines dropped/doubled."""
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["value", "value", "value", "drop", "double", "garble"]))
        m = _ASSIGN.match(lines[i])
        if action == "value" and m:
            lines[i] = m[1] + draw(_toml_value)
        elif action == "drop":
            del lines[i]
        elif action == "double":
            lines.insert(i, lines[i])
        else:
            lines[i] = draw(st.text(max_size=30))
        if not lines:
            break
    return "\n".join(lines) + "\n"


def _write(data: str | bytes, suffix: str = ".toml") -> Path:
    # Hypothesis runs many examples per test: a fresh file each, not pytest's tmp_path.
    with tempfile.NamedTemporaryFile("wb", suffix=suffix, delete=False) as f:
        f.write(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return Path(f.name)


def _load_scenario(data: str | bytes) -> Scenario | None:
    path = _write(data)
    try:
        return load_scenario(path)
    except ScenarioFileError as e:
        assert str(path) in str(e)  # the message names the file
        return None
    finally:
        path.unlink()


@given(st.sampled_from(SCENARIOS).flatmap(lambda p: _mutated(p.read_text())))
def test_mutated_scenario_files_load_or_raise_scenario_file_error(text: str) -> None:
    scenario = _load_scenario(text)
    if scenario is not None:
        assert scenario.workload.classes


@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
@example(b"\xff\xfe[scenario]\n")  # not UTF-8
@example("[scenario]\nname = 1\n")
def test_arbitrary_scenario_files_load_or_raise_scenario_file_error(data: str | bytes) -> None:
    _load_scenario(data)


@given(_mutated(PROFILES.read_text()))
def test_mutated_profile_files_load_or_raise_scenario_file_error(text: str) -> None:
    path = _write(text)
    try:
        profiles = load_profiles(path)
    except ScenarioFileError:
        return
    finally:
        path.unlink()
    for profile in profiles.values():
        assert 0.5 <= profile.confidence < 1


# -- quantities with units ------------------------------------------------------------------------

_UNIT_WORDS = ["ms", "s", "us", "µs", "min", "tok/s", "req/s", "%", "tokens/s", "", "m s", "S"]
_quantity_text = st.builds(
    lambda sign, number, space, unit: f"{sign}{number}{space}{unit}",
    st.sampled_from(["", "-", "+", "<= ", " "]),
    st.one_of(
        st.floats().map(repr),
        st.integers(-(10**400), 10**400).map(str),
        st.from_regex(r"[0-9]*\.?[0-9]*(e[+-]?[0-9]{1,4})?", fullmatch=True),
    ),
    st.sampled_from(["", " ", "\t", "  "]),
    st.one_of(st.sampled_from(_UNIT_WORDS), st.text(max_size=6)),
)


@given(
    st.one_of(
        _quantity_text,
        st.text(max_size=30),
        st.integers(),
        st.floats(),
        st.none(),
        st.booleans(),
        st.lists(st.integers(), max_size=2),
    ),
    st.sampled_from(list(Dimension)),
)
@example("1e999ms", Dimension.TIME)
@example("1e308 min", Dimension.TIME)
@example("-0ms", Dimension.TIME)
def test_quantities_parse_to_a_finite_number_or_raise_unit_error(
    value: object, dimension: Dimension
) -> None:
    try:
        parsed = parse_quantity(value, dimension)  # type: ignore[arg-type]
    except UnitError:
        return
    assert math.isfinite(parsed) and parsed >= 0
    if dimension is Dimension.RATIO:
        assert parsed <= 1


@given(st.one_of(st.text(max_size=20), st.sampled_from(sorted(METRIC_DIMENSIONS))))
def test_metric_names_have_a_dimension_or_raise_unit_error(name: str) -> None:
    try:
        assert dimension_of(name) in Dimension
    except UnitError:
        assert name not in METRIC_DIMENSIONS


# -- Prometheus text ------------------------------------------------------------------------------

_label_value = st.one_of(
    st.sampled_from(["0.01", "0.5", "+Inf", "1e3", "abc", "", "NaN"]), st.text(max_size=6)
)
_sample_line = st.builds(
    lambda name, suffix, labels, value: f"{name}{suffix}{labels} {value}",
    st.sampled_from([*HISTOGRAMS, "vllm:num_requests_running", "x"]),
    st.sampled_from(["_bucket", "_count", "_sum", "", "_created"]),
    st.one_of(
        st.just(""),
        st.dictionaries(st.sampled_from(["le", "model_name", "engine", "q"]), _label_value).map(
            lambda d: "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"
        ),
        st.text(max_size=10),
    ),
    st.one_of(st.floats().map(repr), st.sampled_from(["1", "+Inf", "NaN", "x", ""])),
)
_type_line = st.builds(
    lambda name, kind: f"# TYPE {name} {kind}",
    st.sampled_from([*HISTOGRAMS, "x"]),
    st.sampled_from(["histogram", "counter", "gauge", "summary", "untyped", "bogus", ""]),
)
_prometheus_text = st.lists(
    st.one_of(_sample_line, _type_line, st.text(max_size=20), st.just("# HELP x y")), max_size=12
).map(lambda lines: "\n".join(lines) + "\n")

_GOOD = (
    "# TYPE vllm:time_to_first_token_seconds histogram\n"
    'vllm:time_to_first_token_seconds_bucket{le="0.01",model_name="m"} 3.0\n'
    'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 5.0\n'
    'vllm:time_to_first_token_seconds_count{model_name="m"} 5.0\n'
    'vllm:time_to_first_token_seconds_sum{model_name="m"} 0.2\n'
)


@given(st.one_of(_prometheus_text, st.text(max_size=200)))
@example(_GOOD)
@example(_GOOD.replace('le="0.01"', 'le="fast"'))
@example(_GOOD.replace('{le="0.01",model_name="m"}', ""))
def test_prometheus_text_parses_or_raises_metrics_error(text: str) -> None:
    try:
        out = parse(text)
    except MetricsError:
        return
    for name, h in out.items():
        assert name in HISTOGRAMS and isinstance(h, Histogram)
        assert [le for le, _ in h.buckets] == sorted(le for le, _ in h.buckets)


def test_valid_prometheus_text_is_parsed() -> None:
    h = parse(_GOOD)["vllm:time_to_first_token_seconds"]
    assert (h.count, h.sum, h.buckets) == (5.0, 0.2, ((0.01, 3.0), (math.inf, 5.0)))


# -- stored request records (records.jsonl rows) ---------------------------------------------------

_RECORD = RequestRecord(
    index=3,
    request_class="default",
    intended_send_ns=1_000,
    sent_ns=1_500,
    first_text_ns=20_000,
    end_ns=90_000,
    chunk_ns=(20_000, 50_000, 90_000),
    prompt_tokens=40,
    output_tokens=3,
    expected_prompt_tokens=40,
    max_tokens=3,
    response_id="cmpl-3",
)
_ROW = to_row(_RECORD, 0)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=2)
    ),
    max_leaves=6,
)


@st.composite
def _damaged_row(draw: st.DrawFn) -> object:
    row = dict(_ROW)
    for key in draw(st.lists(st.sampled_from(sorted(row)), max_size=3)):
        if draw(st.booleans()):
            row[key] = draw(_json_value)
        else:
            row.pop(key, None)
    return row


_ABSENT_IN_OLD_ROWS: dict[str, object] = {
    "instance": "",
    "response_id": None,
    "first_chunk_ns": None,
    "first_content_ns": None,
    "first_tool_ns": None,
}


@given(st.one_of(_damaged_row(), _json_value))
@example({**_ROW, "index": True})
@example({**_ROW, "chunk_ns": [1, "2"]})
@example({**_ROW, "output_tokens": 2.5})
def test_stored_rows_read_back_or_raise_record_error(row: object) -> None:
    try:
        record = from_row(row)
    except RecordError as e:
        assert isinstance(e, SuiteError)
        return
    assert isinstance(row, dict)
    back = to_row(record, 0)
    derived = {"ttft_s", "tpot_s", "e2e_s"}
    # A row without "instance" (stored before multi-instance scenarios) reads as one server;
    # one without "response_id" or the TTFT family's times (stored before they were kept) as
    # unknown.
    assert {k: v for k, v in back.items() if k not in derived} == {
        k: v for k, v in {**_ABSENT_IN_OLD_ROWS, **row}.items() if k not in derived
    }


def test_a_written_row_reads_back_as_the_same_record() -> None:
    assert from_row(json.loads(json.dumps(_ROW))) == _RECORD


# ---- trace files (JSONL) ---------------------------------------------------------------------

_trace_row = st.fixed_dictionaries(
    {
        "timestamp": st.one_of(st.floats(), st.integers(), st.booleans(), st.none()),
        "prompt_tokens": st.one_of(st.integers(), st.floats(), st.text(max_size=3)),
        "output_tokens": st.one_of(st.integers(), st.floats(), st.none()),
    },
    optional={"priority": st.one_of(st.integers(), st.text(max_size=3)), "x": st.integers()},
)
_trace_line = st.one_of(
    _trace_row.map(json.dumps), _json_value.map(json.dumps), st.text(max_size=20)
)


@given(st.lists(_trace_line, max_size=5))
@example(['{"timestamp": Infinity, "prompt_tokens": 8, "output_tokens": 8}'])
@example(
    [
        '{"timestamp": 1e308, "prompt_tokens": 8, "output_tokens": 8}',
        '{"timestamp": -0.0, "prompt_tokens": 8, "output_tokens": 8}',
    ]
)
def test_trace_files_parse_or_raise_scenario_file_error(lines: list[str]) -> None:
    try:
        entries = parse_trace("trace.jsonl", "\n".join(lines))
    except ScenarioFileError:
        return
    assert entries
    for e in entries:
        assert math.isfinite(e.offset_s) and e.offset_s >= 0
        assert type(e.prompt_tokens) is int and e.prompt_tokens >= 1
        assert type(e.output_tokens) is int and e.output_tokens >= 1
        assert e.priority is None or type(e.priority) is int


@given(st.binary(max_size=60))
@example(b'{"timestamp": 0, "prompt_tokens": 8, "output_tokens": 8}\xff\n')
def test_trace_file_bytes_load_or_raise_scenario_file_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        path.write_bytes(data)
        with contextlib.suppress(ScenarioFileError):
            load_trace(path)
