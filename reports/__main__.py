"""``python -m reports RUN_DIR [RUN_DIR ...] [--out DIR] [--junit]``

Renders the sign-off (signoff.html, signoff.md) of stored run folders: the first is the
candidate, the others its baselines (release N-1, ...). ``--junit`` also writes the candidate's
JUnit (slo-junit.xml) for CI readers.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from reports.junit_report import DEFAULT_NAME, write_junit
from reports.signoff import write_signoff
from slo.errors import SuiteError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m reports",
        description="Render the SLO sign-off report of stored run folders.",
    )
    p.add_argument(
        "run_dirs",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="run folders (slo-runs/...): the first is the candidate, the others baselines",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder for signoff.html and signoff.md (default: the candidate run folder)",
    )
    p.add_argument(
        "--junit",
        action="store_true",
        help=f"also write the candidate's JUnit ({DEFAULT_NAME}) for CI readers",
    )
    p.add_argument(
        "--inconclusive",
        choices=("failure", "skipped"),
        default="failure",
        help="how the JUnit reports an INCONCLUSIVE objective (default: failure)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        files = write_signoff(args.run_dirs, args.out)
        written = [files.html, files.markdown]
        if args.junit:
            out = args.out / DEFAULT_NAME if args.out is not None else None
            written.append(write_junit(args.run_dirs[0], out, inconclusive=args.inconclusive))
    except SuiteError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
