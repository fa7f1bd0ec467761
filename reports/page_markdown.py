"""A ``Page`` as Markdown: the same sections and tables as the HTML page, plots in words."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
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


def text(value: object) -> str:
    """Inline text and table cells: line breaks folded, pipes escaped, HTML neutralised."""
    folded = " ".join(str(value).split())
    return escape(folded, quote=False).replace("|", "\\|")


def _cell(cell: CellLike) -> str:
    if isinstance(cell, str):
        return text(cell)
    shown = " ".join(x for x in (cell.text, cell.badge) if x)
    return text(f"{shown} ({cell.note})" if cell.note else shown)


def table(t: Table) -> list[str]:
    out = ["| " + " | ".join(text(h) for h in t.head) + " |", "|" + "---|" * len(t.head)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    return [*out, ""]


def _paragraph(p: Paragraph) -> list[str]:
    out = []
    for line in p.lines:
        if p.style == "banner":
            out += [f"> **{text(line)}**", ""]
        elif p.style == "warn":
            out += [f"> {text(line)}", ""]
        else:
            out += [text(line), ""]
    return out


def _figure(f: Figure) -> list[str]:
    if not f.text and not f.blocks:
        return []
    out = [f"**{text(f.title)}**", ""]
    out += blocks([*f.text, *f.blocks])
    return out + ([text(f.caption), ""] if f.caption else [])


def block(b: Block) -> list[str]:
    if isinstance(b, Heading):
        return [f"### {text(b.text)}{': ' + text(b.badge) if b.badge else ''}", ""]
    if isinstance(b, Paragraph):
        return _paragraph(b)
    if isinstance(b, Bullets):
        return [*(f"- {text(x)}" for x in b.items), ""]
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Code):
        return ["```", b.text, "```", ""]
    if isinstance(b, Figure):
        return _figure(b)
    if isinstance(b, Figures):
        return blocks(b.figures)
    if isinstance(b, Fields):
        return [*(f"- {text(label)}:" for label in b.labels), ""]
    assert_never(b)


def blocks(items: Iterable[Block]) -> list[str]:
    return [line for b in items for line in block(b)]


def section(s: Section) -> list[str]:
    return [f"## {text(s.title)}", "", *blocks(s.blocks)]


def render(page: Page, plots_elsewhere: str = "") -> str:
    """``plots_elsewhere``: where the plots this file cannot hold are (said at the end)."""
    lines = [f"# {text(page.heading)}", "", f"**Result: {page.result}** ({text(page.reason)})", ""]
    if page.banner:
        lines += [f"> **{text(page.banner)}**", ""]
    lines += [text(page.subtitle), ""]
    for s in page.sections:
        lines += section(s)
    if page.footer:
        lines += [text(page.footer), ""]
    if plots_elsewhere:
        lines += [text(plots_elsewhere), ""]
    return "\n".join(lines)
