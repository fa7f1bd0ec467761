"""Merge run folders of parts of one run (pytest-xdist workers, CI runners) into one run folder.

Under pytest-xdist each worker writes ``<run>/workers/<gwN>/``; the controller merges them into
``<run>`` when the run ends, so the sign-off and JUnit readers see one run. Also a command, for
run folders written apart (e.g. a CI matrix, one runner per scenario):

    python -m reports.merge OUT_DIR PART_DIR [PART_DIR ...]

Each scenario must come from one part: a scenario measured twice would have two sets of numbers
and no right one to keep.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reports.files import write_atomic, write_json
from reports.junit_xml import parse_suites
from reports.run_files import (
    ENVIRONMENT,
    RECORDS,
    SUMMARY,
    read_environment,
    read_starts,
    read_verdicts,
    write_environment,
    write_starts_rows,
    write_verdicts,
)
from slo.errors import ReportMergeError, SuiteError

WORKERS = "workers"


def worker_parts(run_dir: Path) -> list[Path]:
    """``<run>/workers/gw0, gw1, ...`` in worker order (gw10 after gw9)."""
    folder = run_dir / WORKERS
    if not folder.is_dir():
        return []

    def order(p: Path) -> tuple[int, str]:
        m = re.fullmatch(r"gw(\d+)", p.name)
        return (int(m.group(1)) if m else 1 << 30, p.name)

    return sorted((p for p in folder.iterdir() if p.is_dir()), key=order)


def _scenario_folders(part: Path) -> list[Path]:
    return sorted(
        d
        for d in part.iterdir()
        if d.is_dir() and ((d / RECORDS).exists() or (d / SUMMARY).exists())
    )


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ReportMergeError(
            f"{path}: cannot read it as JSON ({e}); the part was cut short or damaged: "
            "merge the other parts, or delete this file to leave it out"
        ) from None


def _merge_junit(parts: Sequence[Path], out: Path) -> None:
    """One <testsuites> holding every part's <testsuite> elements."""
    merged = ET.Element("testsuites", {"name": "pytest tests"})
    for part in parts:
        path = part / "junit.xml"
        if not path.exists():
            continue
        fix = "merge the other parts, or delete this file to leave it out"
        for suite in parse_suites(path, fix, ReportMergeError)[1]:
            suite.set("hostname", suite.get("hostname", "") + f" ({part.name})")
            merged.append(suite)
    if len(merged):
        write_atomic(out / "junit.xml", ET.tostring(merged, encoding="utf-8", xml_declaration=True))


def _scenario_owners(parts: Sequence[Path]) -> dict[str, Path]:
    """Scenario folder name -> the one part that measured it."""
    owner: dict[str, Path] = {}
    for part in parts:
        if not part.is_dir():
            raise ReportMergeError(f"{part}: no such run folder; give folders written by a run")
        for folder in _scenario_folders(part):
            if folder.name in owner:
                raise ReportMergeError(
                    f"scenario folder {folder.name!r} is in both {owner[folder.name]} and {part}: "
                    "one scenario was measured twice. Under pytest-xdist run with --dist "
                    "loadscope so that each scenario module stays in one worker"
                )
            owner[folder.name] = part
    return owner


def _copy_logs(part: Path, out: Path) -> dict[str, str]:
    """Copy the part's server logs; old name -> new path (a clash gets the part's name)."""
    renamed: dict[str, str] = {}
    logs = part / "servers"
    if logs.is_dir():
        for log in sorted(logs.glob("*.log")):
            target = out / "servers" / log.name
            if target.exists():
                target = target.with_name(f"{part.name}-{log.name}")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(log, target)
            renamed[log.name] = str(target)
    return renamed


def _part_starts(part: Path, renamed: Mapping[str, str]) -> list[dict[str, Any]]:
    """The part's server starts, each marked with the part and pointing at its copied log."""
    starts = []
    for start in read_starts(part):
        start["part"] = part.name
        if "log" in start:
            start["log"] = renamed.get(Path(str(start["log"])).name, start["log"])
        starts.append(start)
    return starts


def _part_entry(part: Path, owner: Mapping[str, Path]) -> dict[str, Any]:
    """What the merged environment.json says of one part: its scenarios and GPUs."""
    env = read_environment(part)
    return {
        "part": part.name,
        "scenarios": sorted(n for n, p in owner.items() if p == part),
        "cuda_visible_devices": env.get("cuda_visible_devices"),
        "gpus": env.get("gpus", []),
    }


def _merge_benchmarks(parts: Sequence[Path], out: Path) -> None:
    """pytest-benchmark's entries of every part, in part order, under the first part's header."""
    benchmarks: list[Any] = []
    bench_doc: dict[str, Any] | None = None
    for part in parts:
        if (part / "benchmark.json").exists():
            doc = _read(part / "benchmark.json")
            if isinstance(doc, dict):
                bench_doc = bench_doc or doc
                benchmarks += doc.get("benchmarks", [])
    if bench_doc is not None:
        write_json(out / "benchmark.json", {**bench_doc, "benchmarks": benchmarks})


def merge_runs(parts: Sequence[Path], out: Path) -> Path:
    """Merge the part run folders into ``out`` and return it.

    Scenario folders are copied, server logs copied (a clashing name gets the part's name in
    front), ``starts.json``, ``verdicts.json`` and pytest-benchmark's entries concatenated in part
    order, ``environment.json`` taken from the first part with each part's GPUs added, and the
    parts' ``junit.xml`` combined unless ``out`` already has one (pytest-xdist's controller
    writes the whole run's).
    """
    if not parts:
        raise ReportMergeError(f"nothing to merge into {out}: give at least one part run folder")
    owner = _scenario_owners(parts)
    out.mkdir(parents=True, exist_ok=True)
    for name, part in owner.items():
        shutil.copytree(part / name, out / name, dirs_exist_ok=True)

    starts: list[dict[str, Any]] = []
    verdicts: list[Any] = []
    workers: list[dict[str, Any]] = []
    for part in parts:
        starts += _part_starts(part, _copy_logs(part, out))
        verdicts += read_verdicts(part)
        workers.append(_part_entry(part, owner))
    if starts:
        write_starts_rows(out, starts)
    if verdicts:
        write_verdicts(out, verdicts)
    _merge_benchmarks(parts, out)
    first = next((p for p in parts if (p / ENVIRONMENT).exists()), None)
    if first is not None:
        write_environment(out, {**read_environment(first), "parts": workers})
    if not (out / "junit.xml").exists():
        _merge_junit(parts, out)
    return out


def merge_workers(run_dir: Path) -> bool:
    """Merge ``<run>/workers/*`` into ``<run>``; False when there are no worker folders."""
    parts = worker_parts(run_dir)
    if not parts:
        return False
    merge_runs(parts, run_dir)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reports.merge",
        description="Merge run folders written by parts of one run into one run folder.",
    )
    p.add_argument("out", type=Path, metavar="OUT_DIR", help="folder for the merged run")
    p.add_argument("parts", type=Path, nargs="+", metavar="PART_DIR", help="run folders to merge")
    args = p.parse_args(argv)
    try:
        print(merge_runs(args.parts, args.out))
    except SuiteError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
