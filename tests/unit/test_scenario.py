"""Scenario and profile files: the bundled ones load; bad ones fail naming file, key and value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures.runner import Target, request_body
from fixtures.workload import PlannedRequest
from slo.errors import ScenarioFileError, SuiteError
from slo.scenario import (
    SCENARIO_DIR,
    bundled_scenarios,
    load_profile,
    load_profiles,
    load_scenario,
    parse_objective,
)
from tests.e2e.helpers import set_requests

GOOD = (SCENARIO_DIR / "realtime.toml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def test_bundled_scenarios_load_with_objectives_for_cpu_tiny() -> None:
    assert "realtime" in bundled_scenarios()
    for name in bundled_scenarios():
        s = load_scenario(name)
        objectives = s.objectives_for("cpu-tiny")
        assert objectives, name
        assert s.workload.requests >= 1


def test_realtime_objectives_parsed_to_canonical_units() -> None:
    s = load_scenario("realtime")
    by_name = {o.name: o for o in s.objectives_for("cpu-tiny")}
    assert by_name["ttft p99"].comparison == "<="
    assert by_name["ttft p99"].quantile == 0.99
    assert by_name["output_throughput"].statistic is None
    assert s.server["scheduling_policy"] == "priority"
    assert s.workload.classes[0].rate == pytest.approx(4.0)


@pytest.mark.parametrize(
    "key,value,expected",
    [
        ("ttft p99", "<= 800ms", (0.8, "<=")),
        ("ttft p99 class=vip", "<= 2s", (2.0, "<=")),
        ("output_throughput", ">= 1200 tok/s", (1200.0, ">=")),
        ("error_rate", "<= 1%", (0.01, "<=")),
    ],
)
def test_objective_forms(key: str, value: str, expected: tuple[float, str]) -> None:
    o = parse_objective("f.toml", "objectives.p", key, value)
    assert o.threshold == pytest.approx(expected[0])
    assert o.comparison == expected[1]


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("latency p99", "<= 1s", "unknown metric"),
        ("ttft p42x", "<= 1s", "expected 'METRIC [STATISTIC]"),
        ("ttft", "<= 1s", "needs a statistic"),
        ("output_throughput p99", ">= 1 tok/s", "takes no statistic"),
        ("ttft p99", "800ms", "'<= QUANTITY'"),
        ("ttft p99", "<= 800", "has no unit"),
        ("ttft p99", "<= 5 tok/s", "5 tok/s"),
        ("ttft p99", 800, "'<= QUANTITY'"),
    ],
)
def test_bad_objectives_name_file_key_and_value(key: str, value: object, needle: str) -> None:
    with pytest.raises(ScenarioFileError) as e:
        parse_objective("f.toml", "objectives.cpu-tiny", key, value)
    msg = str(e.value)
    assert msg.startswith("f.toml: key 'objectives.cpu-tiny.")
    assert needle in msg


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda t: t.replace('rate = "4 req/s"', "rate = 4"), "workload.rate' = 4: needs a unit"),
        (lambda t: set_requests(t, 0), "workload.requests' = 0"),
        (lambda t: set_requests(t, '"many"'), "expected an integer"),
        (
            lambda t: t.replace('arrival = "poisson"', 'arrival = "bursty"'),
            "one of poisson, constant, gamma, bursts, ramp, trace, closed",
        ),
        (lambda t: t.replace("seed =", "sede ="), "'workload.sede' = 20261202: unknown key"),
        (lambda t: t.replace("[scenario]", "[scenari]"), "'scenario' = None: missing"),
        (lambda t: t.replace("min = 32, max = 512", "min = 600, max = 512"), "must be <= max"),
        (lambda t: t + "\n[broken", "not valid TOML"),
    ],
)
def test_bad_scenario_files(tmp_path: Path, edit: object, needle: str) -> None:
    path = write(tmp_path, edit(GOOD))  # type: ignore[operator]
    with pytest.raises(ScenarioFileError) as e:
        load_scenario(path)
    assert str(path) in str(e.value)
    assert needle in str(e.value)


def test_missing_profile_objectives_say_how_to_fix() -> None:
    s = load_scenario("realtime")
    with pytest.raises(ScenarioFileError, match=r"no \[objectives.h999\] table .* --slo-profile"):
        s.objectives_for("h999")


def test_unknown_scenario_lists_bundled_ones() -> None:
    with pytest.raises(ScenarioFileError, match=r"bundled scenarios: .*realtime"):
        load_scenario("no-such-scenario")


def test_profiles_inherit_and_unknown_profile_is_named() -> None:
    profiles = load_profiles()
    h200 = profiles["h200-llama2-7b"]
    assert h200.server["dtype"] == "bfloat16"  # from parent gpu-llama2-7b
    assert h200.model == "llama-2-7b"
    assert profiles["cpu-tiny"].env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    with pytest.raises(
        ScenarioFileError, match=r"'profile' = 'nope': no such profile; known: .*cpu-tiny"
    ):
        load_profile("nope")


def test_profile_inheritance_loop(tmp_path: Path) -> None:
    p = tmp_path / "profiles.toml"
    p.write_text('[a]\nparent = "b"\nmodel = "x"\n[b]\nparent = "a"\n')
    with pytest.raises(ScenarioFileError, match="inheritance loop: a -> b -> a"):
        load_profiles(p)


# A team's own profiles file (--slo-profiles), added to the bundled ones.

TEAM = """
[my-cpu]
parent = "cpu-tiny"
description = "Our CI runner"
inconclusive = "warn"
[my-cpu.server]
max_model_len = 1024
[my-cpu.env]
VLLM_CPU_KVCACHE_SPACE = "2"

