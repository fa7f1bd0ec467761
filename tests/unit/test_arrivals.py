"""Arrival processes (rate, burstiness, determinism), traces and their scenario-file validation."""

from __future__ import annotations

import itertools
import json
import random
import re
import statistics
from pathlib import Path

import pytest

from fixtures.models import resolve_model
from fixtures.targets import MODEL_CACHE, load_tokenizer
from fixtures.workload import PromptFactory, arrival_offsets, plan_workload
from slo.errors import ScenarioFileError
from slo.scenario import SCENARIO_DIR, load_scenario
from slo.trace import load_trace, parse_trace

GOOD = (SCENARIO_DIR / "realtime.toml").read_text()
N = 4000


def gaps(offsets: list[float | None]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(o for o in offsets if o is not None)]


@pytest.mark.parametrize("shape", [0.25, 1.0, 4.0])
def test_gamma_has_the_asked_rate_and_cv(shape: float) -> None:
    g = gaps(arrival_offsets("gamma", 5.0, N, random.Random(3), burstiness=shape))
    assert statistics.mean(g) == pytest.approx(0.2, rel=0.08)
    cv = statistics.stdev(g) / statistics.mean(g)
    assert cv == pytest.approx(shape**-0.5, rel=0.12)


def test_bursts_send_n_together_every_interval() -> None:
    offsets = arrival_offsets(
        "bursts", None, 10, random.Random(0), burst_size=4, burst_interval_s=2
    )
    assert offsets == [0, 0, 0, 0, 2, 2, 2, 2, 4, 4]


@pytest.mark.parametrize("start,end", [(1.0, 9.0), (9.0, 1.0), (0.0, 6.0), (4.0, 4.0)])
def test_ramp_rate_goes_linearly_from_start_to_end(start: float, end: float) -> None:
    offsets = [o for o in arrival_offsets("ramp", start, N, random.Random(5), rate_end=end) if o]
    span = 2 * N / (start + end)
    # Requests in each quarter of the span: the linear rate's integral over that quarter.
    for q in range(4):
        lo, hi = q * span / 4, (q + 1) * span / 4
        expected = start * (hi - lo) + (end - start) * (hi**2 - lo**2) / (2 * span)
        got = sum(lo <= o < hi for o in offsets)
        assert got == pytest.approx(expected, rel=0.1), (q, got, expected)


@pytest.mark.parametrize(
    "arrival,kw",
    [
        ("poisson", {}),
        ("gamma", {"burstiness": 0.3}),
        ("ramp", {"rate_end": 8.0}),
    ],
)
def test_random_processes_are_deterministic_with_the_seed(
    arrival: str, kw: dict[str, float]
) -> None:
    def run(seed: int) -> list[float | None]:
        return arrival_offsets(arrival, 2.0, 200, random.Random(seed), **kw)  # type: ignore[arg-type]

    assert run(11) == run(11)
    assert run(11) != run(12)
    assert run(11) == sorted(run(11))  # type: ignore[type-var]


def test_trace_offsets_and_lengths_drive_the_plan(tmp_path: Path) -> None:
    rows = [
        {"timestamp": 100.0, "prompt_tokens": 40, "output_tokens": 8},
        {"timestamp": 100.5, "prompt_tokens": 200, "output_tokens": 3, "priority": 2},
        {"timestamp": 102.0, "prompt_tokens": 17, "output_tokens": 5},
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    text = GOOD.replace('arrival = "poisson"', 'arrival = "trace"\ntrace = "t.jsonl"')
    text = text.replace('rate = "4 req/s"\n', "")
    text = re.sub(r"requests = \d+", "requests = 3", text, count=1)
    text = text.replace("prompt_tokens = { min = 32, max = 512 }\n", "")
    text = text.replace("output_tokens = 32\n", "")
    (tmp_path / "s.toml").write_text(text)
    w = load_scenario(tmp_path / "s.toml").workload
    prompts = PromptFactory(load_tokenizer(resolve_model("tiny-llama", cache_dir=MODEL_CACHE)))
    plan = plan_workload(w, prompts)
    m = plan.measured
    assert [r.offset_s for r in m] == [0.0, 0.5, 2.0]
    assert [r.prompt_tokens for r in m] == [40, 200, 17]
    assert [len(prompts.tokenizer.encode(r.prompt, add_special_tokens=False)) for r in m] == [
        40,
        200,
        17,
    ]
    assert [r.max_tokens for r in m] == [8, 3, 5]
    assert [r.priority for r in m] == [None, 2, None]


@pytest.mark.parametrize(
    "line,needle",
    [
        ("not json", "t.jsonl:2: key '' = 'not json': not a JSON object"),
        ("[1, 2]", "t.jsonl:2: key '' = [1, 2]: expected a JSON object"),
        ('{"timestamp": 1, "prompt_tokens": 5}', "t.jsonl:2: key 'output_tokens' = None: missing"),
        (
            '{"timestamp": -1, "prompt_tokens": 5, "output_tokens": 1}',
            "t.jsonl:2: key 'timestamp' = -1: expected a number of seconds >= 0",
        ),
        (
            '{"timestamp": 1, "prompt_tokens": 0, "output_tokens": 1}',
            "t.jsonl:2: key 'prompt_tokens' = 0: expected an integer >= 1",
        ),
        (
            '{"timestamp": 1, "prompt_tokens": 5.5, "output_tokens": 1}',
            "key 'prompt_tokens' = 5.5: expected an integer >= 1",
        ),
        (
            '{"timestamp": 1, "prompt_tokens": 5, "output_tokens": 1, "prio": 1}',
            "t.jsonl:2: key 'prio' = 1: unknown key; known keys: timestamp",
        ),
        (
            '{"timestamp": "1s", "prompt_tokens": 5, "output_tokens": 1}',
            "key 'timestamp' = '1s': expected a number of seconds",
        ),
    ],
)
def test_bad_trace_lines_name_file_line_and_key(line: str, needle: str) -> None:
    good = '{"timestamp": 0, "prompt_tokens": 5, "output_tokens": 1}'
    with pytest.raises(ScenarioFileError) as e:
        parse_trace("t.jsonl", f"{good}\n{line}\n")
    assert needle in str(e.value)


def test_missing_or_empty_trace_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioFileError, match="cannot read the trace file"):
        load_trace(tmp_path / "none.jsonl")
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(ScenarioFileError, match="the trace has no requests"):
        load_trace(tmp_path / "e.jsonl")


