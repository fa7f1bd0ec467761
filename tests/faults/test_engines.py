"""Engines other than vLLM: what the probe finds, and what the requests then carry.

The fault injector stands in for the answers that vLLM never gives (it takes its own extensions
and always streams usage): HTTP 422 for vLLM's fields, as ``transformers serve`` answers, and a
stream without a usage chunk. tests/e2e/test_second_engine.py meets the real second engine.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from fixtures.engines import check_features, features_for, probe
from fixtures.metrics import missing_figures
from fixtures.models import MODELS_DIR
from fixtures.runner import OPENAI, VLLM, Target, count_tokens, run_plan
from fixtures.targets import served_model
from slo.errors import EndpointError, SuiteError
from tests.faults.injector import Fault, FaultInjector
from tests.faults.test_runner_faults import MODEL, kind, open_plan

TINY = str(MODELS_DIR / "tiny-llama")
# What transformers serve refuses (its answer: "Unexpected fields in the request: {...}").
REFUSED = frozenset({"ignore_eos", "priority"})


def test_the_probe_finds_what_the_server_refuses() -> None:
    with FaultInjector(reject_fields=REFUSED) as inj:
        f = probe(inj.url, MODEL, None, "chat")
    assert (f.engine, f.ignore_eos, f.priority, f.min_tokens, f.usage) == (
        "openai",
        False,
        False,
        True,
        True,
    )
    assert [name for name, _ in f.rejected] == ["ignore_eos", "priority"]
    assert "HTTP 422: " in f.rejected[0][1] and "Unexpected fields" in f.rejected[0][1]
    # Where ignore_eos is refused and min_tokens taken, min_tokens fixes the output length.
    assert f.fixed_length and f.sent == ("min_tokens",)
    assert "refused: ignore_eos, priority" in f.describe()
    # One plain request, then one per extension, each alone.
    extras = [set(s.body) - {"model", "max_tokens", "stream", "stream_options", "messages"}
              for s in inj.seen]  # fmt: skip
    assert extras == [set(), {"ignore_eos"}, {"min_tokens"}, {"priority"}]


def test_a_server_that_takes_every_extension_is_sent_them() -> None:
    with FaultInjector() as inj:
        f = probe(inj.url, MODEL, None, "completions")
        # The same body as vLLM's (min_tokens is taken but not needed with ignore_eos).
        assert dataclasses.replace(f, found_by="setting", min_tokens=False) == VLLM
        assert f.engine == "vllm" and f.sent == VLLM.sent == ("ignore_eos", "priority")
        # --slo-engine openai: one plain request (does the server work, does it send usage?)
        plain = features_for("openai", inj.url, MODEL, None, "chat", started_vllm=False)
    assert plain == OPENAI and len(inj.seen) == 5
    assert f.found_by == "probe" and inj.seen[0].path == "/v1/completions"


def test_with_vllm_set_nothing_is_probed() -> None:
    with FaultInjector(reject_fields=REFUSED) as inj:
        assert features_for("vllm", inj.url, MODEL, None, "chat", started_vllm=False) == VLLM
    assert inj.seen == []


def test_a_server_that_cannot_answer_a_plain_request_stops_the_run() -> None:
    with (
        FaultInjector(default=Fault("status", status=503)) as inj,
        pytest.raises(EndpointError) as e,
    ):
        probe(inj.url, "wrong-model", None, "chat")
    assert str(e.value).startswith(
        f"--slo-endpoint {inj.url}: a plain chat request for model 'wrong-model' got HTTP 503"
    )
    assert "--slo-served-model" in str(e.value)


def test_requests_carry_only_what_the_server_takes() -> None:
    base = open_plan(["a b", "c d"])
    plan = dataclasses.replace(
        base, requests=tuple(dataclasses.replace(r, priority=1) for r in base.requests)
    )
    with FaultInjector(reject_fields=REFUSED) as inj:
        features = probe(inj.url, MODEL, None, "chat")
        inj.seen.clear()
        refused = asyncio.run(run_plan(plan, Target(inj.url, MODEL)))  # vLLM's body
        plain = asyncio.run(run_plan(plan, Target(inj.url, MODEL, features=features)))
    assert {kind(r) for r in refused} == {"HTTP 422"}
    assert all(r.ok and r.output_tokens == 4 for r in plain)
    sent = [s.body for s in inj.seen[2:]]
    assert all("ignore_eos" not in b and "priority" not in b and b["min_tokens"] == 4 for b in sent)


def test_a_scenario_with_priorities_is_refused_before_the_run() -> None:
    base = open_plan(["a"])
    plan = dataclasses.replace(base, requests=(dataclasses.replace(base.requests[0], priority=0),))
    check_features(plan, VLLM, "mixed")  # vLLM takes priorities
    check_features(open_plan(["a"]), OPENAI, "realtime")  # no priorities: nothing needed
    refused = dataclasses.replace(OPENAI, rejected=(("priority", "HTTP 422: Unexpected fields"),))
    with pytest.raises(EndpointError) as e:
        check_features(plan, refused, "mixed")
    assert str(e.value) == (
        "scenario 'mixed' gives requests priorities, and this server does not take vLLM's "
        "'priority' field (HTTP 422: Unexpected fields): run it against vLLM, or choose a "
        "scenario without priority classes"
    )


def test_without_usage_the_output_is_counted_by_the_tokenizer() -> None:
    plan = open_plan(["x y"], api="completions")
    with FaultInjector(usage=False, default=Fault(chunks=3)) as inj:
        features = probe(inj.url, MODEL, None, "completions")
        assert features.usage is False and "counted by the tokenizer" in features.describe()
        (counted,) = asyncio.run(run_plan(plan, Target(inj.url, MODEL, count_with=TINY)))
        (uncounted,) = asyncio.run(run_plan(plan, Target(inj.url, MODEL)))
    # The injector streams " tok0", " tok1", " tok2".
    assert counted.ok and counted.output_tokens == count_tokens(TINY, " tok0 tok1 tok2") > 0
    assert counted.prompt_tokens is None  # not guessed
    assert kind(uncounted) == "NoUsage"


def test_no_vllm_metrics_is_said_not_fatal(injector: FaultInjector) -> None:
    # The injector answers only completions: /metrics is a 404, as on transformers serve.
    assert missing_figures(f"{injector.url}/metrics") == f"{injector.url}/metrics answered HTTP 404"


def test_a_given_served_model_is_not_looked_up() -> None:
    # /v1/models of the injector is a 404: asking it would fail.
    with FaultInjector() as inj:
        with pytest.raises(SuiteError, match="--slo-served-model NAME"):
            served_model(inj.url, None)
        assert served_model(inj.url, None, "my-model") == ("my-model", None)
