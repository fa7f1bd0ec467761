"""The sign-off report as HTML and Markdown, and how a browser shows it."""

from __future__ import annotations

import json
import math
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports.analysis import overall, ttft_cdfs
from reports.run_folder import load_run
from reports.signoff import build_report, render_html, render_markdown, write_signoff
from reports.signoff_format import scenario_marker
from tests.unit.report_runs import NEW, SAMPLE, SAMPLE_OBJECTIVES, SECRET, synthetic_run

CHROMIUM = next(
    (
        p
        for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium")
        if p and Path(p).exists()
    ),
    None,
)


class _Tables(HTMLParser):
    """Rows of every table inside the element with a given id, as lists of cell texts."""

    def __init__(self, section_id: str) -> None:
        super().__init__()
        self.section_id = section_id
        self.depth = 0
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.svgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "svg":
            self.svgs += 1
        if self.depth:
            self.depth += tag == "section"
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = []
        elif tag == "section" and dict(attrs).get("id") == self.section_id:
            self.depth = 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag == "section":
            self.depth -= 1
        if self.cell is not None and tag in ("td", "th"):
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def table_rows(html: str, section_id: str) -> tuple[list[list[str]], int]:
    parser = _Tables(section_id)
    parser.feed(html)
    return parser.rows, parser.svgs


def resource_urls(html: str) -> list[str]:
    """Anything a browser would fetch from the network."""
    patterns = (
        r"""(?:src|href|xlink:href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""",
        r"""url\(\s*["']?\s*(?:https?:)?//""",
        r"@import",
    )
    return [m.group(0) for p in patterns for m in re.finditer(p, html, re.IGNORECASE)]


def test_signoff_html_of_the_sample_run(tmp_path: Path) -> None:
    files = write_signoff([SAMPLE], tmp_path)
    html = files.html.read_text()
    rows, svgs = table_rows(html, "verdicts")
    head, body = rows[0], rows[1:]
    assert head[:4] == ["scenario", "objective", "outcome", "estimate"]
    assert {"n", "lag-1", "threshold", "95% CI"} <= set(head)
    got = {(r[1], r[2]) for r in body}
    assert got == {(o.split(" <=")[0].split(" >=")[0], out) for o, out in SAMPLE_OBJECTIVES.items()}
    p50 = next(r for r in body if r[1] == "ttft p50")
    # A run folder from before the dependence handling has no lag-1 figure: the cell is empty.
    assert p50[3:8] == ["17 ms", "[17 ms, 18 ms]", "600", "", "≤ 60 ms"]
    assert "Result: PASS" in html
    assert svgs >= 2 and html.count("<polyline") >= 2  # CDF and timeline drawn
    assert resource_urls(html) == [] and "<script" not in html.lower()
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert "environment.json has no 'command'" in text  # not recorded, and it says so
    assert "--slo-replay" in text and "--scheduling-policy priority" in text
    md = files.markdown.read_text()
    for objective in ("ttft p50", "ttft p99", "tpot p99", "output_throughput"):
        assert re.search(rf"^\| realtime \| {objective} \| PASS \|", md, re.MULTILINE)


@pytest.mark.parametrize(
    ("label", "marker"),
    [
        ("realtime", "realtime"),
        ("mixed.fcfs", "mixed"),
        ("mixed[fcfs]", "mixed"),
        ("long-prompts.budget-256", "long_prompts"),
    ],
)
def test_reproduce_selects_a_folder_by_its_scenarios_marker(label: str, marker: str) -> None:
    assert scenario_marker(label) == marker


