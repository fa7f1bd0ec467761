"""A ``Page`` as one self-contained HTML file: styles inline (reports/signoff.css), plots as SVG.

Every text from the model is escaped here; only the figures' SVG, drawn by reports/charts.py
and reports/changes.py (which escape what they put in), goes in as it is.
"""

from __future__ import annotations

from html import escape
from importlib import resources
from typing import assert_never

from reports.page import (
    Block,
    Bullets,
    CellLike,
    Code,
    Fields,
    Figure,
    Figures,
    Heading,
    Page,
    Paragraph,
    Section,
    Table,
)

_CLASSES = {"sub": "sub", "note": "note", "warn": "warn", "banner": "warn banner", "msg": "msg"}
_CELL_CLASSES = {"num": "num", "msg": "msg", "worse": "num worse", "better": "num better"}


def stylesheet() -> str:
    return resources.files("reports").joinpath("signoff.css").read_text(encoding="utf-8")


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def badge(outcome: str) -> str:
    return f"<span class='badge {_e(outcome.replace(' ', '-'))}'>{_e(outcome)}</span>"


def _cell(cell: CellLike) -> str:
    if isinstance(cell, str):
        return f"<td>{_e(cell)}</td>"
    cls = _CELL_CLASSES.get(cell.kind)
    inner = " ".join(x for x in (_e(cell.text), badge(cell.badge) if cell.badge else "") if x)
    if cell.note:
        inner += f"<br><span class='note'>{_e(cell.note)}</span>"
    return f"<td class='{cls}'>{inner}</td>" if cls else f"<td>{inner}</td>"


def _table(t: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in t.head)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in t.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _paragraph(p: Paragraph) -> str:
    cls = _CLASSES.get(p.style)
    text = "<br>".join(_e(line) for line in p.lines)
    return f"<p class='{cls}'>{text}</p>" if cls else f"<p>{text}</p>"


def _code(c: Code) -> str:
    # One unbreakable span per word: browsers may wrap after a hyphen, which would show
    # "--port" split as "-" / "-port" in a command meant to be copied.
    return (
        "<pre>" + " ".join(f"<span class='w'>{_e(w)}</span>" for w in c.text.split(" ")) + "</pre>"
    )


def _figure(f: Figure) -> str:
    body = f.svg or "".join(block(b) for b in f.text)
    body += "".join(block(b) for b in f.blocks)
    caption = f"<figcaption>{_e(f.caption)}</figcaption>" if f.caption else ""
    return f"<figure><h3>{_e(f.title)}</h3>{body}{caption}</figure>"


def block(b: Block) -> str:
    if isinstance(b, Heading):
        return f"<h3>{_e(b.text)}{' ' + badge(b.badge) if b.badge else ''}</h3>"
    if isinstance(b, Paragraph):
        return _paragraph(b)
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{_e(x)}</li>" for x in b.items) + "</ul>"
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Code):
        return _code(b)
    if isinstance(b, Figure):
        return _figure(b)
    if isinstance(b, Figures):
        return "<div class='plots'>" + "".join(_figure(f) for f in b.figures) + "</div>"
    if isinstance(b, Fields):
        fields = "".join(f"<dt>{_e(label)}</dt><dd></dd>" for label in b.labels)
        return f"<dl class='sign'>{fields}</dl>"
    assert_never(b)


def section(s: Section) -> str:
    blocks = "".join(block(b) for b in s.blocks)
    return f"<section id='{_e(s.id)}'><h2>{_e(s.title)}</h2>{blocks}</section>"


def render(page: Page) -> str:
    result = _e(page.result.replace(" ", "-"))
    banner = f"<p class='warn banner'>{_e(page.banner)}</p>" if page.banner else ""
    return "".join(
        [
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<title>{_e(page.title)}</title><style>{stylesheet()}</style></head><body><main>",
            f"<header><h1>{_e(page.heading)}</h1><p class='sub'>{_e(page.subtitle)}</p>",
            f"<p><span class='result {result}'>Result: {_e(page.result)}</span>",
            f"{_e(page.reason)}</p>{banner}</header>",
            *(section(s) for s in page.sections),
            f"<footer>{_e(page.footer)}</footer>" if page.footer else "",
            "</main></body></html>\n",
        ]
    )
