"""A report page as plain data: page -> sections -> blocks, rendered by page_html and page_markdown.

The sign-off is built once as a ``Page``; the HTML and Markdown renderers only lay it out. Text
here is plain (never markup): each renderer escapes it for its own format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Style = Literal["plain", "sub", "note", "warn", "banner", "msg"]
"""How a paragraph reads: ``sub`` a line under a heading, ``note`` small print, ``warn`` a
highlighted warning, ``banner`` the page's warning under its result, ``msg`` a test's message."""


@dataclass(frozen=True)
class Cell:
    """One table cell: ``text``, then ``badge`` (an outcome or status) and a small ``note``."""

    text: str = ""
    badge: str = ""
    note: str = ""
    kind: Literal["", "num", "msg", "worse", "better"] = ""
    """How the cell is laid out: ``num`` right-aligned figures (``worse``/``better`` are
    figures in the change's colour), ``msg`` a long message."""


CellLike = str | Cell


@dataclass(frozen=True)
class Heading:
    """A sub-heading inside a section, with an optional badge after its text."""

    text: str
    badge: str = ""


@dataclass(frozen=True)
class Paragraph:
    """One paragraph; each of ``lines`` starts a new line within it."""

    lines: tuple[str, ...]
    style: Style = "plain"

    @classmethod
    def of(cls, text: str, style: Style = "plain") -> Paragraph:
        return cls((text,), style)


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    rows: tuple[tuple[CellLike, ...], ...]


@dataclass(frozen=True)
class Code:
    """A command meant to be copied whole."""

    text: str


@dataclass(frozen=True)
class Figure:
    """A plot with its title and caption. ``svg`` is drawn in HTML only; ``text`` says in words
    what the plot shows where it cannot be drawn (Markdown); ``blocks`` follow the plot in both.
    A figure with neither ``text`` nor ``blocks`` has nothing to say without its plot and is
    left out of Markdown."""

    title: str
    svg: str = ""
    text: tuple[Block, ...] = ()
    blocks: tuple[Block, ...] = ()
    caption: str = ""


@dataclass(frozen=True)
class Figures:
    """Figures laid out side by side where the page is wide enough."""

    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class Fields:
    """Labelled blank lines to fill in by hand (the signature block)."""

    labels: tuple[str, ...]


Block = Heading | Paragraph | Bullets | Table | Code | Figure | Figures | Fields


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Page:
    title: str
    """The document's title (a browser tab, a file list)."""
    heading: str
    subtitle: str
    result: str
    reason: str
    banner: str = ""
    sections: tuple[Section, ...] = field(default=())
    footer: str = ""