def test_signoff_lists_a_claims_figures_by_variant(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(NEW, run)
    junit = run / "junit.xml"
    claim = (
        '<testcase classname="suites.test_mixed" name="test_priority_scheduling_lowers_realtime_'
        'ttft" file="suites/test_mixed.py" line="20" time="1.0"><properties>'
        '<property name="claim.priority.ttft_p90_s" value="0.171" />'
        '<property name="claim.priority.output_tok_s" value="1261.0" />'
        '<property name="claim.priority.requests" value="120.0" />'
        '<property name="claim.fcfs.ttft_p90_s" value="2.217" />'
        "</properties></testcase></testsuite>"
    )
    junit.write_text(junit.read_text().replace("</testsuite>", claim, 1))
    files = write_signoff([run], tmp_path / "out")
    rows, _ = table_rows(files.html.read_text(), "claims")
    assert rows == [
        ["variant", "output_tok_s", "requests", "ttft_p90_s"],
        ["priority", "1261 tok/s", "120", "171 ms"],
        ["fcfs", "", "", "2.22 s"],
    ]
    md = files.markdown.read_text()
    assert "## Claims measured" in md and "| fcfs |  |  | 2.22 s |" in md
    # Listed as a claim, not again among the tests that judged nothing.
    assert "test_priority_scheduling" not in md.split("## Claims measured")[0]


def test_signoff_with_a_baseline_shows_each_change(tmp_path: Path) -> None:
    files = write_signoff([NEW, SAMPLE], tmp_path)
    html = files.html.read_text()
    rows, _ = table_rows(html, "comparison")
    change = {r[1]: r[-1] for r in rows if len(r) == 5 and r[0] == "realtime"}
    assert change["ttft p50"] == "+65.5% worse"
    assert change["output_throughput"] == "-9.5% worse"
    assert "Result: INCONCLUSIVE" in html
    assert "TTFT decomposition (vLLM histograms)" in html
    assert "bucket 20 ms to 40 ms" in html
    assert "| ttft p50 |" in files.markdown.read_text()


def test_signoff_of_a_multi_class_run_escapes_text_and_leaks_no_prompt(tmp_path: Path) -> None:
    run = load_run(synthetic_run(tmp_path / "run"))
    assert [t.name for t in run.other_tests] == ["test_objective[ttft p90 class=realtime]"]
    report = build_report(run)
    assert overall(run) == ("INVALID", "1 of 1 objectives INVALID; 1 other test(s) failed")
    html, md = render_html(report), render_markdown(report)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "m&lt;b&gt;" in html
    assert SECRET not in html and SECRET not in md
    assert "3 errors (APIStatusError x3)" in html  # errors are shown by kind only
    section = report.sections[0]
    assert [c.request_class for c in section.stats] == [None, "batch", "realtime"]
    assert [c.request_class for c in section.cdfs] == ["batch", "realtime"]
    batch = section.cdfs[0]
    assert batch.failed == 3 and batch.ys[-1] == pytest.approx(30 / 33)  # failures never arrive
    ttft = dict(section.stats[0].rows[0].percentiles)
    assert ttft[99].estimate == math.inf and ttft[99].upper == math.inf  # the failure is slowest
    assert ttft[90].upper == math.inf  # its order statistic is a failed request
    # 3 failures among 33 batch requests, in a row: too clustered to bound much, but the p50
    # itself is a real figure, and no clamped stand-in for +inf is ever shown.
    assert ttft[50].estimate < 1 and not re.search(r"\d{12}", html)
    thin = ttft_cdfs(run.scenarios[0], max_points=4)[0]  # large runs: subsampled, end kept
    assert len(thin.xs) <= 5 and thin.ys[-1] == batch.ys[-1] and thin.xs[-1] == batch.xs[-1]
    assert "run INVALID: error rate" in html
    assert "Tests without a verdict" in html and "ServerStartError: vLLM exited" in html


def _png_rows(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct scanlines) of an 8-bit RGB(A) PNG, with the standard library:
    a blank page compresses to a few distinct filtered scanlines, a rendered report to many."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = color = depth = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert depth == 8 and color in (2, 6)
    stride = 1 + width * (3 if color == 2 else 4)
    raw = zlib.decompress(idat)
    assert len(raw) == stride * height
    return width, height, len({raw[i : i + stride] for i in range(0, len(raw), stride)})


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    profile = tempfile.mkdtemp(prefix="chromium-")
    try:
        return subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


# What a browser measured, written into the page so --dump-dom carries it out.
_PROBE = """<script>
const t = document.querySelector('#verdicts table').getBoundingClientRect();
const p = document.createElement('pre'); p.id = 'probe';
p.textContent = JSON.stringify({top: t.top, height: t.height, width: t.width,
  rows: document.querySelectorAll('#verdicts table tbody tr').length,
  page: document.documentElement.scrollWidth, view: window.innerWidth});
document.body.appendChild(p);
</script>"""


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH or at /usr/bin/chromium: .ci/run installs it (apt-get, as "
    "root); elsewhere run `apt-get install chromium`",
)
def test_chromium_renders_the_report(tmp_path: Path) -> None:
    from tests.unit.test_server_series import _with_series

    files = write_signoff([_with_series(tmp_path), SAMPLE], tmp_path)
    url = files.html.as_uri()
    dom = _chromium("--dump-dom", url).stdout
    assert "vLLM SLO sign-off" in dom and dom.count("<svg") >= 4
    rows, _ = table_rows(dom, "verdicts")
    verdicts = json.loads((NEW / "verdicts.json").read_text())
    assert [(r[1], r[2]) for r in rows[1:]] == [
        (v["objective"].split(" <=")[0].split(" >=")[0], v["outcome"]) for v in verdicts
    ]
    assert "vLLM's queue over time" in unescape(dom)

    probed = tmp_path / "probed.html"
    probed.write_text(files.html.read_text().replace("</body>", _PROBE + "</body>"))
    dom = _chromium("--window-size=1400,1000", "--dump-dom", probed.as_uri()).stdout
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", dom)
    assert found, dom[-2000:]
    box = json.loads(unescape(found.group(1)))
    # The verdict table is laid out, whole, in the first screenful, and nothing is wider
    # than the window (no sideways scrolling to read a verdict).
    assert box["rows"] == len(verdicts) and box["height"] > 30 * len(verdicts)
    assert 0 < box["top"] < 400 and box["width"] <= box["view"]
    assert box["page"] <= box["view"]

    shot = tmp_path / "signoff.png"
    result = _chromium(f"--screenshot={shot}", "--window-size=1400,3000", url)
    assert shot.exists(), result.stderr[-2000:]
    width, height, distinct = _png_rows(shot)
    assert (width, height) == (1400, 3000)
    assert distinct > 200, f"screenshot looks blank: {distinct} distinct rows"
