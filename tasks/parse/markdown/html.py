"""Raw HTML inside Markdown (a README's centred ``<h1>``, its logo and badges, a ``<details>``):
headings at an HTML block's top level are Markdown headings, what lies between is read by the HTML
parser and placed under the Markdown's section path.

Reads HTML blocks' text; writes components through ``MarkdownReader`` (markdown.py), whose walk
(``emit``, ``heading``, ``section_path``) it uses. ``whole_body`` (HTML that is all content, no
site around it) serves EPUB chapters too.
"""

from __future__ import annotations

import re

import lxml.html
from lxml import etree

from laminae.tasks.parse.document import ParseError
from laminae.tasks.parse.html import parse_html

HEADING_LEVELS = {f"h{n}": n for n in range(1, 7)}
HEADING_TAG = re.compile(r"<h[1-6][\s>]", re.I)
_CONTENT_ROOT_TAG = re.compile(rb"<(/?)(?:article|main|footer)(?=[\s>/])", re.I)
_CONTENT_ROOT_ATTR = re.compile(rb"""\s(role|id)\s*=(?=\s*["']?(?:main|content|mw-content-text)["'\s>/])""", re.I)


class HtmlBlocks:
    """HTML blocks; mixed into ``MarkdownReader``."""

    def html(self, source: str) -> None:
        """Raw HTML between Markdown blocks (a README's centred ``<h1>`` and logo, a ``<details>``):
        a heading at its top level is a Markdown heading; what lies between is read by the HTML
        parser, under the Markdown's section path."""
        if not HEADING_TAG.search(source):
            self.html_run(source)
            return
        try:
            parts = lxml.html.fragments_fromstring(source, parser=lxml.html.HTMLParser(huge_tree=True))
        except (ValueError, etree.ParserError):  # an <html> document pasted in, or nothing
            self.html_run(source)
            return
        run: list[str] = []
        for part in parts:
            if isinstance(part, str):
                run.append(part)
            elif isinstance(part.tag, str) and part.tag in HEADING_LEVELS:
                self.html_run("".join(run))
                run = [part.tail or ""]
                self.heading(HEADING_LEVELS[part.tag], " ".join(part.text_content().split()))
            else:
                run.append(lxml.html.tostring(part, encoding="unicode", with_tail=True))
        self.html_run("".join(run))

    def html_run(self, source: str) -> None:
        """HTML's components as the HTML parser reads them, under the Markdown's section path; the
        headings inside it (a ``<div>``'s) then join that path."""
        if not source.strip():
            return
        try:
            page = parse_html(whole_body(source.encode("utf-8")), self.url, self.cfg)
        except ParseError:
            return  # nothing but white space, or no text at all
        outer = self.section_path()
        for comp in page.components:
            comp.section_path = outer + comp.section_path
            self.emit(comp)
        self.warnings.extend(w for w in page.warnings if not w.startswith("navigation_only"))
        for level, text in _html_headings(source):
            self.heading(level, text, bare=False)  # the HTML parser kept the words of a bare one


def _html_headings(source: str) -> list[tuple[int, str]]:
    """The ``<h1>``-``<h6>`` of an HTML fragment, in order: (level, text)."""
    if not HEADING_TAG.search(source):
        return []
    try:
        root = lxml.html.document_fromstring(source, parser=lxml.html.HTMLParser(huge_tree=True))
    except (ValueError, etree.ParserError):
        return []
    heads = []
    for el in root.iter("h1", "h2", "h3", "h4", "h5", "h6"):
        text = " ".join(el.text_content().split())
        if text:
            heads.append((int(el.tag[1]), text))
    return heads


def whole_body(html: bytes) -> bytes:
    """HTML that is all content (a Markdown page's HTML block, an e-book's chapter): the HTML
    parser reads only a web page's first ``<article>``, ``<main>``, ``role=main`` or ``id=content``
    element and leaves ``<footer>`` out (a site's chrome); here they open as plain ``<div>``
    elements, since a chapter may hold several articles (a magazine's) with text between them, and
    a letter's signature sits in its ``<footer>``."""
    html = _CONTENT_ROOT_TAG.sub(rb"<\1div", html)
    return _CONTENT_ROOT_ATTR.sub(rb" data-was-\1=", html)
