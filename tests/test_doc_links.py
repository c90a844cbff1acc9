"""Every cross-reference a reader follows resolves: the relative links of README.md, docs/*.md
and benchmarks/ (their #anchors into markdown headings included), the repository paths they name,
the sections they quote ("docs/X.md, "Heading""), every ``groute.x.y`` name they use (a module
or an attribute of one); and the pages, sections, paths and names the code's docstrings and
comments cite.

Nothing here needs a GPU: the names are imported, never run."""
import dataclasses
import glob
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the markdown a reader walks through
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "docs" / "notes").glob("*.md")),
         *sorted((ROOT / "benchmarks").rglob("*.md"))]
#: the code whose docstrings and comments cite the docs
CODE = [p for folder in ("groute", "apps", "topology", "tests", "benchmarks")
        for p in sorted((ROOT / folder).rglob("*"))
        if p.suffix in (".py", ".cu", ".cuh", ".sh") and p.name != "test_doc_links.py"]
#: the folders a repository path in the docs starts with
TOP = ("groute", "apps", "topology", "tests", "benchmarks", "docs")

FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
PATH = re.compile(r"(?<![\w./<>$-])((?:%s)/[\w.*/-]*)" % "|".join(TOP))
DOTTED = re.compile(r"(?<![\w.])groute(?:\.[A-Za-z_]\w*)+(?![\w-])")
MD_FILE = re.compile(r"(?<![\w/.-])((?:docs/)?[A-Z][A-Z_]*\.md)\b")
SECTION = re.compile(r"(?<![\w/.-])((?:docs/)?[A-Z][A-Z_]*\.md)(?:,|:)? \"([^\"]+)\"")


def prose(page: Path) -> str:
    """The page without its fenced code blocks (a ``#`` there is a comment, not a heading)."""
    return FENCE.sub("", page.read_text())


def heading_texts(page: Path) -> list[str]:
    """The page's headings as written, less the ``#`` marks and backticks."""
    return [h.strip().replace("`", "") for h in re.findall(r"^#{1,6} (.+)$", prose(page), re.M)]


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated one numbered."""
    seen, out = {}, set()
    for text in heading_texts(page):
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def markdown_file(name: str) -> Path | None:
    """Where a cited ``X.md`` (or ``docs/X.md``) lives: docs/, or the repository's root."""
    for where in (ROOT / name, ROOT / "docs" / name):
        if where.is_file():
            return where
    return None


#: a placeholder in a path or a name the docs give as a template (``apps/NAME_cli.py``)
PLACEHOLDER = "NAME"


def path_exists(text: str) -> bool:
    """Whether the repository has ``text``; a glob or a template (:data:`PLACEHOLDER`) matches
    some file."""
    text = text.replace(PLACEHOLDER, "*")
    if any(c in text for c in "*?["):
        return bool(glob.glob(str(ROOT / text)))
    return (ROOT / text).exists()


def has_section(page: Path, section: str) -> bool:
    """Whether ``page`` has the quoted section: a heading that begins with it, or a paragraph or
    item that leads with it emphasised (``**Peers**``, ``*Grid shape.*``, ```"bins"```)."""
    section = " ".join(section.replace("`", "").split())
    text = " ".join(page.read_text().split())
    return (any(h.startswith(section) for h in heading_texts(page))
            or f"*{section}" in text or f'`"{section}"`' in text)


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute (a dataclass field too) of one."""
    if PLACEHOLDER in name:                         # a template: its package must exist
        name = name[:name.index(PLACEHOLDER)].rstrip(".")
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and not module.startswith(exc.name):
                raise                   # the module exists, but something it imports does not
            continue
        for attr in parts[i:]:
            fields = ({f.name for f in dataclasses.fields(obj)}
                      if dataclasses.is_dataclass(obj) else ())
            if attr in fields:
                return attr == parts[-1]
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def broken_links(page: Path) -> list[str]:
    """The page's relative links to no file, or to a heading the target page does not have."""
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):            # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(f"link {target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"link {target}: no heading with that anchor in {where.name}")
    return broken


def cited_pages_and_sections(text: str, where: str) -> tuple[int, list[str]]:
    """How many ``X.md`` pages and quoted sections ``text`` cites, and those that do not
    exist (a cited section: a heading of that page, or a lead it emphasises)."""
    pages, sections = set(MD_FILE.findall(text)), SECTION.findall(text)
    wrong = [f"page {name}" for name in sorted(pages) if markdown_file(name) is None]
    for name, section in sections:
        page = markdown_file(name)
        if page is not None and not has_section(page, section):
            wrong.append(f'section {name} "{" ".join(section.split())}"')
    return len(pages) + len(sections), wrong


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_reference_of_the_page_resolves(page):
    """Its relative links and their anchors, the repository paths it names (link targets
    aside), the pages and sections it cites, and the ``groute.x.y`` names it uses."""
    text = page.read_text()
    links = LINK.findall(prose(page))
    paths = {m.rstrip(".") for m in PATH.findall(re.sub(r"\]\([^)\s]+\)", "]()", text))}
    names = set(DOTTED.findall(text))
    cited, wrong = cited_pages_and_sections(text, page_id(page))
    assert links or paths or names or cited, f"{page_id(page)}: no reference found at all"
    wrong += broken_links(page)
    wrong += [f"path {p}" for p in sorted(paths) if not path_exists(p)]
    wrong += [f"name {n}" for n in sorted(names) if not resolves(n)]
    assert not wrong, f"{page_id(page)}: " + "; ".join(wrong)


def test_the_code_cites_what_exists():
    """The docstrings and comments of the code cite pages and sections that exist, and
    benchmarks/ and docs/ paths that exist; those of groute/, apps/ and topology/ name modules
    and attributes that exist (the tests name missing ones on purpose)."""
    wrong = []
    for path in CODE:
        where = str(path.relative_to(ROOT))
        text = path.read_text(errors="replace")
        _, bad = cited_pages_and_sections(text, where)
        wrong += [f"{where}: {b}" for b in bad]
        named = sorted({m.rstrip(".") for m in PATH.findall(text)})
        wrong += [f"{where}: path {p}" for p in named
                  if p.startswith(("benchmarks/", "docs/")) and not path_exists(p)]
        if path.suffix == ".py" and where.split("/")[0] in ("groute", "apps", "topology"):
            wrong += [f"{where}: name {name}" for name in sorted(set(DOTTED.findall(text)))
                      if not resolves(name)]
    assert not wrong, "the code cites what does not exist: " + "; ".join(wrong)
