"""GPU slices for pytest-xdist workers (fixtures/gpus.py) and their use by the server config."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures import gpus
from fixtures.pool import ServerPool
from fixtures.selection import select
from fixtures.session import ScenarioRunner
from fixtures.settings import programmatic
from slo.errors import GpuAssignmentError


@pytest.mark.parametrize(
    "args,expected",
    [
        ({}, 1),
        ({"max_num_seqs": 8}, 1),
        ({"tensor_parallel_size": 2}, 2),
        ({"tensor_parallel_size": 2, "pipeline_parallel_size": 2}, 4),
        ({"tensor_parallel_size": 4, "data_parallel_size": 2}, 8),
    ],
)
def test_gpus_per_server(args: dict[str, int], expected: int) -> None:
    assert gpus.gpus_per_server(args) == expected


@pytest.mark.parametrize("value", [0, -1, "2", True, 1.5])
def test_bad_parallel_size_is_named(value: object) -> None:
    with pytest.raises(GpuAssignmentError, match=rf"tensor_parallel_size = {value!r}: expected"):
        gpus.gpus_per_server({"tensor_parallel_size": value})


@pytest.mark.parametrize(
    "value,expected",
    [
        ("0,1, 2", ("0", "1", "2")),
        ("", ()),
        ("-1", ()),
        ("GPU-8f2a,GPU-77c1", ("GPU-8f2a", "GPU-77c1")),
    ],
)
def test_parse_visible(value: str, expected: tuple[str, ...]) -> None:
    assert gpus.parse_visible(value) == expected


def test_the_parents_cuda_visible_devices_wins_over_nvidia_smi() -> None:
    def query() -> tuple[str, ...]:
        raise AssertionError("nvidia-smi must not be asked when CUDA_VISIBLE_DEVICES is set")

    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, query) == ("4", "5", "6", "7")
    assert gpus.visible_gpus({}, lambda: ("0", "1")) == ("0", "1")


def test_workers_get_consecutive_groups() -> None:
    visible = ("4", "5", "6", "7")
    assert [gpus.worker_gpus(visible, w, 2, 2) for w in range(2)] == [("4", "5"), ("6", "7")]
    assert [gpus.worker_gpus(visible, w, 4, 1) for w in range(4)] == [(g,) for g in visible]


@given(
    n_gpus=st.integers(0, 16),
    workers=st.integers(1, 8),
    per_server=st.integers(1, 8),
)
def test_no_two_workers_share_a_gpu(n_gpus: int, workers: int, per_server: int) -> None:
    visible = tuple(f"GPU-{i}" for i in range(n_gpus))
    if workers * per_server > n_gpus:
        with pytest.raises(GpuAssignmentError, match=f"{n_gpus} are visible"):
            gpus.worker_gpus(visible, 0, workers, per_server)
        return
    slices = [gpus.worker_gpus(visible, w, workers, per_server) for w in range(workers)]
    assert all(len(s) == per_server for s in slices)
    used = [g for s in slices for g in s]
    assert len(used) == len(set(used)) and set(used) <= set(visible)


def test_too_few_gpus_says_how_many_and_the_fix() -> None:
    with pytest.raises(GpuAssignmentError) as e:
        gpus.worker_gpus(("0", "1", "2"), 1, 2, 2)
    msg = str(e.value)
    assert "2 pytest-xdist workers x 2 GPU(s) per server = 4 GPUs needed, but 3 are visible" in msg
    assert "0,1,2" in msg and "-n 1 or fewer" in msg


def test_worker_index() -> None:
    assert gpus.worker_index("gw0") == 0 and gpus.worker_index("gw12") == 12
    with pytest.raises(GpuAssignmentError, match="'master'"):
        gpus.worker_index("master")


def test_a_server_takes_the_first_gpus_of_its_workers_slice() -> None:
    assert gpus.server_devices(("4", "5", "6", "7"), {"tensor_parallel_size": 2}) == "4,5"
    assert gpus.largest_server([{}, {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}]) == 4
    with pytest.raises(GpuAssignmentError, match="needs 4 GPUs but this worker holds 2"):
        gpus.server_devices(("0", "1"), {"tensor_parallel_size": 4})


def test_worker_gpus_reach_the_vllm_process_environment() -> None:
    s = programmatic("h200-llama2-7b", gpus=("6", "7"))
    config = ScenarioRunner(s, ServerPool(s)).server_config(select("realtime", s))
    assert dict(config.env)["CUDA_VISIBLE_DEVICES"] == "6"
    plain = programmatic("h200-llama2-7b")
    config = ScenarioRunner(plain, ServerPool(plain)).server_config(select("realtime", plain))
    assert "CUDA_VISIBLE_DEVICES" not in dict(config.env)
