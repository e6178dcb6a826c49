"""What the walk leaves out, and what an element's classes say it is.

Reads elements of a page's tree (their tag, classes, id, role, style); writes nothing. Navigation
chrome (``nav``, ARIA navigation, search and banner landmarks, sidebars, breadcrumbs, tables of
contents, previous/next bars, by the class and id words generators use for them), footers,
scripts, styles, permalink signs ("¶"), edit links and MediaWiki's citation markers and reference
lists are left out; notes and warnings are found by their class words.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lxml import etree

SKIP_TAGS = frozenset({
    "script", "style", "noscript", "template", "nav", "footer", "form", "button", "select",
    "input", "textarea", "svg", "iframe", "object", "embed", "canvas", "audio", "map",
    "link", "meta", "head", "title",
})
SKIP_CLASSES = frozenset({
    # MediaWiki's furniture (none of these names is a content class elsewhere)
    "navbox", "vertical-navbox", "navbox-styles", "mw-editsection", "reflist", "references",
    "mw-references-wrap", "refbegin", "mw-jump-link", "catlinks", "printfooter", "noprint",
    "mw-indicators", "sistersitebox", "ambox", "mbox-small", "navigation-not-searchable", "mw-cite-backlink",
    # generic chrome
    "site-footer", "footer", "skip-link", "skip-to-content", "cookie-banner", "edit-link", "editlink",
    "visually-hidden", "sr-only", "table-of-contents",
    # Sphinx's "[source]" links (viewcode); rustdoc's "source" links and "Expand description" toggles
    "viewcode-link", "viewcode-back", "hideme", "rightside", "out-of-band",
})
# MediaWiki's citation marker is ``sup.reference``; Sphinx puts ``reference`` on every link and
# DocBook on a whole part of a book, so the class alone is no reason to leave anything out
SKIP_TAG_CLASSES = frozenset({("sup", "reference"), ("a", "src")})
_TAG_CLASS_TAGS = frozenset(tag for tag, _ in SKIP_TAG_CLASSES)
_NO_CLASSES: frozenset[str] = frozenset()
# words of class names (split at - and _) that generators give navigation chrome: Bootstrap's and
# Django's ``nav``, DocBook's ``navheader``, MkDocs' ``md-sidebar``, Docusaurus' ``theme-doc-toc-*``
# and ``tableOfContents_*``, Hugo's ``td-toc``, Asciidoctor's ``toc2``, ``pagination-nav``...
CHROME_WORDS = frozenset({
    "nav", "navbar", "navigation", "navheader", "navfooter", "navlinks", "breadcrumb", "breadcrumbs",
    "sidebar", "sidenav", "menu", "toc", "toc2", "tocify", "tableofcontents", "pagination", "pager",
    "searchbox",
})
_WORD_SPLIT = re.compile(r"[-_]+")
# ids are compared whole (a section's id is often its title's slug, so never by word), and only
# on elements that are not sections
SKIP_IDS = frozenset({
    "toc", "footer", "catlinks", "mw-navigation", "mw-panel", "mw-head", "sitesub", "contentsub",
    "jump-to-nav", "mw-page-base", "mw-head-base", "siteNotice".lower(), "references", "sidebar",
    "global-nav", "searchbox", "breadcrumbs", "tableofcontents",
})
SKIP_ROLES = frozenset({"navigation", "contentinfo", "search", "complementary", "banner"})
# an <aside> (skipped as complementary) that holds content: notes, footnotes, docutils' sidebars
ADMONITION_WORDS = frozenset({
    "admonition", "admonitionblock", "note", "tip", "warning", "caution", "danger", "important", "hint",
    "attention", "seealso", "callout", "alert",
})
CONTENT_ASIDE_WORDS = ADMONITION_WORDS | {"footnote", "footnotes", "topic", "sidebar"}
CONTENT_ASIDE_ROLES = frozenset({"note", "doc-footnote", "doc-endnotes", "doc-tip", "doc-notice"})
ADMONITION_TAGS = frozenset({"div", "aside", "section", "details", "blockquote"})
# permalink anchors next to headings and signatures: Sphinx and MkDocs "¶", Docusaurus "#",
# rustdoc "§"
PERMALINK_CLASSES = frozenset({
    "headerlink", "hash-link", "anchorjs-link", "doc-anchor", "header-anchor", "heading-anchor",
    "anchor-link", "permalink",
})
PERMALINK_SIGNS = frozenset({"", "¶", "#", "§", "🔗", "\u2693"})
# line-number gutters of highlighted code (Pygments, Chroma, Prism)
LINE_NUMBER_CLASSES = frozenset({
    "linenos", "lineno", "linenodiv", "lnt", "ln", "gutter", "line-numbers-rows", "line-number", "linenumber",
})

HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
BLOCK_TAGS = frozenset({
    "p", "div", "section", "article", "main", "blockquote", "pre", "ul", "ol", "dl", "li", "dt", "dd",
    "table", "figure", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "header", "details",
    "summary", "center", "address", "fieldset", "body", "html", "caption", "tr", "td", "th", "tbody",
    "thead", "tfoot", "aside",
})
LIST_TAGS = frozenset({"ul", "ol", "dl"})
# what makes a list item or a description more than a run of text: it is then read as blocks
STRUCTURE_TAGS = frozenset({
    "pre", "table", "dl", "h1", "h2", "h3", "h4", "h5", "h6", "section", "blockquote", "figure", "details",
})

DISPLAY_NONE = re.compile(r"display\s*:\s*none", re.I)


def classes_of(el: etree._Element) -> frozenset[str]:
    return class_names(el.get("class") or "")


@lru_cache(maxsize=8192)
def class_names(attr: str) -> frozenset[str]:
    return frozenset(attr.lower().split())


@lru_cache(maxsize=8192)
def class_words(classes: frozenset[str]) -> frozenset[str]:
    return frozenset(word for name in classes for word in _WORD_SPLIT.split(name) if word)


def tag_of(el: etree._Element) -> str:
    return el.tag if isinstance(el.tag, str) else ""


def _is_chrome(el: etree._Element, tag: str, classes: frozenset[str]) -> bool:
    """Navigation chrome by its class words: a block element (inline ones carry such words as
    links of the content), not a section, a note or a docutils sidebar (``.. sidebar::``, content
    with a title of its own)."""
    words = class_words(classes)
    if not words & CHROME_WORDS:
        return False
    if tag not in BLOCK_TAGS or "admonition" in words or "title" in words or tag == "section":
        return False  # a heading's "toc-backref" link is the heading's text; a sidebar's title is its own
    if "sidebar" in words and not (words & CHROME_WORDS - {"sidebar"}):
        first = next((c for c in el if isinstance(c.tag, str)), None)
        if first is not None and classes_of(first) & {"sidebar-title", "title", "titlepage"}:
            return False
    return True


def _is_permalink(el: etree._Element, classes: frozenset[str]) -> bool:
    if classes & PERMALINK_CLASSES:
        return True
    href = el.get("href") or ""
    return href.startswith("#") and el.text_content().strip() in PERMALINK_SIGNS - {""} and not len(el)


def _content_aside(el: etree._Element, classes: frozenset[str]) -> bool:
    return bool(class_words(classes) & CONTENT_ASIDE_WORDS) or (el.get("role") or "").lower() in CONTENT_ASIDE_ROLES


def should_skip(el: etree._Element) -> bool:
    tag = el.tag if isinstance(el.tag, str) else ""
    if tag in SKIP_TAGS:
        return True
    attr = el.get("class")
    classes = class_names(attr) if attr else _NO_CLASSES
    if tag == "aside" and not _content_aside(el, classes):
        return True
    if classes:
        if classes & SKIP_CLASSES or (tag in _TAG_CLASS_TAGS and any((tag, c) in SKIP_TAG_CLASSES for c in classes)):
            return True
        if _is_chrome(el, tag, classes):
            return True
    if tag == "a" and _is_permalink(el, classes):
        return True
    el_id = el.get("id")
    if el_id and el_id.lower() in SKIP_IDS and tag not in HEADINGS and tag != "section" and not any(
            c.startswith(("section", "sect", "refsect", "chapter")) for c in classes):
        return True
    role = el.get("role")
    if role:
        role = role.lower()
        if role in SKIP_ROLES and not (role == "banner" and tag != "header") and not (
                role == "complementary" and _content_aside(el, classes)):
            return True
    if tag == "header" and el.find(".//nav") is not None:
        return True
    style = el.get("style")
    return bool(style and DISPLAY_NONE.search(style)) or el.get("hidden") is not None


_GRID_COLUMNS = {"two-column-summary": 2, "three-column-summary": 3, "four-column-summary": 4}


def grid_columns(el: etree._Element) -> int | None:
    """Columns of a ``<div>`` grid table (Javadoc's ``summary-table three-column-summary``)."""
    if tag_of(el) != "div":
        return None
    classes = classes_of(el)
    if "summary-table" not in classes:
        return None
    return next((n for name, n in _GRID_COLUMNS.items() if name in classes), None)


def admonition_title(el: etree._Element) -> etree._Element | None | bool:
    """For a note, warning, tip... (by its class words): its title element (None when it has
    none); False for anything else."""
    if tag_of(el) not in ADMONITION_TAGS:
        return False
    words = class_words(classes_of(el))
    first = next((c for c in el if isinstance(c.tag, str) and not should_skip(c)), None)
    if not words & ADMONITION_WORDS and not (  # docutils' sidebar and topic have titles too
            words & {"sidebar", "topic"} and first is not None and classes_of(first) & {"sidebar-title", "topic-title"}):
        return False
    if first is None:
        return None
    tag = tag_of(first)
    label = (first.get("class") or "").lower()
    if tag in HEADINGS or tag == "summary" or "title" in label or "heading" in label:
        return first if len(" ".join(first.text_content().split())) <= 80 else None
    return None


def has_structure(el: etree._Element) -> bool:
    """Does a list item or a description hold blocks that are more than a run of text (code, a
    table, a definition list, headings, several paragraphs, a note)?"""
    for d in el.iterdescendants():
        tag = tag_of(d)
        if tag in STRUCTURE_TAGS or (tag == "div" and admonition_title(d) is not False):
            return True
    return sum(1 for c in el if tag_of(c) in ("p", "div") and c.text_content().strip()) > 1


def int_attr(el: etree._Element, name: str) -> int | None:
    value = (el.get(name) or "").strip().lower().removesuffix("px")
    return int(value) if value.isdigit() else None


def table_of_contents(content: etree._Element) -> bool:
    """Whether ``content`` holds a table of contents with links (DocBook's ``div.toc``, Sphinx's
    ``toctree-wrapper``, ``nav#toc``...): a page that is nothing else is a generator's index of
    its chapter, not a page that failed to parse."""
    for el in content.iter("div", "nav", "dl", "ul", "section"):
        words = class_words(classes_of(el)) | {(el.get("id") or "").lower()}
        if words & {"toc", "toc2", "toctree", "tableofcontents", "contents"} and el.find(".//a[@href]") is not None:
            return True
    return False
