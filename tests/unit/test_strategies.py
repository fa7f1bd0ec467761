"""Prompt-mix strategies: exact token counts with the bundled tokenizer, the envelope, mix files."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fixtures.models import resolve_model
from fixtures.strategies import (
    bimodal_lengths,
    corner_mix,
    hypothesis_settings,
    load_mix,
    lognormal_lengths,
    prompt_mixes,
    save_mix,
)
from fixtures.targets import MODEL_CACHE, load_tokenizer
from fixtures.workload import MixRequest, PromptFactory, PromptMix, plan_workload
from slo.errors import SuiteError, WorkloadError
from slo.scenario import SearchEnvelope

ENVELOPE = SearchEnvelope(
    max_prompt_tokens=600, max_output_tokens=32, max_concurrency=6, max_rate=5.0, requests=8
)


@pytest.fixture(scope="module")
def prompts() -> PromptFactory:
    return PromptFactory(load_tokenizer(resolve_model("tiny-llama", cache_dir=MODEL_CACHE)))


def tokens(prompts: PromptFactory, text: str) -> int:
    return len(prompts.tokenizer.encode(text, add_special_tokens=False))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mix=prompt_mixes(ENVELOPE))
@example(mix=corner_mix(ENVELOPE))
def test_mixes_plan_to_exact_token_counts_within_the_envelope(
    prompts: PromptFactory, mix: PromptMix
) -> None:
    plan = plan_workload(mix, prompts)
    assert len(plan.measured) == ENVELOPE.requests
    by_prefix: dict[int, list[str]] = defaultdict(list)
    overhead: dict[int, set[int]] = defaultdict(set)
    wanted = sorted(mix.requests, key=lambda r: r.offset_s or 0.0)
    for planned, want in zip(plan.measured, wanted, strict=True):
        assert tokens(prompts, planned.prompt) == planned.prompt_tokens == want.prompt_tokens
        assert [tokens(prompts, c) for _, c in planned.history] == list(want.history)
        assert [r for r, _ in planned.history] == ["user", "assistant"] * (len(want.history) // 2)
        assert want.prompt_tokens + sum(want.history) <= ENVELOPE.max_prompt_tokens
        assert 1 <= planned.max_tokens <= ENVELOPE.max_output_tokens
        if want.prefix is not None:
            by_prefix[want.prefix].append(planned.prompt)
        # What the server counts: the template adds the same tokens for the same turn count.
        assert planned.expected_prompt_tokens is not None
        content = planned.prompt_tokens + sum(want.history)
        overhead[len(want.history)].add(planned.expected_prompt_tokens - content)
    for i, texts in by_prefix.items():
        k = mix.prefixes[i]
        heads = {" ".join(t.split(" ")[: k + 1]) for t in texts}
        assert len(heads) == 1, f"prefix {i} ({k} tokens) differs between prompts"
        assert tokens(prompts, heads.pop()) == k
    assert all(len(v) == 1 for v in overhead.values()), overhead
    if mix.concurrency is None:
        offsets = [r.offset_s for r in plan.measured]
        assert offsets == sorted(offsets)  # type: ignore[type-var]
        assert plan.streams == ()
    else:
        assert plan.streams == (("mix", mix.concurrency, False),)
        assert 1 <= mix.concurrency <= ENVELOPE.max_concurrency


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_corner_is_the_heaviest_mix_of_the_envelope(api: str) -> None:
    mix = corner_mix(ENVELOPE, api=api)
    assert mix.concurrency == ENVELOPE.max_concurrency and len(mix.requests) == ENVELOPE.requests
    assert {r.prompt_tokens + sum(r.history) for r in mix.requests} == {600}
    assert {r.output_tokens for r in mix.requests} == {ENVELOPE.max_output_tokens}
    turns = [r for r in mix.requests if r.history]
    shared = [r for r in mix.requests if r.prefix is not None]
    assert mix.prefixes == (300,) and len(shared) == (4 if api == "chat" else 8)
    assert len(turns) == (4 if api == "chat" else 0)  # completions have no turns


def test_a_conversation_and_a_shared_prefix_by_hand(prompts: PromptFactory) -> None:
    mix = PromptMix(
        requests=(
            MixRequest(100, 4, 0.0, prefix=0),
            MixRequest(50, 4, 0.5, prefix=0),
            MixRequest(30, 4, 1.0, history=(20, 10, 5, 7)),
        ),
        prefixes=(40,),
        seed=3,
    )
    a, b, c = plan_workload(mix, prompts).measured
    assert [tokens(prompts, r.prompt) for r in (a, b, c)] == [100, 50, 30]
    assert a.prompt.split(" ")[:41] == b.prompt.split(" ")[:41]  # 40 shared words (tokens)
    assert a.prompt.split(" ")[41] != b.prompt.split(" ")[41]
    assert [tokens(prompts, t) for _, t in c.history] == [20, 10, 5, 7]
    assert c.expected_prompt_tokens == prompts.chat_tokens(c.prompt, c.history)
    assert (c.expected_prompt_tokens or 0) > 30 + 42


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_length_distributions_stay_in_range(data: st.DataObject) -> None:
    n = data.draw(lognormal_lengths(200, 1.0, 10, 900))
    assert 10 <= n <= 900
    m = data.draw(bimodal_lengths((16, 64), (800, 1000), 0.3))
    assert 16 <= m <= 64 or 800 <= m <= 1000


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(mix=prompt_mixes(ENVELOPE))
def test_a_saved_mix_replays_exactly(
    prompts: PromptFactory, tmp_path: Path, mix: PromptMix
) -> None:
    path = save_mix(tmp_path / "scn" / "failing-mix.json", mix, ttft_p99_s=1.5)
    again = load_mix(path)
    assert again == mix
    assert plan_workload(again, prompts) == plan_workload(mix, prompts)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("{", "cannot read the mix file"),
        ('{"x": 1}', "no 'mix' object"),
        ('{"mix": {"requests": [{"prompt_tokens": 5}]}}', "not a prompt mix (TypeError"),
        (
            '{"mix": {"requests": [{"prompt_tokens": 5, "output_tokens": 1, "offset_s": 0, '
            '"prefix": 2}]}}',
            "request 0: prefix 2 is not a prefix shorter than the prompt",
        ),
    ],
)
def test_bad_mix_files_say_what_is_wrong(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(WorkloadError) as e:
        load_mix(tmp_path / "m.json")
    assert needle in str(e.value)


def test_hypothesis_profiles() -> None:
    ci = hypothesis_settings("ci")
    assert ci.derandomize and ci.deadline is None and ci.max_examples <= 10
    assert "shrink" not in {p.name for p in ci.phases}
    explore = hypothesis_settings("explore")
    assert explore.max_examples > ci.max_examples
    assert "shrink" in {p.name for p in explore.phases}
    assert hypothesis_settings("signoff").derandomize
    with pytest.raises(SuiteError, match="not one of the suite's: ci, explore, signoff"):
        hypothesis_settings("fast")
