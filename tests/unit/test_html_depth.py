"""HTML parse (issue 29 part 2): no text is dropped silently. Deep trees keep their text and cannot
exhaust Python's stack, huge text nodes are kept, huge addresses and titles are cut with a
``truncated_html`` warning."""

from __future__ import annotations

import sys

import pytest

from laminae.tasks.parse.html import MAX_DEPTH, MAX_URL_CHARS, page_tree, parse_html
from tests.conftest import page

URL = "http://h.test/page.html"


def _text(parsed) -> str:
    return "\n".join(c.text for c in parsed.components)


def _depth(root) -> int:
    deepest, stack = 0, [(root, 0)]
    while stack:
        el, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in el)
    return deepest


CONTENT = ("<h2>Results</h2><p>Rye grew well in 1901.</p>"
           "<table><tr><th>Year</th><th>Crop</th></tr><tr><td>1901</td><td>Rye</td></tr>"
           "<tr><td>1902</td><td>Oats</td></tr></table>"
           "<ul><li>first item</li><li>second item</li></ul><p>The last words of the page.</p>")


@pytest.mark.parametrize("fonts", [300, 2100, 20_000])
def test_unclosed_font_tags_keep_the_rest_of_the_page(fonts):
    # 300: deeper than libxml2's 255 levels without huge_tree (it dropped all from "Deep words"
    # on); 2,100 and 20,000: deeper than its hard 2,048, read by html.parser
    body = page("Fonts", "<p>Before the fonts.</p>" + "<font face='Arial'>" * fonts + "Deep words. " + CONTENT)
    parsed = parse_html(body, URL)
    expected = ("Before the fonts. Deep words. Results Rye grew well in 1901. Year Crop 1901 Rye 1902 Oats "
                "first item second item The last words of the page.")
    assert " ".join(_text(parsed).split()) == expected  # (an inline element holding blocks is read as one run of text, deep or not)
    fallback = [w for w in parsed.warnings if w.startswith("deep_html") and "html.parser" in w]
    assert bool(fallback) == (fonts > 2048), parsed.warnings
    if fonts < 2048:  # the fonts were unwrapped: nothing had to be flattened, nothing to warn of
        assert parsed.warnings == []


def test_formatting_tags_past_the_depth_are_unwrapped_and_links_keep_their_text():
    body = page("Bold", "<p>Start " + "<b><i>" * 300 + "bold <a href='/x'>link <em>text</em></a> end"
                + "</i></b>" * 300 + "</p><table><tr><th>Year</th><th>Crop</th></tr><tr><td>1901</td>"
                "<td>Rye</td></tr></table>")
    parsed = parse_html(body, URL)
    assert parsed.warnings == []
    first = parsed.components[0]
    assert first.text == "Start bold link text end"
    assert [(lk.url, lk.anchor) for lk in first.links] == [("http://h.test/x", "link text")]
    assert parsed.components[1].rows == [["1901", "Rye"]]


@pytest.mark.parametrize("wrap", [
    ("<div>", "</div>"),
    ("<div class='note'>", "</div>"),  # an admonition: three calls a level
    ("<blockquote>", "</blockquote>"),
    ("<ul><li>x ", "</li></ul>"),
    ("<dl><dt>term</dt><dd><p>para</p>", "</dd></dl>"),
    ("<table><tr><td>", "</td></tr></table>"),
    ("<figure><p>f</p>", "</figure>"),
    ("<a href='/x'>", "</a>"),  # (a link closes the one before it: not deep at all)
    ("<section><h3>s</h3>", "</section>"),
])
@pytest.mark.parametrize("levels", [150, 1500, 3000])
def test_deep_nesting_of_any_kind_neither_drops_text_nor_exhausts_the_stack(wrap, levels):
    opening, closing = wrap
    body = page("Deep", "<p>Top words.</p>" + opening * levels + "<p>Innermost words.</p>" + closing * levels
                + "<p>Closing words after the nesting.</p>")

    def nested(frames: int):  # the parse as the build runs it, under a few hundred frames of its own
        return nested(frames - 1) if frames else parse_html(body, URL)

    parsed = nested(300)
    text = _text(parsed)
    assert "Top words." in text and "Innermost words." in text and "Closing words after the nesting." in text
    # bare wrapper divs are unwrapped and a link closes the one before it: neither loses anything
    warned = any(w.startswith("deep_html") for w in parsed.warnings)
    link = opening == "<a href='/x'>"
    assert warned == (not link and (levels > 2048 or opening != "<div>")), parsed.warnings
    assert sys.getrecursionlimit() == 1000  # the test proves nothing under a raised limit


