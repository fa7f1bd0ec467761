"""Bundled model folders, the tokenizer builder and the model resolver."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoConfig, AutoTokenizer

import fixtures.models as models_pkg
import fixtures.models.build_tokenizer as bt_module
from fixtures.models import BUNDLED_MODELS, MODELS_DIR, ModelSpec, resolve_model
from fixtures.models.build_tokenizer import CHAT_TEMPLATE, build_tokenizer, main
from slo.errors import ModelError

SMALL_VOCAB = 320  # 256 bytes + 3 specials + a few merges: builds in well under a second
SHAPE_ONLY = ("llama-2-7b", "llama-3.1-8b")


def _load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _check_tokenizer(folder: Path, vocab_size: int, bos: int, eos: int) -> None:
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert len(tok) == vocab_size
    assert (tok.unk_token_id, tok.bos_token_id, tok.eos_token_id) == (0, bos, eos)
    assert tok.chat_template == CHAT_TEMPLATE
    # Random weights can emit any id: each must decode to some text.
    empty = [i for i in range(vocab_size) if tok.decode([i]) == ""]
    assert empty == []
    ids = tok("bata kelo mi")["input_ids"]
    assert ids[0] == bos  # Llama-like: a plain prompt starts with <s>
    assert tok.decode(ids, skip_special_tokens=True) == "bata kelo mi"
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    assert prompt == "<s>[user] hi\n[assistant] "


def _shape_only_folder(folder: Path, vocab_size: int = SMALL_VOCAB, **overrides: Any) -> Path:
    """A Llama-2-7B config with a small vocabulary, so building its tokenizer is fast."""
    folder.mkdir(parents=True)
    config = _load_json(MODELS_DIR / "llama-2-7b" / "config.json")
    config.update(vocab_size=vocab_size, **overrides)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    shutil.copyfile(
        MODELS_DIR / "llama-2-7b" / "generation_config.json", folder / "generation_config.json"
    )
    return folder


def _small_bundled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point the bundled-models folder at a copy whose llama-2-7b has a small vocabulary."""
    fake = tmp_path / "bundled"
    _shape_only_folder(fake / "llama-2-7b")
    monkeypatch.setattr(models_pkg, "MODELS_DIR", fake)
    return fake


# --- bundled folders ---------------------------------------------------------------------------


def test_bundled_names_have_folders() -> None:
    assert BUNDLED_MODELS == ("tiny-llama", "llama-2-7b", "llama-3.1-8b")
    for name in BUNDLED_MODELS:
        assert (MODELS_DIR / name / "config.json").is_file()
        assert (MODELS_DIR / name / "generation_config.json").is_file()


def test_tiny_llama_is_complete_small_and_weightless() -> None:
    folder = MODELS_DIR / "tiny-llama"
    config = _load_json(folder / "config.json")
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["hidden_size"], config["intermediate_size"]) == (256, 512)
    assert (config["num_hidden_layers"], config["num_attention_heads"]) == (2, 4)
    assert config["num_key_value_heads"] == 4
    assert config["max_position_embeddings"] == 4096
    assert config["torch_dtype"] == "float32"
    assert config["tie_word_embeddings"] is False
    names = {p.name for p in folder.iterdir()}
    assert {"tokenizer.json", "tokenizer_config.json"} <= names
    assert not [n for n in names if n.endswith((".safetensors", ".bin"))]
    assert sum(p.stat().st_size for p in folder.iterdir()) < 1_000_000


def test_tiny_llama_tokenizer_covers_the_vocabulary() -> None:
    folder = MODELS_DIR / "tiny-llama"
    config = _load_json(folder / "config.json")
    _check_tokenizer(folder, config["vocab_size"], config["bos_token_id"], config["eos_token_id"])


SHAPES: dict[str, dict[str, Any]] = {
    "llama-2-7b": {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-5,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    },
    "llama-3.1-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        "rms_norm_eps": 1e-5,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    },
}


@pytest.mark.parametrize("name", SHAPE_ONLY)
def test_shape_only_folders_hold_only_the_real_shapes(name: str) -> None:
    folder = MODELS_DIR / name
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "generation_config.json"]
    config = _load_json(folder / "config.json")
    assert {k: config[k] for k in SHAPES[name]} == SHAPES[name]
    generation = _load_json(folder / "generation_config.json")
    assert generation == {
        "bos_token_id": config["bos_token_id"],
        "eos_token_id": config["eos_token_id"],
    }
    # Without it, transformers 5 takes a >100k-token local tokenizer for a Mistral one and warns.
    assert "transformers_version" in config
    loaded = AutoConfig.from_pretrained(str(folder))  # transformers reads the shapes as meant
    assert loaded.head_dim == 128
    assert loaded.vocab_size == SHAPES[name]["vocab_size"]


# --- build_tokenizer -----------------------------------------------------------------------------


def test_build_is_deterministic(tmp_path: Path) -> None:
    build_tokenizer(tmp_path / "a", 1024)
    build_tokenizer(tmp_path / "b", 1024)
    build_tokenizer(tmp_path / "c", 1024, seed=1)
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert "tokenizer.json" in files
    assert files == sorted(p.name for p in (tmp_path / "b").iterdir())
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() != (
        tmp_path / "c" / "tokenizer.json"
    ).read_bytes()


