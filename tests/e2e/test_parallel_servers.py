"""Two pytest-xdist workers start vLLM at the same moment, with vLLM's default port taken: the
kernel picks each server's port (``--port 0``, read back), so nothing collides."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

from fixtures.settings import ROOT
from tests.e2e.helpers import group_alive, run_suite

TAKEN = 8000
"""vLLM's default port; a harness that fell back to it would collide here."""


@contextlib.contextmanager
def port_taken(port: int) -> Iterator[None]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(OSError):  # already taken by someone else: just as good
            sock.bind(("127.0.0.1", port))
            sock.listen()
        yield
    finally:
        sock.close()


def test_two_xdist_workers_start_servers_at_once(tmp_path: Path) -> None:
    scenario = ROOT / "slo" / "scenarios" / "realtime.toml"
    for name in ("test_one.py", "test_two.py"):  # one module per worker (--dist loadfile)
        (tmp_path / name).write_text(
            "import pytest\n"
            f"pytestmark = pytest.mark.scenario({str(scenario)!r})\n"
            "def test_objective(slo_check, objective):\n    slo_check(objective)\n"
        )
    reports = tmp_path / "reports"
    with port_taken(TAKEN):
        proc = run_suite(
            [
                "-p",
                "fixtures.plugin",
                "-n",
                "2",
                "--dist",
                "loadfile",
                "--slo-max-requests=10",
                str(tmp_path / "test_one.py"),
                str(tmp_path / "test_two.py"),
            ],
            reports,
            cwd=tmp_path,
        )
    assert "2 workers" in proc.stdout
    # Each worker wrote into its own sub-folder (workers/gwN) of the one run folder.
    starts = {
        w: json.loads((reports / "workers" / w / "servers" / "starts.json").read_text())
        for w in ("gw0", "gw1")
    }
    assert [len(s) for s in starts.values()] == [1, 1]
    (a,), (b,) = starts.values()
    # They were starting at the same time: each began before the other was ready.
    assert max(a["started_at"], b["started_at"]) < min(
        a["started_at"] + a["ready_s"], b["started_at"] + b["ready_s"]
    )
    endpoints = []
    for w in ("gw0", "gw1"):
        summary = json.loads((reports / "workers" / w / "realtime" / "summary.json").read_text())
        endpoints.append(summary["server"]["endpoint"])
        assert summary["summary"]["errors"] == 0 and summary["summary"]["requests"] == 10
        assert (reports / "workers" / w / "servers" / Path(starts[w][0]["log"]).name).exists()
    ports = {int(e.rsplit(":", 1)[1]) for e in endpoints}
    assert len(ports) == 2 and TAKEN not in ports, endpoints
    assert group_alive(a["pid"]) == [] and group_alive(b["pid"]) == []
