"""Text coverage of the HTML parse: how much of each page's main content reaches its components.

Reads a folder of pages (recursively, the files a folder seed yields) or a seeds file (``file://``
URLs, folders among them, and http(s) URLs, fetched once with urllib); writes nothing unless
``--json FILE`` is given (one record per page). For every HTML page it parses the bytes with
laminae's parser (``laminae.tasks.parse.html.parse_html``) and prints, per corpus:

- the share of the page's **main-content words** found in its components' text, in order
  (macro: the mean over pages; micro: all found words over all words);
- the number of components over 4,000 characters, by kind (the issue's bound holds for every kind
  but tables and code blocks);
- the pages whose coverage is below ``--below`` (0.95), worst first, with the first words missed;
- the share of component words that match no main-content word (navigation chrome that reached
  the index, and the words laminae adds itself: an image's "Image ... In: title > section").

**Main-content words** are defined without the parser under test, by a plain lxml pass that only
knows where each generator puts its content:

1. the main element: MediaWiki's ``#mw-content-text``; else the ARIA main landmark (``role=main``,
   else ``<main>``) or, when that landmark holds exactly one ``<article>``, that article (MkDocs
   Material, Docusaurus, pydata: the landmark also holds sidebars and a table of contents);
   else Django's theme's ``#yui-main``, Asciidoctor's ``#content``, an ``<article>``; else the
   ``<body>`` (DocBook, plain pages);
2. minus what the page itself declares is not content: ``script``, ``style``, ``noscript``,
   ``template``, ``svg``, form controls and forms, ``nav`` and ``footer`` elements, elements with
   role ``navigation``, ``search``, ``banner`` or ``contentinfo``, hidden elements (``hidden``,
   ``display: none``), DocBook's ``navheader``/``navfooter``, MediaWiki's furniture (edit links,
   citation markers ``sup.reference``, reference lists, navboxes, hatnotes, which MediaWiki marks
   ``navigation-not-searchable``, the table of contents), Sphinx's viewcode links ("[source]"),
   rustdoc's "source" links and "Expand description" toggles, and code blocks' line-number gutters;
3. words: ``\\w+`` runs of the casefolded text, element boundaries of block elements read as
   spaces, zero-width characters and soft hyphens removed.

A component's words are read the same way from its ``text`` (a table's linearized text, an
image's text proxy with its caption), each component preceded by the headings of its section path
that the previous component did not have (headings reach the index as section paths). "In
order" means a common subsequence of the two word sequences, as long as
``difflib.SequenceMatcher`` finds (on word ids; a long page is first cut at runs of words unique
to both sides, patience-diff style, so that it stays fast). Words the parser adds (an image's
"In: title > section") cost nothing; words it loses, or moves out of order, count as missed. A
page whose main content is headings alone (a DocBook part page: its title over a table of
contents) has nothing to cover and is counted apart.

    .venv/bin/python bench/coverage.py /usr/share/doc/python-django-doc/html [--below 0.95] [--show 20]
    .venv/bin/python bench/coverage.py ../shared/bench/wtq-dev/corpus/pages --json /tmp/wtq-coverage.json
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

import lxml.html
from lxml import etree

from laminae.tasks.crawl.files import (
    FileProblem,
    file_url,
    is_file_url,
    is_folder_url,
    list_folder,
    read_file,
    real_roots,
    scope_of,
)
from laminae.tasks.crawl.formats import HTML_TYPES, extension_type
from laminae.tasks.crawl.seeds import read_seeds
from laminae.tasks.parse.html import ParseError, decode_html, parse_html

MAX_CHARS = 4000  # the bound on a component's text (tables and code blocks excepted)
LONG_KINDS = ("table", "code")
WORD = re.compile(r"\w+")
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
_DISPLAY_NONE = re.compile(r"display\s*:\s*none", re.I)
DROP_TAGS = frozenset({
    "script", "style", "noscript", "template", "svg", "button", "input", "select", "textarea", "form",
    "nav", "footer", "head",
})
DROP_ROLES = frozenset({"navigation", "search", "banner", "contentinfo"})
DROP_CLASSES = frozenset({"navheader", "navfooter", "mw-editsection", "reflist", "references",
                          "mw-references-wrap", "navbox", "toc", "navigation-not-searchable", "viewcode-link",
                          "viewcode-back", "hideme", "rightside", "out-of-band", "linenos", "linenodiv", "lnt", "ln"})
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
BLOCK = frozenset({
    "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "html", "li",
    "main", "ol", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
    "img", "center",
})


def _drop(el: etree._Element) -> bool:
    tag = el.tag
    if tag in DROP_TAGS or (el.get("role") or "").lower() in DROP_ROLES:
        return True
    classes = set((el.get("class") or "").lower().split())
    if classes & DROP_CLASSES or (tag == "sup" and "reference" in classes) or (tag == "a" and "src" in classes):
        return True
    if (el.get("id") or "").lower() == "toc":
        return True
    style = el.get("style")
    return el.get("hidden") is not None or bool(style and _DISPLAY_NONE.search(style))


def main_element(root: etree._Element) -> etree._Element:
    """The element holding the page's main content (see the module docstring)."""
    found = root.xpath("//*[@id='mw-content-text']")
    if found:
        return found[0]
    for landmark in ("//*[@role='main']", "//main"):
        found = root.xpath(landmark)
        if found:
            articles = found[0].xpath(".//article[not(ancestor::article)]")
            return articles[0] if len(articles) == 1 else found[0]
    for xpath in ("//*[@id='yui-main']", "//*[@id='content']", "//article"):
        found = root.xpath(xpath)
        if found:
            return found[0]
    body = root.find("body")
    return body if body is not None else root


