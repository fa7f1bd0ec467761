"""A variant of the bundled tiny Llama whose byte-level BPE tokenizer learned its merges from
prose: this repository's own documentation, offline.

The bundled model's tokenizer (fixtures/models/build_tokenizer.py) is byte-level BPE too, but its
merges come from generated pseudo-words. Trained on real text, the variant's vocabulary holds
the pieces of words and punctuation that prose has; both keep the 256 single-byte tokens, so a
dummy-weight model that emits random ids emits partial UTF-8 characters with either, and a
streamed chunk can then carry no text yet (benchmarks/ttft_definitions.py measures what that
does to TTFT). Same config.json (vocab_size, bos/eos ids), chat template and generation config.

Usage: python benchmarks/bytelevel_model.py OUT_DIR [--corpus PATH ...]
The corpus defaults to README.md and docs/**/*.md (not the measured results). Prints what it
built; serve OUT_DIR as a model folder (--load-format dummy), e.g. with
``benchmarks/ttft_definitions.py --serve OUT_DIR``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.models.build_tokenizer import build_tokenizer  # noqa: E402

TINY = ROOT / "fixtures" / "models" / "tiny-llama"
COPIED = ("config.json", "generation_config.json")


def default_corpus() -> list[Path]:
    docs = sorted(
        p for p in (ROOT / "docs").rglob("*.md") if "results" not in p.relative_to(ROOT).parts
    )
    return [ROOT / "README.md", *docs]


def lines(paths: Sequence[Path]) -> Iterator[str]:
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield line


def build(out: Path, corpus: Sequence[Path]) -> dict[str, object]:
    """The model folder at ``out``; what it holds, for the record."""
    config = json.loads((TINY / "config.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        shutil.copyfile(TINY / name, out / name)
    build_tokenizer(
        out,
        config["vocab_size"],
        bos_token_id=config["bos_token_id"],
        eos_token_id=config["eos_token_id"],
        corpus=lines(corpus),
    )
    vocab = json.loads((out / "tokenizer.json").read_text())
    added = vocab["added_tokens"]
    return {
        "folder": str(out),
        "vocab_size": config["vocab_size"],
        "learned": len(vocab["model"]["vocab"]),
        "fillers": sum(1 for a in added if a["content"].startswith("<tok_")),
        "corpus_files": len(corpus),
        "corpus_bytes": sum(p.stat().st_size for p in corpus),
        "pre_tokenizer": vocab["pre_tokenizer"]["type"],
        "decoder": vocab["decoder"]["type"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="Folder to write the model into")
    ap.add_argument(
        "--corpus", type=Path, nargs="+", help="Text files to train on (default: README, docs)"
    )
    a = ap.parse_args()
    corpus = a.corpus or default_corpus()
    if missing := [str(p) for p in corpus if not p.is_file()]:
        ap.error(f"--corpus: no such file: {', '.join(missing)}")
    for k, v in build(a.out, corpus).items():
        print(f"{k}: {v}")


if __name__ == "__main__":
    main()