def test_build_small_vocab_covers_every_id(tmp_path: Path) -> None:
    build_tokenizer(tmp_path, SMALL_VOCAB, model_max_length=777)
    _check_tokenizer(tmp_path, SMALL_VOCAB, 1, 2)
    assert _load_json(tmp_path / "tokenizer_config.json")["model_max_length"] == 777


def test_build_places_late_special_ids_like_llama_3(tmp_path: Path) -> None:
    # Llama-3 puts bos/eos after the learned tokens (128000/128001); same layout, smaller.
    build_tokenizer(tmp_path, 400, bos_token_id=300, eos_token_id=301)
    _check_tokenizer(tmp_path, 400, 300, 301)
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    assert tok.convert_ids_to_tokens(399) == "<tok_399>"  # unlearned ids are plain-text fillers


def test_build_learns_its_merges_from_a_given_corpus(tmp_path: Path) -> None:
    # Prose instead of pseudo-words (benchmarks/bytelevel_model.py): its words become tokens.
    corpus = ["the prefix cache serves the prompt from its blocks."] * 50
    build_tokenizer(tmp_path, 512, corpus=corpus)
    _check_tokenizer(tmp_path, 512, 1, 2)
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    assert len(tok.encode(" prefix cache", add_special_tokens=False)) == 2
    assert tok.convert_ids_to_tokens(511) == "<tok_511>"  # a small corpus: fillers after it


@pytest.mark.parametrize(
    ("vocab", "bos", "eos", "needle"),
    [
        (512, 1, 1, "must differ"),
        (512, 1, 512, "must differ and lie in"),
        (512, 0, 2, "must differ"),
        (512, 5, 6, "needs 257 ids"),
        (200, 1, 2, "needs 259 ids"),
    ],
)
def test_build_rejects_ids_it_cannot_place(
    tmp_path: Path, vocab: int, bos: int, eos: int, needle: str
) -> None:
    with pytest.raises(ModelError, match=needle):
        build_tokenizer(tmp_path, vocab, bos_token_id=bos, eos_token_id=eos)
    assert not tmp_path.joinpath("tokenizer.json").exists()


def test_build_command_line(tmp_path: Path) -> None:
    main([str(tmp_path / "out"), "--vocab-size", str(SMALL_VOCAB), "--model-max-length", "512"])
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "out"))
    assert len(tok) == SMALL_VOCAB
    assert tok.model_max_length == 512


# --- resolve_model: bundled names ----------------------------------------------------------------


def test_resolve_tiny_llama_uses_the_repo_folder(tmp_path: Path) -> None:
    spec = resolve_model("tiny-llama", cache_dir=tmp_path)
    assert spec == ModelSpec(
        name="tiny-llama",
        path=str(MODELS_DIR / "tiny-llama"),
        dummy_weights=True,
        bundled=True,
        max_position_embeddings=4096,
    )
    assert not any(tmp_path.iterdir())  # nothing to build