def test_a_deep_pre_keeps_its_lines_and_a_deep_video_its_source():
    spans = "<span class='x'>" * 400
    body = page("Deep code", "<pre>" + spans + "line one\nline two" + "</span>" * 400 + "</pre>"
                + "<div>" * 300 + "<video controls><source src='/film.mp4'><track kind='captions' src='/film.vtt'>"
                + "<p>fallback</p></video>" + "</div>" * 300 + "<p>After.</p>")
    parsed = parse_html(body, URL)
    code = [c for c in parsed.components if c.kind == "code"]
    assert code and code[0].text == "line one\nline two"
    videos = [c for c in parsed.components if c.kind == "video"]
    assert [(v.video_url, v.captions_url) for v in videos] == [("http://h.test/film.mp4", "http://h.test/film.vtt")]
    assert "After." in _text(parsed)


def test_deep_navigation_stays_left_out():
    body = page("Nav", "<div>" * 250 + "<nav><ul><li><a href='/home'>Home menu entry</a></li></ul></nav>"
                + "<div hidden><p>Hidden words</p></div><p>Body words.</p>" + "</div>" * 250)
    text = _text(parse_html(body, URL))
    assert "Body words." in text
    assert "Home menu entry" not in text and "Hidden words" not in text


def test_a_tree_is_made_no_deeper_than_the_limit_and_shallow_pages_are_untouched():
    root, warnings = page_tree("<html><body>" + "<div><span>t</span>" * 3000 + "</body></html>")
    assert _depth(root) <= MAX_DEPTH + 2 and warnings
    shallow = page("Plain", CONTENT)
    root, warnings = page_tree(shallow.decode())
    assert warnings == [] and _depth(root) < 10
    assert parse_html(shallow, URL).warnings == []


def test_text_order_is_kept_through_unwrapping_and_flattening():
    pieces = [f"w{i}" for i in range(400)]
    html = "".join(f"<div>{w} <b>{w}b</b> " for w in pieces) + "end" + "</div>" * 400
    parsed = parse_html(page("Order", html), URL)
    words = _text(parsed).split()
    expected = [x for w in pieces for x in (w, w + "b")] + ["end"]
    assert words == expected


def test_a_huge_text_node_is_kept_whole():
    # over libxml2's 10 MB text-node limit: without huge_tree the page had 0 components
    words = ("Wheat and rye were sown. " * 500_000)[:12_500_000]
    parsed = parse_html(page("Huge", f"<p>{words}</p><p>The paragraph after it.</p>"), URL)
    assert parsed.warnings == []
    assert sum(len(c.text) for c in parsed.components) >= len(words.strip()) - len(parsed.components)
    assert parsed.components[-1].text == "The paragraph after it."
    one_word = parse_html(page("Huge", "<p>" + "x" * 12_000_000 + "</p><p>After.</p>"), URL)
    assert sum(len(c.text) for c in one_word.components) == 12_000_000 + len("After.")


def test_a_huge_href_is_left_out_with_a_warning_and_the_page_goes_on():
    href = "/" + "a" * 12_000_000
    body = page("Long link", f"<p>Before <a href='{href}'>the long link</a> and "
                f"<a href='/short'>a short one</a>.</p><img src='/{'b' * 9000}.png' alt='picture'>"
                "<p>The rest of the page.</p>")
    parsed = parse_html(body, URL)
    text = _text(parsed)
    assert "Before the long link and a short one." in text and "The rest of the page." in text
    assert [lk.url for c in parsed.components for lk in c.links] == ["http://h.test/short"]
    assert not [c for c in parsed.components if c.kind == "image"]
    [warning] = [w for w in parsed.warnings if w.startswith("truncated_html")]
    assert "2 addresses" in warning and f"{MAX_URL_CHARS:,}" in warning and "12,000,001 characters" in warning


def test_a_huge_base_href_is_ignored_with_a_warning():
    body = page("Base", "<p><a href='next.html'>next</a></p>", head=f"<base href='http://other.test/{'c' * 9000}/'>")
    parsed = parse_html(body, URL)
    assert [lk.url for c in parsed.components for lk in c.links] == ["http://h.test/next.html"]
    assert any(w.startswith("truncated_html") for w in parsed.warnings)


def test_a_huge_title_is_cut_with_a_warning_and_a_huge_heading_stays_a_paragraph():
    title = "T" * 50_000
    heading = "Heading words " * 1000
    parsed = parse_html(page(title, f"<h2>{heading}</h2><p>Below the heading.</p><img src='/a.png' alt='a'>"), URL)
    assert len(parsed.title) == 1000
    assert any(w.startswith("truncated_html: the title (50,000 characters)") for w in parsed.warnings)
    *pieces, below, image = parsed.components
    assert " ".join(c.text for c in pieces) == heading.strip()  # (in pieces, as any long paragraph)
    assert below.text == "Below the heading." and len(below.section_path[0]) <= 602
    assert len(image.text) < 2000  # the image's text repeats title and section, cut
