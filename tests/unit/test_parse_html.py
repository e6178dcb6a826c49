"""HTML parse: golden files for the sample site, and the hard cases one by one."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from laminae.tasks.parse.html import ParseError, parse_html
from tests.conftest import GOLDEN, ROOT, golden_text

SITE = ROOT / "examples" / "site"
SITE_GOLDEN = GOLDEN / "site"
BASE = "http://site.test/"


def _render(name: str) -> dict:
    parsed = parse_html((SITE / name).read_bytes(), BASE + name)
    return {
        "title": parsed.title,
        "canonical_url": parsed.canonical_url,
        "lang": parsed.lang,
        "components": [
            {k: v for k, v in asdict(c).items() if v not in (None, [])} for c in parsed.components
        ],
    }


@pytest.mark.parametrize("name", sorted(p.name for p in SITE.glob("*.html")))
def test_sample_page_matches_golden(name):
    golden = SITE_GOLDEN / (name.removesuffix(".html") + ".json")
    got = _render(name)
    expected = golden_text(golden, json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    assert json.loads(json.dumps(got)) == json.loads(expected), (
        f"parse of {name} changed; if intended, regenerate with LAMINAE_UPDATE_GOLDEN=1"
    )


def doc(body: str, head: str = "", *, url: str = "http://h.test/dir/page.html"):
    html = f"<html><head><title>T</title>{head}</head><body>{body}</body></html>"
    return parse_html(html.encode(), url)


def test_boilerplate_is_left_out():
    parsed = doc(
        "<nav><p>Menu item</p></nav><header><nav><a href='/'>Home</a></nav><p>Banner</p></header>"
        "<main><h2>Sec<span class='mw-editsection'>[edit]</span></h2>"
        "<p>Body text<sup class='reference'>[1]</sup>.</p><script>var x = 1;</script>"
        "<style>p {}</style><div style='display:none'><p>Hidden</p></div>"
        "<ol class='references'><li>Ref one</li></ol><div class='navbox'><p>Navbox</p></div></main>"
        "<footer><p>Footer</p></footer>"
    )
    texts = [c.text for c in parsed.components]
    assert texts == ["Body text."]
    assert parsed.components[0].section_path == ["Sec"]


def test_section_paths_follow_heading_levels():
    parsed = doc("<main><h1>A</h1><p>a</p><h2>B</h2><p>b</p><h3>C</h3><p>c</p><h2>D</h2><p>d</p></main>")
    assert [c.section_path for c in parsed.components] == [["A"], ["A", "B"], ["A", "B", "C"], ["A", "D"]]


def test_links_have_offsets_and_resolve_against_base():
    parsed = doc(
        "<main><p>See <a href='other.html#x'>the other page</a> and <a href='#top'>top</a>, "
        "<a href='javascript:void(0)'>js</a>, <a href='/w/index.php?action=edit'>edit</a>.</p></main>",
        head="<base href='http://h.test/base/'>",
    )
    comp = parsed.components[0]
    assert len(comp.links) == 1
    link = comp.links[0]
    assert link.url == "http://h.test/base/other.html"
    assert comp.text[link.start:link.end] == "the other page" == link.anchor


def test_rowspan_colspan_and_multirow_header():
    parsed = doc(
        "<main><table><tr><th rowspan=2>Name</th><th colspan=2>Score</th></tr>"
        "<tr><th>A</th><th>B</th></tr>"
        "<tr><td rowspan=2>x</td><td>1</td><td>2</td></tr><tr><td colspan=2>3</td></tr></table></main>"
    )
    (table,) = parsed.components
    assert table.header == ["Name", "Score / A", "Score / B"]
    assert table.rows == [["x", "1", "2"], ["x", "3", "3"]]
    assert table.table_kind == "data"


def test_a_header_cell_spanning_rows_labels_body_rows():
    """A row holding only a <th rowspan> labels the rows below it: they stay body rows, each with
    the label's text (the label's own row, nothing but the label, is not a row of its own); a header
    row whose spanning cell runs past it stays the header."""
    parsed = doc("<main><table><tr><th>Region</th><th>City</th><th>People</th></tr>"
                 "<tr><th rowspan=3><a href='north.html'>North</a></th></tr>"
                 "<tr><td>Oslo</td><td>700</td></tr><tr><td>Bergen</td><td>290</td></tr>"
                 "<tr><th>South</th><td>Arendal</td><td>45</td></tr></table></main>")
    (table,) = parsed.components
    assert table.header == ["Region", "City", "People"]
    assert table.rows == [["North", "Oslo", "700"], ["North", "Bergen", "290"], ["South", "Arendal", "45"]]
    assert [(lk.url, lk.row) for lk in table.links] == [("http://h.test/dir/north.html", 0)]
    label_only = doc("<main><table><tr><th rowspan=2>North</th></tr><tr><td>Oslo</td><td>700</td></tr></table></main>")
    assert label_only.components[0].header is None
    assert label_only.components[0].rows == [["North", "Oslo", "700"]]
    too_long = doc("<main><table><tr><th rowspan=2>Pos</th><th>Driver</th></tr><tr><td>1</td><td>Hill</td></tr>"
                   "</table></main>")
    assert too_long.components[0].header == ["Pos", "Driver", ""]


def test_infobox_by_class_and_by_shape():
    by_class = doc("<main><table class='infobox'><tr><th colspan=2>Thing</th></tr>"
                   "<tr><th>Color</th><td>Red</td></tr><tr><th>Size</th><td>Big</td></tr></table></main>")
    (box,) = by_class.components
    assert box.table_kind == "infobox" and box.caption == "Thing"
    assert box.rows == [["Color", "Red"], ["Size", "Big"]]
    by_shape = doc("<main><table><tr><th>Color</th><td>Red</td></tr><tr><th>Size</th><td>Big</td></tr></table></main>")
    assert by_shape.components[0].table_kind == "infobox"


def test_nested_table_is_handled_once():
    parsed = doc("<main><table><tr><th>k</th><th>v</th></tr><tr><td>outer</td><td>"
                 "<table><tr><th>a</th><th>b</th></tr><tr><td>inner1</td><td>inner2</td></tr></table>"
                 "</td></tr></table></main>")
    tables = [c for c in parsed.components if c.kind == "table"]
    assert len(tables) == 2
    all_text = " ".join(c.text for c in parsed.components)
    assert all_text.count("inner1") == 1


def test_a_table_of_one_row_or_column_in_a_cell_is_its_text():
    """A line of a table (one row, or one column) inside a cell is the cell's text, where it stands;
    a table of rows and columns inside a cell is a table of its own. Every word is read once."""
    parsed = doc("<main><table><tr><th>Member</th><th>Labels</th></tr>"
                 "<tr><td><table><tr><td>int draw</td><td>(</td><td>int x</td><td>)</td></tr></table></td>"
                 "<td>virtual</td></tr>"
                 "<tr><td>Seasons <table><tr><td>prev1936</td></tr><tr><td>next1938</td></tr></table></td>"
                 "<td>all</td></tr>"
                 "<tr><td>Scores</td><td><table><tr><th>half</th><th>points</th></tr>"
                 "<tr><td>first</td><td>inner9</td></tr></table></td></tr></table></main>")
    outer, inner = parsed.components
    assert outer.rows == [["int draw ( int x )", "virtual"], ["Seasons prev1936 next1938", "all"], ["Scores", ""]]
    assert inner.header == ["half", "points"] and inner.rows == [["first", "inner9"]]
    words = " ".join(c.text for c in parsed.components).split()
    for word in ("draw", "virtual", "prev1936", "next1938", "Scores", "half", "inner9"):
        assert words.count(word) == 1, word


def test_cell_links_know_their_row():
    parsed = doc("<main><table><tr><th>Name</th></tr><tr><td>plain</td></tr>"
                 "<tr><td><a href='/x'>linked</a></td></tr></table></main>")
    (table,) = parsed.components
    assert [(lk.url, lk.row) for lk in table.links] == [("http://h.test/x", 1)]


def test_images_captions_and_sizes():
    parsed = doc(
        "<main><h2>Pics</h2><figure><img src='a.png' alt='Alt A' width='300'>"
        "<figcaption>Cap <a href='/c'>linked</a></figcaption></figure>"
        "<p><img src='icon.png' width='16' height='16'> tiny icon is skipped</p>"
        "<div class='thumb'><div class='thumbinner'><img src='/b.jpg'><div class='thumbcaption'>Thumb cap</div></div></div>"
        "<p><img src='data:image/png;base64,AAAA' width=100></p></main>"
    )
    images = [c for c in parsed.components if c.kind == "image"]
    assert [(i.image_url, i.alt, i.caption, i.width) for i in images] == [
        ("http://h.test/dir/a.png", "Alt A", "Cap linked", 300),
        ("http://h.test/b.jpg", None, "Thumb cap", None),
    ]
    assert images[0].links[0].url == "http://h.test/c"
    assert "Alt A" in images[0].text and "Cap linked" in images[0].text and "Pics" in images[0].text
    assert all("Cap linked" not in c.text for c in parsed.components if c.kind == "paragraph")


def test_lists_are_paragraphs_with_item_segments():
    parsed = doc("<main><ul><li>One <a href='/1'>link</a></li><li>Two<ol><li>Two-a</li></ol></li></ul></main>")
    (comp,) = parsed.components
    assert comp.kind == "paragraph"
    assert [comp.text[s:e] for s, e in comp.segments] == ["One link", "Two", "Two-a"]
    assert comp.text[comp.links[0].start:comp.links[0].end] == "link"


def test_title_and_canonical():
    parsed = doc("<main><p>x</p></main>", head="<link rel='canonical' href='/canon'>")
    assert parsed.title == "T"
    assert parsed.canonical_url == "http://h.test/canon"


def test_non_utf8_bytes_decode():
    html = "<html><head><meta charset='iso-8859-1'><title>Café</title></head><body><p>Crème brûlée</p></body></html>"
    parsed = parse_html(html.encode("latin-1"), "http://h.test/")
    assert parsed.title == "Café"
    assert parsed.components[0].text == "Crème brûlée"


def test_malformed_html_still_parses():
    parsed = parse_html(b"<html><body><p>Open <b>bold <i>both</p><p>Second<table><tr><td>c", "http://h.test/")
    texts = [c.text for c in parsed.components]
    assert "Open bold both" in texts[0]
    assert any("Second" in t for t in texts)


@pytest.mark.parametrize("body", [b"", b"   \n ", b"\x89PNG\r\n\x1a\n\x00\x00\x00binary"])
def test_unusable_bytes_raise_parse_error(body):
    with pytest.raises(ParseError) as raised:
        parse_html(body, "http://h.test/")
    assert raised.value.reason == "unparsable_html"


def test_page_without_content_has_no_components():
    parsed = parse_html(b"<html><head><title>x</title><script>render()</script></head><body><div id=app></div></body></html>",
                        "http://h.test/")
    assert parsed.components == []


def test_headings_with_nothing_under_them_are_text():
    """A heading nothing follows before the next heading of its level or higher (or the page's end)
    is a paragraph of its own under the headings above it, so that a page of headings alone has
    components; a heading with content under it stays a section name only, and so does a site's
    name above the page (a heading that is all a link to a page)."""
    only = doc("<main><h1>Guide</h1><h2>Install</h2><h2>Configure</h2><h3>Options</h3></main>")
    assert [(c.kind, c.text, c.section_path) for c in only.components] == [
        ("paragraph", "Install", ["Guide"]), ("paragraph", "Options", ["Guide", "Configure"])]
    normal = doc("<main><h1><a href='index.html'>Site name</a></h1><h1>Page</h1><p>Intro text.</p>"
                 "<h2>Empty part</h2><h2>Part</h2><p>Part text.</p></main>")
    assert [(c.text, c.section_path) for c in normal.components] == [
        ("Intro text.", ["Page"]), ("Empty part", ["Page"]), ("Part text.", ["Page", "Part"])]
    in_note = doc("<main><h2>Top</h2><p>Top text.</p><div class='note'><p class='admonition-title'>Note</p>"
                  "<h4>Inside</h4></div><h2>Next</h2><p>Next text.</p></main>")
    assert [(c.text, c.section_path) for c in in_note.components] == [
        ("Top text.", ["Top"]), ("Note", ["Top"]), ("Inside", ["Top"]), ("Next text.", ["Next"])]


def test_content_named_like_chrome_stays():
    """Chrome is found by class words on blocks and by whole ids off sections: a section whose id
    is its title's slug, a heading's "toc-backref" link and a docutils sidebar are content."""
    parsed = doc(
        "<main><section id='sidebar'><h2>Sidebar</h2><p>About sidebars.</p></section>"
        "<div class='section' id='footer'><h2><a class='toc-backref' href='#x'>Footers</a></h2><p>About footers.</p></div>"
        "<aside class='sidebar'><p class='sidebar-title'>Aside</p><p>A docutils sidebar.</p></aside>"
        "<div class='sphinxsidebar-like nav'><p>Chrome</p></div><div id='sidebar'><p>Chrome too</p></div></main>"
    )
    assert [(c.section_path, c.text) for c in parsed.components] == [
        (["Sidebar"], "About sidebars."), (["Footers"], "About footers."),
        (["Footers"], "Aside: A docutils sidebar."),
    ]


def test_reference_links_keep_their_text_and_permalinks_go():
    parsed = doc("<main><h2>GIL<a class='headerlink' href='#gil'>¶</a></h2><p>Due to the <a class='reference "
                 "internal' href='g.html#gil'><span>global interpreter lock</span></a>, one thread runs.</p></main>")
    (comp,) = parsed.components
    assert comp.text == "Due to the global interpreter lock, one thread runs." and comp.section_path == ["GIL"]
    assert comp.text[comp.links[0].start:comp.links[0].end] == "global interpreter lock"


def test_long_paragraph_is_cut_at_sentence_ends():
    sentence = "This sentence is one of many in a very long paragraph about bread. "
    parsed = doc(f"<main><p>{sentence * 100}<a href='/x'>link</a>.</p></main>")
    assert len(parsed.components) > 1
    assert all(len(c.text) <= 4000 and c.text.endswith(".") for c in parsed.components)
    assert " ".join(c.text for c in parsed.components) == (sentence * 100).strip() + " link."
    last = parsed.components[-1]
    assert [last.text[lk.start:lk.end] for lk in last.links] == ["link"]


def test_long_list_is_cut_into_chunks_of_items():
    items = "".join(f"<li>Item {i} says something about loaves and their crusts.</li>" for i in range(120))
    parsed = doc(f"<main><ul>{items}<ul><li>Nested straight in the list</li></ul></ul></main>")
    assert len(parsed.components) > 1 and all(len(c.text) <= 2000 for c in parsed.components)
    segments = [c.text[s:e] for c in parsed.components for s, e in c.segments]
    assert segments[0] == "Item 0 says something about loaves and their crusts."
    assert segments[-1] == "Nested straight in the list" and len(segments) == 121


def test_code_block_keeps_lines_and_links():
    parsed = doc("<main><p>Run:</p><pre>\n<span class='gp'>$ </span>make <a href='/t'>test</a>   \n\n"
                 "<span class='lineno'>2</span>echo done\u200b\n</pre></main>")
    code = parsed.components[1]
    assert code.kind == "code" and code.text == "$ make test\n\necho done"
    assert [code.text[lk.start:lk.end] for lk in code.links] == ["test"]


def test_definition_list_short_and_structured():
    short = doc("<main><dl><dt>Crumb</dt><dd>The inside.</dd><dt>Crust</dt><dt>Rind</dt><dd>The outside.</dd></dl></main>")
    (comp,) = short.components
    assert comp.text == "Crumb: The inside.\nCrust, Rind: The outside."
    assert [comp.text[s:e] for s, e in comp.segments] == ["Crumb: The inside.", "Crust, Rind: The outside."]
    api = doc("<main><h2>API</h2><dl><dt>bake(loaf)</dt><dd><p>Bakes a loaf.</p><pre>bake(rye)</pre>"
              "<p>Returns nothing.</p></dd></dl><p>After.</p></main>")
    assert [(c.kind, c.section_path, c.text) for c in api.components] == [
        ("paragraph", ["API", "bake(loaf)"], "bake(loaf): Bakes a loaf."),
        ("code", ["API", "bake(loaf)"], "bake(rye)"),
        ("paragraph", ["API", "bake(loaf)"], "Returns nothing."),
        ("paragraph", ["API"], "After."),
    ]


def test_note_label_and_heading_stay_inside_the_note():
    parsed = doc("<main><h2>Use</h2><div class='admonition warning'><p class='admonition-title'>Warning</p>"
                 "<pre>rm -rf /</pre><p>Never.</p></div><div class='note'><h3 class='title'>Note</h3><p>Mind it.</p></div>"
                 "<p>Then go on.</p></main>")
    assert [(c.kind, c.section_path, c.text) for c in parsed.components] == [
        ("paragraph", ["Use"], "Warning"), ("code", ["Use"], "rm -rf /"), ("paragraph", ["Use"], "Never."),
        ("paragraph", ["Use"], "Note: Mind it."),
        ("paragraph", ["Use"], "Then go on."),
    ]


def test_long_code_block_is_cut_between_lines():
    source = "\n".join(f"def step{i}(dough):\n    return dough + {i}\n" for i in range(300))
    parsed = doc(f"<main><pre>{source}</pre></main>")
    assert len(parsed.components) > 2
    assert all(c.kind == "code" and len(c.text) <= 2000 for c in parsed.components)
    assert all(c.text.startswith("def step") for c in parsed.components), "cut at blank lines, between functions"
    assert "\n\n".join(c.text for c in parsed.components) == source.strip()


def test_an_empty_content_anchor_is_no_content_root():
    """Texinfo's single-page manuals open with ``<span id="content"></span>``: the page is read
    from its body, not from that empty anchor; a content root that holds text still wins."""
    manual = ("<html><body><span id='content'></span><h1>Manual</h1><p>First chapter text here.</p>"
              "<h2>Functions</h2><p>Function: expand (expr) expands products.</p></body></html>")
    page = parse_html(manual.encode(), "https://example.org/manual.html")
    assert [c.text for c in page.components] == ["First chapter text here.", "Function: expand (expr) expands products."]
    framed = ("<html><body><nav><p>Site menu entry</p></nav><div id='content'><p>The page's own text.</p></div>"
              "</body></html>")
    assert [c.text for c in parse_html(framed.encode(), "https://example.org/p.html").components] == ["The page's own text."]