def words_of(text: str) -> list[str]:
    return WORD.findall(text.translate(_INVISIBLE).casefold())


def main_content_words(body: bytes) -> tuple[list[str], int]:
    """The words of a page's main content, in document order, and how many of them are not in
    a heading."""
    root = lxml.html.document_fromstring(re.sub(r"^\s*<\?xml[^>]*\?>", "", decode_html(body)))
    parts: list[str] = []
    heading_parts: list[str] = []

    def walk(el: etree._Element, in_heading: bool = False) -> None:
        if not isinstance(el.tag, str) or _drop(el):
            return
        start = len(parts)
        block = el.tag in BLOCK or el.tag in HEADINGS
        if block:
            parts.append(" ")
        parts.append(el.text or "")
        for child in el:
            walk(child, in_heading or el.tag in HEADINGS)
            parts.append(child.tail or "")
        if block:
            parts.append(" ")
        if el.tag in HEADINGS and not in_heading:
            heading_parts.extend(parts[start:])

    walk(main_element(root))
    words = words_of("".join(parts))
    return words, len(words) - len(words_of(" ".join(heading_parts)))


def _lcs_size(a: list[int], b: list[int]) -> int:
    """Length of a common subsequence of ``a`` and ``b`` (close to the longest): runs of ``n`` words
    unique to both sides (n = 1, else 3, else 8; patience anchors, their longest increasing chain)
    split the problem, SequenceMatcher matches what lies between them."""
    if not a or not b:
        return 0
    if len(a) * len(b) <= 4_000_000:
        return sum(m.size for m in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    for n in (1, 3, 8):
        chain = _anchors(a, b, n)
        if chain:
            break
    else:  # nothing to anchor on: a greedy in-order scan is a lower bound
        return _greedy(a, b)
    total, ai, bj = 0, 0, 0
    for i, j in chain:
        if i < ai or j < bj:  # overlaps the anchor before it
            continue
        total += _lcs_size(a[ai:i], b[bj:j]) + n
        ai, bj = i + n, j + n
    return total + _lcs_size(a[ai:], b[bj:])


def _anchors(a: list[int], b: list[int], n: int) -> list[tuple[int, int]]:
    """(i, j) where the same run of ``n`` words starts, unique in ``a`` and in ``b``: the longest
    chain of them increasing in both sequences (patience sorting)."""
    grams_a = [tuple(a[i:i + n]) for i in range(len(a) - n + 1)]
    grams_b = [tuple(b[j:j + n]) for j in range(len(b) - n + 1)]
    count_a, count_b = Counter(grams_a), Counter(grams_b)
    pos_b = {g: j for j, g in enumerate(grams_b) if count_b[g] == 1}
    pairs = [(i, pos_b[g]) for i, g in enumerate(grams_a) if count_a[g] == 1 and g in pos_b]
    tails: list[int] = []
    tail_idx: list[int] = []
    prev = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        at = bisect.bisect_left(tails, j)
        if at == len(tails):
            tails.append(j)
            tail_idx.append(k)
        else:
            tails[at] = j
            tail_idx[at] = k
        prev[k] = tail_idx[at - 1] if at else -1
    chain: list[tuple[int, int]] = []
    k = tail_idx[-1] if tail_idx else -1
    while k >= 0:
        chain.append(pairs[k])
        k = prev[k]
    chain.reverse()
    return chain


def _greedy(a: list[int], b: list[int]) -> int:
    found, j = 0, 0
    where: dict[int, list[int]] = {}
    for k, w in enumerate(b):
        where.setdefault(w, []).append(k)
    for w in a:
        positions = where.get(w)
        if not positions:
            continue
        at = bisect.bisect_left(positions, j)
        if at < len(positions):
            found += 1
            j = positions[at] + 1
    return found


def in_order_share(reference: list[str], found: list[str]) -> tuple[int, int]:
    """(words of ``reference`` matched in order in ``found``, words of ``reference``)."""
    ids: dict[str, int] = {}
    a = [ids.setdefault(w, len(ids)) for w in reference]
    b = [ids.setdefault(w, len(ids)) for w in found]
    return _lcs_size(a, b), len(a)


def first_missed(reference: list[str], found: list[str], n: int = 12) -> str:
    """The first run of reference words the components lack (for a reader of the report)."""
    blocks = SequenceMatcher(None, reference[:3000], found[:6000], autojunk=False).get_matching_blocks()
    at = 0
    for m in blocks:
        if m.a > at:
            return " ".join(reference[at:min(m.a, at + n)])
        at = m.a + m.size
    return ""


@dataclass
class PageCoverage:
    url: str
    words: int
    found: int
    components: int
    over: dict[str, int] = field(default_factory=dict)  # kind -> components over MAX_CHARS
    missed: str = ""
    error: str | None = None
    headings_only: int = 0  # words of a page whose main content is headings alone (not scored)
    extra: int = 0  # component words matched to no main-content word (chrome, image text proxies)

    @property
    def share(self) -> float:
        return self.found / self.words if self.words else 1.0


def component_stream(components) -> Iterator[str]:
    """The components' text in order, each preceded by the headings it is the first to sit under
    (a heading reaches the index as the section path of the components that follow it)."""
    path: list[str] = []
    for comp in components:
        shared = 0
        while shared < min(len(path), len(comp.section_path)) and path[shared] == comp.section_path[shared]:
            shared += 1
        yield from comp.section_path[shared:]
        path = comp.section_path
        yield comp.text


def page_coverage(body: bytes, url: str) -> PageCoverage:
    """Coverage of one page's main-content words by the components laminae parses from it."""
    try:
        parsed = parse_html(body, url)
    except ParseError as exc:
        return PageCoverage(url, 0, 0, 0, error=str(exc))
    try:
        reference, prose = main_content_words(body)
    except (etree.ParserError, ValueError) as exc:  # lxml gave laminae a tree but not this plain pass
        return PageCoverage(url, 0, 0, len(parsed.components), error=f"reference pass: {exc}")
    if not prose:  # headings only (a DocBook part page: its title and a table of contents)
        return PageCoverage(url, 0, 0, len(parsed.components), headings_only=len(reference))
    found = words_of("\n".join(component_stream(parsed.components)))
    matched, total = in_order_share(reference, found)
    over = Counter(c.kind for c in parsed.components if len(c.text) > MAX_CHARS)
    missed = first_missed(reference, found) if total and matched / total < 0.95 else ""
    return PageCoverage(url, total, matched, len(parsed.components), dict(over), missed, extra=len(found) - matched)


def pages_of(source: str) -> Iterator[tuple[str, bytes]]:
    """(URL, bytes) of every HTML page a folder or a seeds file names; a folder's other documents
    (PDF, Markdown, Office files...) are left out: ``bench/fidelity.py`` scores those."""
    path = Path(source).resolve()
    seeds = [file_url(path, folder=True)] if path.is_dir() else [s.url for s in read_seeds(path)]
    for seed in seeds:
        if is_file_url(seed):
            roots = real_roots([scope_of(seed)])
            urls = list_folder(seed, roots)[0] if is_folder_url(seed) else [seed]
            for url in urls:
                if extension_type(url) not in HTML_TYPES:
                    continue
                try:
                    yield url, read_file(url, roots, 1 << 30).body or b""
                except FileProblem as problem:
                    print(f"skipped {url}: {problem.message}", file=sys.stderr)
        else:
            try:
                with urllib.request.urlopen(seed, timeout=30) as response:  # noqa: S310 - the user's seeds
                    body = response.read()
            except OSError as exc:
                print(f"skipped {seed}: {exc}", file=sys.stderr)
                continue
            yield seed, body


def run(source: str) -> list[PageCoverage]:
    return [page_coverage(body, url) for url, body in pages_of(source)]


def summary(pages: list[PageCoverage], below: float) -> dict:
    scored = [p for p in pages if p.words]
    over = Counter()
    for p in pages:
        over.update(p.over)
    low = sorted((p for p in scored if p.share < below), key=lambda p: p.share)
    return {
        "pages": len(pages),
        "pages_with_words": len(scored),
        "pages_headings_only": sum(1 for p in pages if p.headings_only),
        "words": sum(p.words for p in scored),
        "coverage_macro": round(sum(p.share for p in scored) / len(scored), 4) if scored else None,
        "coverage_micro": round(sum(p.found for p in scored) / max(1, sum(p.words for p in scored)), 4),
        "extra_words_share": round(sum(p.extra for p in scored) / max(1, sum(p.extra + p.found for p in scored)), 4),
        "components": sum(p.components for p in pages),
        "over_4000": dict(over),
        "over_4000_not_table_or_code": sum(n for k, n in over.items() if k not in LONG_KINDS),
        "below": [(p.url, round(p.share, 3)) for p in low],
        "errors": [(p.url, p.error) for p in pages if p.error],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="+", help="a folder of pages or a seeds file (each reported apart)")
    parser.add_argument("--below", type=float, default=0.95, help="list the pages under this coverage (0.95)")
    parser.add_argument("--show", type=int, default=15, help="how many of those pages to print (15)")
    parser.add_argument("--json", type=Path, help="write every page's record here")
    args = parser.parse_args(argv)
    records = {}
    for source in args.sources:
        start = time.perf_counter()
        pages = run(source)
        s = summary(pages, args.below)
        print(f"== {source}: {s['pages']} pages ({s['pages_with_words']} with main-content words, "
              f"{s['words']:,} words; {s['pages_headings_only']} with headings only, not scored) "
              f"in {time.perf_counter() - start:.0f} s")
        print(f"coverage macro {s['coverage_macro']}  micro {s['coverage_micro']}  "
              f"pages below {args.below}: {len(s['below'])}; component words outside the main content: "
              f"{s['extra_words_share']}")
        print(f"components {s['components']:,}; over {MAX_CHARS:,} characters: {s['over_4000'] or 0} "
              f"({s['over_4000_not_table_or_code']} neither table nor code)")
        by_url = {p.url: p for p in pages}
        for url, share in s["below"][:args.show]:
            print(f"  {share:.3f}  {url}  missed: {by_url[url].missed[:100]!r}")
        for url, error in s["errors"]:
            print(f"  error {url}: {error}")
        records[source] = {"summary": s, "pages": [asdict(p) | {"share": round(p.share, 4)} for p in pages]}
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
