"""Reports of a run on another engine: no server figures said plainly, and two engines' runs of
one SLO file side by side (reports/engines.py). Built from the stored sample run
``data/run-new`` (vLLM), with a copy made to look like a run on a server without vLLM's
/metrics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reports.engines import main, write
from reports.signoff import write_signoff
from slo.errors import SuiteError

NEW = Path(__file__).parent / "data" / "run-new"
OTHER = "openai requests (no vLLM extensions; output may end at EOS; by probe; refused: priority)"


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "vllm", tmp_path / "other"
    shutil.copytree(NEW, a)
    shutil.copytree(NEW, b)
    path = b / "realtime" / "summary.json"
    summary = json.loads(path.read_text())
    summary["server"].update(
        endpoint="http://127.0.0.1:9",
        engine="openai",
        requests=OTHER,
        server_figures="http://127.0.0.1:9/metrics answered HTTP 404",
    )
    summary["server_metrics"] = {}
    path.write_text(json.dumps(summary))
    verdicts = json.loads((b / "verdicts.json").read_text())
    for v in verdicts:
        for k in ("estimate", "ci_lower", "ci_upper"):  # the other engine is slower
            v[k] = None if v[k] is None else 2 * v[k]  # None: an unbounded side
    (b / "verdicts.json").write_text(json.dumps(verdicts))
    return a, b


def test_a_run_without_server_figures_says_so(tmp_path: Path) -> None:
    _, b = _runs(tmp_path)
    files = write_signoff([b], tmp_path)
    md, html = files.markdown.read_text(), files.html.read_text()
    said = "No server figures: http://127.0.0.1:9/metrics answered HTTP 404"
    assert said in md and said in html
    assert f"Requests: {OTHER}" in md
    # No empty decomposition or queue timeline in its place.
    assert "TTFT decomposition (" not in md and "TTFT decomposition: not" not in md
    assert "<h3>TTFT decomposition" not in html and "vLLM's queue over time" not in html
    # The vLLM run keeps its decomposition and says nothing of the kind.
    vllm = write_signoff([NEW], tmp_path / "vllm-page").markdown.read_text()
    assert "TTFT decomposition (" in vllm and "No server figures" not in vllm


def test_two_engines_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _runs(tmp_path)
    assert main([str(a), str(b)]) == 0
    data = json.loads((a / "engines.json").read_text())
    assert data["b"]["engine"] == OTHER and data["a"]["engine"] == "vllm"
    assert data["a"]["version"] == "0.32.0" and data["scenarios"] == ["realtime"]
    verdicts = json.loads((NEW / "verdicts.json").read_text())
    assert len(data["rows"]) == len(verdicts)
    for row, v in zip(data["rows"], verdicts, strict=True):
        assert row["objective"] == v["objective"]
        assert row["a"]["estimate"] == v["estimate"] and row["b"]["estimate"] == 2 * v["estimate"]
        assert row["b"]["ci_lower"] == 2 * v["ci_lower"] and row["a"]["n"] == v["n"]
        assert row["a"]["ci_upper"] == v["ci_upper"]  # None where unbounded, as stored
    md = (a / "engines.md").read_text()
    assert md.startswith("## Engines side by side") and "B: run other" in md
    assert "## Engines side by side" in (a / "signoff.md").read_text()
    html = (a / "signoff.html").read_text()
    assert "<section id='engines'>" in html and "A interval" in html
    assert str(a / "engines.json") in capsys.readouterr().out


def test_runs_of_different_request_lists_are_not_compared(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    records = b / "realtime" / "records.jsonl"
    rows = records.read_text().splitlines()
    records.write_text("\n".join(rows[:-1]) + "\n")
    with pytest.raises(SuiteError, match=r"same request list \(50 requests against 49 "):
        write(a, b)
    # As many requests, one of another length.
    changed = json.loads(rows[5])
    changed["max_tokens"] += 1
    records.write_text("\n".join([*rows[:5], json.dumps(changed), *rows[6:]]) + "\n")
    with pytest.raises(SuiteError, match=r"did not send the same request list \(request 5 differs"):
        write(a, b)
    assert not (a / "engines.json").exists()
    assert main([str(a), str(tmp_path / "missing")]) == 2
