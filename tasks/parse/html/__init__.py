"""Parse: HTML bytes → a ``ParsedPage`` of paragraphs, code blocks, lists, tables and images with their links.

Reads raw page bytes (any encoding) and the URL they came from; writes nothing. Keeps the section
path (heading hierarchy) of every component, and a heading with nothing under it is a paragraph of
its own (a page of headings alone is not empty); expands table colspan/rowspan, detects header
rows (a row of ``<th>`` cells spanning down labels body rows, it is no header) and infobox
key/value tables, reads a table of one row or column inside a cell as the cell's text and a larger
one as a table of its own; resolves image ``src`` and finds captions; ``<video>`` elements become
video components with their source and caption track.

Written for the shapes documentation generators give pages as much as for Wikipedia's: a
``<pre>`` is a ``code`` component with its lines kept (line-number gutters and copy buttons left
out); a definition list is a list of term + description items (an API signature with its
description), each item its own component once the list is longer than a short one, the term
then the section of what its description holds; lists are cut into components of about
``LIST_CHUNK_CHARS``; a note or warning keeps its label ("Warning: ..."), and headings inside it
do not leak into the section path after it; no paragraph is longer than ``MAX_COMPONENT_CHARS``
(longer text is cut at sentence ends). Leaves out navigation chrome, footers, scripts, styles,
permalink signs, edit links and MediaWiki's citation markers and reference lists.

One module a job: ``tree`` (bytes to text to an element tree no deeper than ``MAX_DEPTH``),
``chrome`` (what is left out, what class words say), ``walker`` (blocks, headings and section
paths, notes; ``parse_html``), ``text`` (inline text and link offsets, long paragraphs cut),
``tables``, ``lists`` (and definition lists), ``code`` and ``media`` (images, videos).
"""

from laminae.tasks.crawl.hrefs import MAX_URL_CHARS
from laminae.tasks.parse.document import ParseError
from laminae.tasks.parse.html.lists import LIST_CHUNK_CHARS
from laminae.tasks.parse.html.media import image_text_proxy
from laminae.tasks.parse.html.text import MAX_COMPONENT_CHARS, TextBuilder
from laminae.tasks.parse.html.tree import MAX_DEPTH, decode_html, page_tree
from laminae.tasks.parse.html.walker import HtmlParser, parse_document, parse_html

__all__ = [
    "LIST_CHUNK_CHARS",
    "MAX_COMPONENT_CHARS",
    "MAX_DEPTH",
    "MAX_URL_CHARS",
    "HtmlParser",
    "ParseError",
    "TextBuilder",
    "decode_html",
    "image_text_proxy",
    "page_tree",
    "parse_document",
    "parse_html",
]
