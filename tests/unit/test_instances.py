"""Multi-instance scenarios ([servers.NAME], classes routed by name) and [sweep] grids."""

from __future__ import annotations

from pathlib import Path

import pytest

from slo.errors import ScenarioFileError
from slo.histogram import Histogram
from slo.scenario import SCENARIO_DIR, load_profile, load_scenario

TWO = (SCENARIO_DIR / "mixed-two-instances.toml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def test_two_instance_scenario_routes_each_class_to_its_instance() -> None:
    from fixtures.selection import Selection

    s = load_scenario("mixed-two-instances")
    assert {c.name: c.server for c in s.workload.classes} == {
        "realtime": "realtime",
        "batch": "batch",
    }
    profile = load_profile("cpu-tiny")
    sel = Selection(s, profile, (), "tiny-llama", {**profile.server, **s.server}, "", s.instances)
    args = sel.instance_engine_args
    assert args["realtime"]["max_num_seqs"] == 8
    assert args["batch"]["max_num_seqs"] == 32
    assert args["batch"]["scheduling_policy"] == "fcfs"
    assert args["realtime"]["scheduling_policy"] == "priority"  # from [server]
    assert args["realtime"]["dtype"] == "float32"  # from the profile
    assert sel.routes == {"realtime": "realtime", "batch": "batch"}
    one = sel.one_instance("one-instance")
    assert one.instance_engine_args == {"": sel.engine_args}
    assert one.routes == {}
    assert one.server_key != sel.server_key
    # The same load: the workload is the scenario's either way.
    assert one.scenario.workload == sel.scenario.workload


def test_mixed_two_instances_has_the_same_load_as_mixed() -> None:
    two, one = load_scenario("mixed-two-instances"), load_scenario("mixed")
    strip = [c.__class__(**{**c.__dict__, "server": None}) for c in two.workload.classes]
    assert tuple(strip) == one.workload.classes
    assert (two.workload.seed, two.workload.warmup_requests) == (
        one.workload.seed,
        one.workload.warmup_requests,
    )


@pytest.mark.parametrize(
    "edit,needle",
    [
        (
            lambda t: t.replace('server = "batch"', 'server = "bulk"'),
            "'workload.classes.batch.server' = 'bulk': with [servers.NAME] tables every traffic "
            "class is routed to one of them: set server = one of batch, realtime",
        ),
        (
            lambda t: t.replace('server = "batch"\n', ""),
            "'workload.classes.batch.server' = None",
        ),
        (
            lambda t: t.replace('server = "batch"', 'server = "realtime"'),
            "'servers.batch' = 'batch': no traffic class is routed to this instance",
        ),
        (lambda t: t + "\n[sweep]\nmax_num_seqs = 8\n", "'sweep.max_num_seqs' = 8"),
        (lambda t: t + "\n[sweep]\nmax_num_seqs = []\n", "non-empty list"),
    ],
)
def test_bad_instance_and_sweep_tables(tmp_path: Path, edit: object, needle: str) -> None:
    path = write(tmp_path, edit(TWO))  # type: ignore[operator]
    with pytest.raises(ScenarioFileError) as e:
        load_scenario(path)
    assert needle in str(e.value)


def test_a_class_naming_a_server_needs_servers_tables(tmp_path: Path) -> None:
    mixed = (SCENARIO_DIR / "mixed.toml").read_text()
    text = mixed.replace("priority = 0\n", 'priority = 0\nserver = "rt"\n')
    with pytest.raises(ScenarioFileError) as e:
        load_scenario(write(tmp_path, text))
    assert "'workload.classes.realtime.server' = 'rt': names a server, but" in str(e.value)


def test_sweep_table_is_parsed(tmp_path: Path) -> None:
    s = load_scenario(
        write(
            tmp_path, TWO + "\n[sweep]\nmax_num_seqs = [8, 32]\nmax_num_batched_tokens = [2048]\n"
        )
    )
    assert s.sweep == {"max_num_seqs": (8, 32), "max_num_batched_tokens": (2048,)}


def test_histograms_of_two_instances_add_up() -> None:
    a = Histogram(3, 0.6, ((0.1, 1), (1.0, 3), (float("inf"), 3)))
    b = Histogram(2, 2.5, ((0.1, 0), (1.0, 1), (float("inf"), 2)))
    both = a.plus(b)
    assert both.count == 5
    assert both.sum == pytest.approx(3.1)
    assert both.buckets == ((0.1, 1), (1.0, 4), (float("inf"), 5))
    assert both.minus(b).buckets == a.buckets