def test_resolve_shape_only_builds_once_and_reuses(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bundled = _small_bundled(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    spec = resolve_model("llama-2-7b", cache_dir=cache)
    folder = Path(spec.path)
    assert folder.parent == cache
    assert folder.name.startswith("llama-2-7b-")
    assert (spec.name, spec.dummy_weights, spec.bundled) == ("llama-2-7b", True, True)
    assert spec.max_position_embeddings == 4096
    for f in ("config.json", "generation_config.json"):
        assert (folder / f).read_bytes() == (bundled / "llama-2-7b" / f).read_bytes()
    _check_tokenizer(folder, SMALL_VOCAB, 1, 2)
    assert _load_json(folder / "tokenizer_config.json")["model_max_length"] == 4096

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("rebuilt a cached tokenizer")

    monkeypatch.setattr(bt_module, "build_tokenizer", no_build)
    assert resolve_model("llama-2-7b", cache_dir=cache) == spec
    assert [p.name for p in cache.iterdir()] == [folder.name]  # no temp folders left


def test_resolve_shape_only_rebuilds_when_config_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bundled = _small_bundled(monkeypatch, tmp_path)
    first = resolve_model("llama-2-7b", cache_dir=tmp_path / "cache")
    config_path = bundled / "llama-2-7b" / "config.json"
    config = _load_json(config_path)
    config["vocab_size"] = SMALL_VOCAB + 8
    config_path.write_text(json.dumps(config), encoding="utf-8")
    second = resolve_model("llama-2-7b", cache_dir=tmp_path / "cache")
    assert second.path != first.path
    assert len(AutoTokenizer.from_pretrained(second.path)) == SMALL_VOCAB + 8


def test_resolve_shape_only_loser_of_a_race_uses_the_winner(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _small_bundled(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    real_build = bt_module.build_tokenizer
    winner: list[ModelSpec] = []
    calls: list[Path] = []

    def racing_build(out_dir: Path, vocab_size: int, **kwargs: Any) -> None:
        calls.append(out_dir)
        if len(calls) == 1:  # another "process" finishes first, while this one is still building
            winner.append(resolve_model("llama-2-7b", cache_dir=cache))
        real_build(out_dir, vocab_size, **kwargs)

    monkeypatch.setattr(bt_module, "build_tokenizer", racing_build)
    loser = resolve_model("llama-2-7b", cache_dir=cache)
    assert loser == winner[0]
    assert len(calls) == 2
    assert [p.name for p in cache.iterdir()] == [Path(loser.path).name]
    _check_tokenizer(Path(loser.path), SMALL_VOCAB, 1, 2)


def test_resolve_shape_only_concurrently(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _small_bundled(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    results: list[ModelSpec] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(resolve_model("llama-2-7b", cache_dir=cache))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(results)) == 1
    assert [p.name for p in cache.iterdir()] == [Path(results[0].path).name]


def test_resolve_reports_partial_cache_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _small_bundled(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    folder = Path(resolve_model("llama-2-7b", cache_dir=cache).path)
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer_config.json").unlink()
    with pytest.raises(ModelError, match=r"has no tokenizer.*Fix: delete that folder"):
        resolve_model("llama-2-7b", cache_dir=cache)


# --- resolve_model: local folders and hub ids ---------------------------------------------------


def test_resolve_local_folder_with_weights(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    shutil.copytree(MODELS_DIR / "tiny-llama", folder)
    (folder / "model.safetensors").write_bytes(b"")
    spec = resolve_model(str(folder), cache_dir=tmp_path / "cache")
    assert spec == ModelSpec("my-model", str(folder), False, False, 4096)


def test_resolve_local_folder_without_weights_is_dummy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shutil.copytree(MODELS_DIR / "tiny-llama", tmp_path / "my-model")
    monkeypatch.chdir(tmp_path)
    spec = resolve_model("./my-model", cache_dir=tmp_path / "cache")
    assert spec == ModelSpec("my-model", str(tmp_path / "my-model"), True, False, 4096)


def test_resolve_local_shape_only_folder_gets_a_tokenizer(tmp_path: Path) -> None:
    folder = _shape_only_folder(tmp_path / "shapes")
    spec = resolve_model(str(folder), cache_dir=tmp_path / "cache")
    assert (spec.name, spec.dummy_weights, spec.bundled) == ("shapes", True, False)
    assert Path(spec.path).parent == tmp_path / "cache"
    _check_tokenizer(Path(spec.path), SMALL_VOCAB, 1, 2)


def test_resolve_hub_id(tmp_path: Path) -> None:
    spec = resolve_model("meta-llama/Llama-3.1-8B", cache_dir=tmp_path)
    assert spec == ModelSpec(
        "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B", False, False, None
    )


def test_resolve_relative_folder_that_looks_like_a_hub_id(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shutil.copytree(MODELS_DIR / "tiny-llama", tmp_path / "org" / "name")
    monkeypatch.chdir(tmp_path)
    spec = resolve_model("org/name", cache_dir=tmp_path / "cache")
    assert spec.path == str(tmp_path / "org" / "name")  # an existing folder wins


# --- resolve_model: errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("./no-such-model", "no such folder"),
        ("/no/such/model", "no such folder"),
        ("~/no-such-model-here", "no such folder"),
        ("tiny-lama", "Did you mean 'tiny-llama'"),
        ("llama", "is not a bundled model"),
        ("a/b/c", "is not a bundled model"),
        ("  ", "is empty"),
    ],
)
def test_resolve_errors_name_value_rule_and_fix(tmp_path: Path, value: str, needle: str) -> None:
    with pytest.raises(ModelError) as info:
        resolve_model(value, cache_dir=tmp_path)
    message = str(info.value)
    assert repr(value) in message
    assert needle in message
    assert "Fix:" in message
    assert "tiny-llama, llama-2-7b, llama-3.1-8b" in message


def test_resolve_folder_without_config(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match=r"has no config\.json.*tiny-llama.*Fix:"):
        resolve_model(str(tmp_path / "empty"), cache_dir=tmp_path / "cache")


def test_resolve_file_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ModelError, match=r"is a file.*Fix:"):
        resolve_model(str(tmp_path / "config.json"), cache_dir=tmp_path / "cache")


def test_resolve_unreadable_config(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match=r"cannot be read as JSON.*Fix:"):
        resolve_model(str(tmp_path / "m"), cache_dir=tmp_path / "cache")


def test_resolve_shape_only_without_vocab_size(tmp_path: Path) -> None:
    folder = _shape_only_folder(tmp_path / "m")
    config = _load_json(folder / "config.json")
    del config["vocab_size"]
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ModelError, match=r"'vocab_size' = None.*Fix:"):
        resolve_model(str(folder), cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_resolve_any_string_gives_a_spec_or_a_model_error(value: str) -> None:
    # The cache dir cannot be created, so an accidental build would also end in ModelError.
    try:
        spec = resolve_model(value, cache_dir=Path("/proc/no-such-cache"))
    except ModelError:
        return
    assert spec.name
    assert spec.path
