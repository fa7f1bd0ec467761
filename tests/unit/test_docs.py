"""The documentation: every page reachable from the site's nav, the README's links alive, and CI
building the site strictly before the tests."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"


def _nav_pages(entries: Any) -> Iterator[str]:
    for entry in entries:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from [value] if isinstance(value, str) else _nav_pages(value)


def _nav() -> set[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    return set(_nav_pages(config["nav"]))


def test_every_page_of_docs_is_in_the_nav() -> None:
    # mkdocs --strict only mentions a page left out of the nav; readers would never find it.
    pages = {
        p.relative_to(DOCS).as_posix()
        for p in DOCS.rglob("*.md")
        if p.relative_to(DOCS).parts[0] != "results"  # measured figures: linked from pages
    }
    assert pages and pages <= _nav(), sorted(pages - _nav())


def test_the_readmes_links_reach_a_file_or_a_page_of_the_nav() -> None:
    nav = {f"docs/{p}" for p in _nav()}
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    missing = [link for link in local if not (ROOT / link).exists() and link not in nav]
    assert missing == []


def test_ci_builds_the_docs_strictly_before_the_tests() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    build = next(line for line in script.splitlines() if 'mkdocs" build' in line)
    # --quiet hides the warnings --strict counts: the build would pass whatever they say.
    assert "--strict" in build and "--quiet" not in build and build.lstrip().startswith("if !")
    assert script.index(build) < script.index(".ci/test ")
    after = script[script.index(build) : script.index(".ci/test ")]
    assert "exit 1" in after