[my-cpu-strict]
parent = "my-cpu"
inconclusive = "fail"
"""


def test_a_teams_profiles_inherit_bundled_ones(tmp_path: Path) -> None:
    team = tmp_path / "profiles.toml"
    team.write_text(TEAM)
    profiles = load_profiles(extra=team)
    tiny, mine, strict = profiles["cpu-tiny"], profiles["my-cpu"], profiles["my-cpu-strict"]
    assert tiny == load_profiles()["cpu-tiny"]  # the bundled ones are all there, unchanged
    assert (mine.model, mine.device, mine.server_cpus) == (tiny.model, tiny.device, (0,))
    assert dict(mine.server) == {**tiny.server, "max_model_len": 1024}
    assert dict(mine.env) == {**tiny.env, "VLLM_CPU_KVCACHE_SPACE": "2"}
    assert (mine.inconclusive, mine.source) == ("warn", str(team))
    assert (strict.inconclusive, dict(strict.server)) == ("fail", dict(mine.server))
    assert load_profile("my-cpu-strict", extra=team) == strict


def test_a_teams_profile_with_a_bundled_name_is_refused(tmp_path: Path) -> None:
    team = tmp_path / "profiles.toml"
    team.write_text('[cpu-tiny]\nmodel = "x"\n')
    with pytest.raises(ScenarioFileError) as e:
        load_profiles(extra=team)
    assert str(e.value) == (
        f"{team}: key 'cpu-tiny' = '[cpu-tiny]': a bundled profile has this name; give yours "
        'another name and inherit it: [my-cpu-tiny] with parent = "cpu-tiny"'
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[mine]\nparent = "cpu-tiniest"\n',
         r"key 'mine.parent' = 'cpu-tiniest': no such profile; known: .*cpu-tiny.*mine"),
        ('[a]\nparent = "b"\n[b]\nparent = "a"\n', "inheritance loop: a -> b -> a"),
        ("[mine]\ndevice = 'tpu'\nparent = 'cpu-tiny'\n",
         r"key 'mine.device' = 'tpu': expected one of cpu, cuda"),
        ("[mine]\n", r"key 'mine.model' = None: missing"),
    ],
)  # fmt: skip
def test_a_bad_teams_profile_names_its_file_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    team = tmp_path / "profiles.toml"
    team.write_text(text)
    with pytest.raises(ScenarioFileError, match=rf"^{re.escape(str(team))}: .*{message}") as e:
        load_profiles(extra=team)
    assert "\n" not in str(e.value)


@given(st.text(max_size=40), st.one_of(st.text(max_size=40), st.integers(), st.floats()))
def test_objective_parser_fuzz_raises_only_suite_errors(key: str, value: object) -> None:
    try:
        o = parse_objective("f.toml", "objectives.p", key, value)
    except SuiteError as e:
        assert re.match(r"f\.toml: key 'objectives\.p\.", str(e))
    else:
        assert o.threshold >= 0


def test_goodput_bounds_are_parsed_and_required(tmp_path: Path) -> None:
    s = load_scenario("realtime")
    assert s.goodput == {"ttft": pytest.approx(0.2), "tpot": pytest.approx(0.02)}
    no_bounds = GOOD.replace("[goodput]", "[unused]").replace('ttft = "200ms"\ntpot = "20ms"\n', "")
    no_bounds = no_bounds.replace("[unused]\n", "")
    with pytest.raises(ScenarioFileError, match=r"goodput objective needs a \[goodput\] table"):
        load_scenario(write(tmp_path, no_bounds))
    bad = GOOD.replace('tpot = "20ms"', 'itl = "20ms"')
    with pytest.raises(ScenarioFileError, match=r"'goodput.itl' = '20ms': unknown key"):
        load_scenario(write(tmp_path, bad))


def test_mlperf_presets_apply_where_a_scenario_has_no_table() -> None:
    from fixtures.selection import select
    from fixtures.settings import programmatic

    sel = select("realtime", programmatic("mlperf-llama2-70b-interactive"))
    assert [o.describe() for o in sel.objectives] == ["ttft p99 <= 450 ms", "tpot p99 <= 40 ms"]
    assert sel.model == "meta-llama/Llama-2-70b-chat-hf"
    assert sel.engine_args["dtype"] == "bfloat16"  # inherited from gpu-llama2-7b
    # A scenario's own table for the profile wins over nothing; cpu-tiny has one.
    assert len(select("realtime", programmatic("cpu-tiny")).objectives) == 5


EXTRA = '\nrequest_extra = { tool_choice = { type = "function", function = { name = "f" } } }\n'


def test_request_extra_reaches_each_request_body(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, GOOD.replace("\n[workload]\n", "\n[workload]" + EXTRA)))
    extra = s.workload.classes[0].request_extra
    req = PlannedRequest(0, "default", 0.0, "hi", 1, None, 4, None, extra=extra)
    _, body = request_body(Target("http://x", "m"), "chat", req)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert body["ignore_eos"] is True and body["messages"][-1]["content"] == "hi"


@pytest.mark.parametrize(
    "extra,needle",
    [
        (
            "request_extra = { max_tokens = 5 }",
            "'max_tokens': the suite builds 'max_tokens' itself",
        ),
        ("request_extra = { when = 2026-12-04 }", "JSON values only"),
        ('request_extra = "tools"', "expected a table of request fields"),
    ],
)
def test_bad_request_extra(tmp_path: Path, extra: str, needle: str) -> None:
    path = write(tmp_path, GOOD.replace("\n[workload]\n", f"\n[workload]\n{extra}\n"))
    with pytest.raises(ScenarioFileError) as e:
        load_scenario(path)
    assert "workload.request_extra" in str(e.value) and needle in str(e.value), str(e.value)
