"""The end-to-end tests' shared vLLM: one server started apart from the suite, as a deployed
service is, for every test that points the suite at an endpoint (--slo-endpoint). A start costs
45-65 s on 2 cores; each such test had its own."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from fixtures.engine_args import check_engine_args
from fixtures.server import VllmServer
from tests.e2e.helpers import DEPLOYED_KEY, realtime_server_config


@pytest.fixture(scope="session")
def deployed_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """CPU vLLM with the realtime config, wanting ``DEPLOYED_KEY``; its log is the folder's
    ``vllm.log``. Prefix caching is off: the A/B tests send each prompt to both arms of this one
    server, and a cache hit in the second arm of a pair would favour it. Tests that use it count
    vLLM's metrics as differences over their own run: earlier tests' requests are in them."""
    config = realtime_server_config()
    args = {**config.args, "enable_prefix_caching": False}
    config = type(config).build(config.model, args, dict(config.env), python=config.python)
    argv = check_engine_args(sys.executable, config.args, origin="test").argv
    log = tmp_path_factory.mktemp("deployed-vllm") / "vllm.log"
    with VllmServer(config, log_path=log, argv=argv, api_key=DEPLOYED_KEY) as server:
        yield server
