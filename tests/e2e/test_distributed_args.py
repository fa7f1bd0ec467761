"""The installed vLLM's own parser accepts the distributed serving options (no server starts)."""

from __future__ import annotations

import sys

import pytest

from fixtures.engine_args import check_engine_args
from slo.errors import EngineArgError
from tests.unit.test_distributed_args import DISTRIBUTED, FLAGS


def test_vllm_accepts_the_distributed_options() -> None:
    check = check_engine_args(sys.executable, {"max_num_seqs": 8, **DISTRIBUTED}, origin="tp.toml")
    assert list(check.argv) == ["--max-num-seqs", "8", *FLAGS]


def test_a_bad_parallel_size_is_vllms_own_error() -> None:
    # (distributed_executor_backend is not checked by the parser: vLLM also takes a class path.)
    with pytest.raises(EngineArgError, match=r"tp\.toml: vLLM .* invalid int value: 'two'"):
        check_engine_args(sys.executable, {"tensor_parallel_size": "two"}, origin="tp.toml")
