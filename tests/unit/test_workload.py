"""Workload planning: exact prompt lengths with the bundled tokenizer, arrivals, determinism."""

from __future__ import annotations

import itertools
import random
import statistics
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.models import resolve_model
from fixtures.targets import MODEL_CACHE, load_tokenizer
from fixtures.workload import PromptFactory, arrival_offsets, plan_workload
from slo.scenario import load_scenario


@pytest.fixture(scope="module")
def prompts() -> PromptFactory:
    return PromptFactory(load_tokenizer(resolve_model("tiny-llama", cache_dir=MODEL_CACHE)))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 1500), seed=st.integers(0, 2**32))
def test_prompts_have_exactly_the_asked_token_count(
    prompts: PromptFactory, n: int, seed: int
) -> None:
    text = prompts.prompt(n, random.Random(seed))
    assert len(prompts.tokenizer.encode(text, add_special_tokens=False)) == n


def test_chat_token_count_includes_the_template(prompts: PromptFactory) -> None:
    text = prompts.prompt(100, random.Random(0))
    assert (prompts.chat_tokens(text) or 0) > 100


def test_poisson_offsets_have_the_asked_rate() -> None:
    offsets = arrival_offsets("poisson", 4.0, 4000, random.Random(7))
    gaps = [b - a for a, b in itertools.pairwise(offsets)]  # type: ignore[operator]
    assert statistics.mean(gaps) == pytest.approx(0.25, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(0.25, rel=0.1)  # exponential: sd = mean
    assert arrival_offsets("constant", 4.0, 3, random.Random(0)) == [0.0, 0.25, 0.5]
    assert arrival_offsets("closed", None, 2, random.Random(0)) == [None, None]


def test_plan_is_deterministic_and_marks_warmup(prompts: PromptFactory) -> None:
    w = load_scenario("realtime").workload
    a = plan_workload(w, prompts, max_requests=20)
    b = plan_workload(w, prompts, max_requests=20)
    assert a == b
    assert len(a.warmup) == w.warmup_requests and len(a.measured) == 20
    assert all(r.offset_s is None for r in a.warmup)
    assert [r.offset_s for r in a.measured] == sorted(r.offset_s for r in a.measured)  # type: ignore[type-var]
    lengths = w.classes[0].prompt_tokens
    assert all(lengths.min <= r.prompt_tokens <= lengths.max for r in a.requests)
    assert len({r.prompt for r in a.requests}) == len(a.requests)  # no accidental prefix hits
    c = plan_workload(replace(w, seed=w.seed + 1), prompts, max_requests=20)
    assert [r.prompt_tokens for r in c.requests] != [r.prompt_tokens for r in a.requests]


def test_the_request_cap_leaves_background_classes_running(prompts: PromptFactory) -> None:
    # A background class keeps the server busy until the foreground is done; capping it too
    # would let it run dry early and measure the foreground on a quieter server.
    w = load_scenario("mixed").workload
    plan = plan_workload(w, prompts, max_requests=10)
    by_class = {
        c.name: sum(1 for r in plan.measured if r.request_class == c.name) for c in w.classes
    }
    background = {c.name: c.requests for c in w.classes if c.background}
    assert background and all(by_class[name] == n for name, n in background.items())
    assert all(by_class[c.name] == 10 for c in w.classes if not c.background)
