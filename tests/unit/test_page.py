"""The sign-off's page model: one build, two layouts that say the same thing."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from html import unescape
from pathlib import Path

from reports import page_html, page_markdown
from reports.page import Block, Cell, Figure, Figures, Page, Paragraph, Section, Table
from reports.run_folder import load_run
from reports.signoff import build_page, build_report

ROOT = Path(__file__).parents[2]
DATA = Path(__file__).parent / "data"


def _page() -> Page:
    return build_page(build_report(load_run(DATA / "run-new"), [load_run(DATA / "run-sample")]))


def _tables(blocks: Sequence[Block]) -> list[Table]:
    """Every table a layout must show, figures' tables included (not their words-only ones)."""
    out: list[Table] = []
    for b in blocks:
        if isinstance(b, Table):
            out.append(b)
        elif isinstance(b, Figure):
            out += _tables(b.blocks)
        elif isinstance(b, Figures):
            out += _tables(b.figures)
    return out


def test_both_layouts_carry_every_section_and_table() -> None:
    page = _page()
    html, md = page_html.render(page), page_markdown.render(page)
    assert len(page.sections) >= 5
    for s in page.sections:
        assert f"<section id='{s.id}'><h2>{s.title}</h2>" in html
        assert f"\n## {s.title}\n" in md
        for t in _tables(s.blocks):
            assert "<tr>" + "".join(f"<th>{h}</th>" for h in t.head) in unescape(html)
            assert "| " + " | ".join(t.head) + " |" in md


def test_a_figure_without_words_is_left_out_of_markdown() -> None:
    drawn = Figure("TTFT distribution", svg="<svg></svg>", caption="a plot")
    said = Figure("queue", svg="<svg></svg>", text=(Paragraph.of("waiting peak 3"),))
    page = Page("t", "h", "sub", "PASS", "why", sections=(Section("s", "S", (drawn, said)),))
    md = page_markdown.render(page, "Plots: elsewhere.")
    assert "TTFT distribution" not in md and "a plot" not in md
    assert "**queue**" in md and "waiting peak 3" in md and md.rstrip().endswith("elsewhere.")
    html = page_html.render(page)
    assert html.count("<svg></svg>") == 2 and "waiting peak 3" not in html  # drawn, not said


def test_cells_are_escaped_for_each_format() -> None:
    table = Table(("a|b", "<x>"), (("p|q", Cell("<b>", badge="FAIL", note="n<1", kind="num")),))
    page = Page("t", "h", "sub", "FAIL", "why", sections=(Section("s", "S", (table,)),))
    html, md = page_html.render(page), page_markdown.render(page)
    assert "<b>" not in html.split("</style>")[1] and "&lt;b&gt;" in html
    assert "<td class='num'>&lt;b&gt; <span class='badge FAIL'>FAIL</span>" in html
    assert "| a\\|b | &lt;x&gt; |" in md and "| p\\|q | &lt;b&gt; FAIL (n&lt;1) |" in md


def test_the_stylesheet_is_a_package_file_inlined_in_the_page() -> None:
    css = (ROOT / "reports" / "signoff.css").read_text()
    assert page_html.stylesheet() == css and "td.num" in css
    assert f"<style>{css}</style>" in page_html.render(_page())
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "signoff.css" in data["tool"]["setuptools"]["package-data"]["reports"]
    # No style rules left behind in Python.
    for module in (ROOT / "reports").glob("*.py"):
        assert not re.search(r"\bbackground:\s*#", module.read_text()), module
