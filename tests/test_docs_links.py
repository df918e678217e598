"""Links into the docs resolve: the README's and the docs' relative links, and the
``docs/....md#anchor`` references in configs, source, benchmarks and examples."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")
DOCS_REFERENCE = re.compile(r"\bdocs/[\w./-]+\.md(?:#[\w-]+)?")
REFERRING = [
    path
    for folder in ("configs", "imaginebench", "benchmarks", "examples")
    for path in sorted((ROOT / folder).rglob("*"))
    if path.suffix in (".py", ".yaml", ".yml", ".toml")
]


def heading_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def anchors(document: Path) -> frozenset[str]:
    """The anchors of a Markdown file's headings; a repeated heading gets ``-1``, ``-2``, ..."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCED.sub("", document.read_text()).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            anchor = heading_anchor(match.group(1))
            repeats = seen.get(anchor, 0)
            seen[anchor] = repeats + 1
            found.add(anchor if repeats == 0 else f"{anchor}-{repeats}")
    return frozenset(found)


def unresolved(target: str, base: Path, document: Path) -> str | None:
    """Why ``target`` (``path#anchor``, relative to ``base``) does not resolve, or ``None``."""
    path, _, anchor = target.partition("#")
    linked = (base / path).resolve() if path else document
    if not linked.exists():
        return f"{target} (no such file)"
    if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
        return f"{target} (no such heading)"
    return None


def broken_links(document: Path) -> list[str]:
    """The relative links of ``document`` whose file or heading does not exist."""
    targets = LINK.findall(FENCED.sub("", document.read_text()))
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]  # not http:, https:, mailto:
    return [why for t in local if (why := unresolved(t, document.parent, document))]


def broken_references(source: Path) -> list[str]:
    """The ``docs/....md#anchor`` references of ``source`` (from the repository root) that do
    not resolve."""
    targets = DOCS_REFERENCE.findall(source.read_text())
    return [why for t in targets if (why := unresolved(t, ROOT, source))]


def test_heading_anchor_follows_githubs_rule() -> None:
    assert heading_anchor("Real + oracle (2026-11-27)") == "real--oracle-2026-11-27"
    assert heading_anchor("Filters (`filters:` of `imaginebench imagine`)") == (
        "filters-filters-of-imaginebench-imagine"
    )


def test_a_missing_file_and_a_missing_heading_are_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Present\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#present) [ok](other.md#twice-1) [web](https://example.org/x#y)\n"
        "[gone](missing.md) [bad](other.md#absent) [self](#nowhere)\n"
        "```\n[in a fence](ignored.md)\n```\n"
    )
    assert broken_links(page) == [
        "missing.md (no such file)",
        "other.md#absent (no such heading)",
        "#nowhere (no such heading)",
    ]


def test_a_broken_docs_reference_in_a_config_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(
        "a: 1  # docs/grounding.md#filters-filters-of-imaginebench-imagine\n"
        "b: 2  # docs/grounding.md#filters, docs/absent.md\n"
    )
    assert broken_references(config) == [
        "docs/grounding.md#filters (no such heading)",
        "docs/absent.md (no such file)",
    ]


def test_the_readme_and_docs_links_reach_their_targets() -> None:
    broken = {str(doc.relative_to(ROOT)): broken_links(doc) for doc in DOCUMENTS}
    assert {doc: links for doc, links in broken.items() if links} == {}


def test_docs_references_in_configs_and_source_reach_their_targets() -> None:
    broken = {str(path.relative_to(ROOT)): broken_references(path) for path in REFERRING}
    assert {path: refs for path, refs in broken.items() if refs} == {}