@pytest.mark.parametrize(
    "edit,needle",
    [
        (
            lambda t: t.replace('arrival = "poisson"', 'arrival = "gamma"\nburstiness = 0'),
            "'workload.burstiness' = 0: expected a number > 0",
        ),
        (
            lambda t: t.replace('arrival = "poisson"', 'arrival = "gamma"\nburstiness = 1\ncv = 2'),
            "'workload.cv' = 2: give burstiness or cv, not both",
        ),
        (
            lambda t: t.replace('arrival = "poisson"', 'arrival = "poisson"\nburst_size = 4'),
            "'workload.burst_size' = 4: arrival = \"poisson\" takes no burst_size; it belongs "
            'to arrival = "bursts"',
        ),
        (
            lambda t: t.replace('arrival = "poisson"', 'arrival = "bursts"\nburst_size = 4'),
            "'workload.rate' = '4 req/s': arrival = \"bursts\" takes no rate",
        ),
        (
            lambda t: t.replace(
                'arrival = "poisson"', 'arrival = "bursts"\nburst_size = 4'
            ).replace('rate = "4 req/s"', ""),
            "'workload.burst_interval' = None: missing",
        ),
        (
            lambda t: t.replace('arrival = "poisson"', 'arrival = "ramp"'),
            "'workload.rate_end' = None: arrival = \"ramp\" needs rate_end",
        ),
        (
            lambda t: t.replace('rate = "4 req/s"', 'rate = "0 req/s"'),
            "'workload.rate' = '0 req/s': expected a rate > 0",
        ),
        (
            lambda t: t.replace(
                'arrival = "poisson"', 'arrival = "trace"\ntrace = "no.jsonl"'
            ).replace('rate = "4 req/s"', ""),
            "no.jsonl: key 'trace'",
        ),
        (
            lambda t: t.replace('arrival = "poisson"', 'arrival = "wave"'),
            "one of poisson, constant, gamma, bursts, ramp, trace, closed",
        ),
    ],
)
def test_bad_arrival_keys_name_file_key_and_value(
    edit: object, needle: str, tmp_path: Path
) -> None:
    p = tmp_path / "s.toml"
    p.write_text(edit(GOOD))  # type: ignore[operator]
    with pytest.raises(ScenarioFileError) as e:
        load_scenario(p)
    assert str(e.value).startswith(str(p.parent))
    assert needle in str(e.value)


def test_good_arrival_tables_load(tmp_path: Path) -> None:
    cases = {
        'arrival = "gamma"\ncv = 2': ("gamma", {"burstiness": 0.25}),
        'arrival = "ramp"\nrate_end = "8 req/s"': ("ramp", {"rate_end": 8.0, "rate": 4.0}),
    }
    for i, (edit, (arrival, fields)) in enumerate(cases.items()):
        p = tmp_path / f"s{i}.toml"
        p.write_text(GOOD.replace('arrival = "poisson"', edit))
        cls = load_scenario(p).workload.classes[0]
        assert cls.arrival == arrival
        for k, v in fields.items():
            assert getattr(cls, k) == pytest.approx(v)
    p = tmp_path / "b.toml"
    p.write_text(
        GOOD.replace(
            'arrival = "poisson"', 'arrival = "bursts"\nburst_size = 8\nburst_interval = "3s"'
        ).replace('rate = "4 req/s"', "")
    )
    cls = load_scenario(p).workload.classes[0]
    assert (cls.burst_size, cls.burst_interval_s) == (8, 3.0)
