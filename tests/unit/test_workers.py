"""The suite under pytest-xdist (real workers, no server: stored runs are replayed)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.e2e.helpers import REALTIME, run_pytest, run_suite

NEW = Path(__file__).parent / "data" / "run-new"


def test_workers_write_apart_and_the_controller_merges(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = run_suite(
        ["-m", "realtime", "-n", "2", "--dist", "loadscope", f"--slo-replay={NEW}"], run
    )
    assert "2 workers" in proc.stdout
    parts = [p.name for p in (run / "workers").iterdir()]
    assert len(parts) == 1 and parts[0] in ("gw0", "gw1")  # one module: one worker ran it
    verdicts = json.loads((run / "verdicts.json").read_text())
    assert [v["objective"].split(" <")[0] for v in verdicts][:3] == [
        "ttft p50",
        "ttft p99",
        "tpot p99",
    ]
    cases = [c.get("name") for c in ET.parse(run / "junit.xml").getroot().iter("testcase")]
    assert len(cases) == 5
    assert (run / "realtime" / "records.jsonl").exists()
    assert "ttft p50" in (run / "signoff.md").read_text()
    env = json.loads((run / "environment.json").read_text())
    assert env["parts"][0]["scenarios"] == ["realtime"]


def test_a_dist_mode_that_splits_a_scenario_is_refused(tmp_path: Path) -> None:
    proc = run_suite(["-m", "realtime", "-n", "2", f"--slo-replay={NEW}"], tmp_path / "run")
    assert proc.returncode == 4
    assert "--dist load would send one scenario's objective tests to several workers" in (
        proc.stderr
    )
    assert "--dist loadscope" in proc.stderr


def test_too_few_gpus_for_the_workers_fails_every_test_with_the_counts(tmp_path: Path) -> None:
    # /bin/false as vLLM's Python: should the check let a test through, nothing can start.
    proc = run_suite(
        [
            "-m",
            "realtime",
            "-n",
            "2",
            "--dist",
            "loadscope",
            "--slo-profile",
            "h200-llama2-7b",
            "--slo-vllm-python=/bin/false",
            "-rE",
        ],
        tmp_path / "run",
        env={"CUDA_VISIBLE_DEVICES": "3"},
    )
    assert proc.returncode == 1
    # One error per test in the ERRORS section (the short summary repeats them, cut to the
    # terminal's width or, where CI is set, whole).
    errors = proc.stdout.split("short test summary info")[0]
    assert errors.count("2 pytest-xdist workers x 1 GPU(s) per server = 2 GPUs needed") == 5
    assert "but 1 are visible" in proc.stdout


def test_slo_files_found_in_a_folder_share_one_run_folder_across_workers(tmp_path: Path) -> None:
    """No option names the suite, and only the workers collect: the controller must see the
    folder's SLO files itself, or each worker writes a run folder of its own, never merged."""
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "rt.slo.toml").write_text(
        REALTIME.read_text().replace('"realtime"', '"rt"', 1)
    )
    (tmp_path / "test_where.py").write_text(
        "def test_where(slo_settings):\n"
        "    slo_settings.run_dir.mkdir(parents=True, exist_ok=True)\n"
        "    (slo_settings.run_dir / 'where.txt').write_text(str(slo_settings.run_dir))\n"
    )
    proc = run_pytest(["-n", "2", "--dist", "loadscope", "-k", "test_where"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (run,) = (tmp_path / "slo-runs").iterdir()
    (where,) = run.glob("workers/gw*/where.txt")
    assert Path(where.read_text()) == where.parent
    assert (run / "junit.xml").exists()  # the controller's, for the whole run
