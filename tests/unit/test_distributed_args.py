"""vLLM's distributed serving options pass from a scenario or profile to the server's command.

The installed vLLM's own parser accepting them is checked in tests/e2e/test_distributed_args.py
(it imports vLLM); here the parser is a stand-in with the same four options as vLLM's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fixtures import vllm_probe
from fixtures.pool import ServerPool
from fixtures.selection import select
from fixtures.server import ServerConfig, VllmServer
from fixtures.session import ScenarioRunner
from fixtures.settings import ROOT, programmatic
from slo.scenario import load_profile

DISTRIBUTED = {
    "tensor_parallel_size": 2,
    "pipeline_parallel_size": 2,
    "data_parallel_size": 2,
    "distributed_executor_backend": "ray",
}
FLAGS = [
    "--tensor-parallel-size",
    "2",
    "--pipeline-parallel-size",
    "2",
    "--data-parallel-size",
    "2",
    "--distributed-executor-backend",
    "ray",
]


def _vllm_like_parser() -> argparse.ArgumentParser:
    """The four options as vLLM 0.32 declares them (short aliases first, as in vLLM)."""
    p = argparse.ArgumentParser()
    p.add_argument("--model")
    p.add_argument("-tp", "--tensor-parallel-size", type=int, default=1)
    p.add_argument("-pp", "--pipeline-parallel-size", type=int, default=1)
    p.add_argument("-dp", "--data-parallel-size", type=int, default=1)
    p.add_argument(
        "--distributed-executor-backend",
        choices=["ray", "mp", "uni", "external_launcher"],
        default=None,
    )
    return p


def test_scenario_server_table_reaches_the_server_config(tmp_path: Path) -> None:
    scenario = (ROOT / "slo" / "scenarios" / "realtime.toml").read_text()
    extra = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in DISTRIBUTED.items())
    path = tmp_path / "tp.toml"
    path.write_text(scenario.replace("max_num_seqs = 8\n", "max_num_seqs = 8\n" + extra, 1))
    s = programmatic("cpu-tiny")
    sel = select(str(path), s)
    args = ScenarioRunner(s, ServerPool(s)).server_config(sel).args
    assert {k: args[k] for k in DISTRIBUTED} == DISTRIBUTED
    assert args["max_num_seqs"] == 8  # the scenario's own args are still there


def test_profile_server_table_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    table = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in DISTRIBUTED.items())
    path.write_text(
        '[h200x4-tp]\ndescription = "4 GPUs"\nmodel = "llama-2-7b"\ndevice = "cuda"\n'
        f'confidence = 0.95\ninconclusive = "fail"\n[h200x4-tp.server]\n{table}'
    )
    assert dict(load_profile("h200x4-tp", path).server) == DISTRIBUTED


def test_command_line_has_the_distributed_flags() -> None:
    argv, unknown = vllm_probe._to_argv(_vllm_like_parser(), dict(DISTRIBUTED))
    assert unknown == [] and argv == FLAGS
    s = programmatic("cpu-tiny")
    base = ScenarioRunner(s, ServerPool(s)).server_config(select("realtime", s))
    config = ServerConfig.build(base.model, {**base.args, **DISTRIBUTED}, dict(base.env))
    command = VllmServer(config, log_path=Path("unused.log"), argv=tuple(argv)).command
    joined = " ".join(command)
    assert " ".join(FLAGS) in joined
    assert command[command.index("--tensor-parallel-size") + 1] == "2"
    assert command[command.index("--distributed-executor-backend") + 1] == "ray"
