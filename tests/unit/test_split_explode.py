"""Sentences with spans (pysbd) and table rows kept with their header."""

from __future__ import annotations

import pytest

from laminae.schemas import document_id
from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import build_nodes
from laminae.tasks.nodes.sentences import split_sentences
from laminae.tasks.nodes.table_rows import explode_table, row_text
from laminae.tasks.parse.html import parse_html
from tests.conftest import ROOT


def test_sentence_spans_are_substrings_and_respect_abbreviations():
    text = "Dr. Smith bakes bread. It rises  slowly! Does it? Yes."
    spans = split_sentences(text)
    sentences = [text[s:e] for s, e in spans]
    assert sentences == ["Dr. Smith bakes bread.", "It rises  slowly!", "Does it?", "Yes."]


def test_segments_are_split_separately():
    text = "First item\nSecond item. Two sentences."
    spans = split_sentences(text, [(0, 10), (11, len(text))])
    assert [text[s:e] for s, e in spans] == ["First item", "Second item.", "Two sentences."]


def test_row_text_pairs_header_and_cells():
    assert row_text(["Grain", "Protein"], ["Rye", "9%"]) == "Grain: Rye | Protein: 9%"
    assert row_text(None, ["a", "", "b"]) == "a | b"
    rows = explode_table(None, [["Type", "Staple"]], "infobox", "Bread")
    assert rows[0].text == "Bread | Type: Staple" and rows[0].cells == ["Type", "Staple"]


def test_links_are_attributed_to_sentence_row_and_component():
    url = "http://h.test/p"
    html = (b"<html><head><title>P</title></head><body><main>"
            b"<p>No link here. This one has <a href='/a'>a link</a>. None again.</p>"
            b"<table><tr><th>k</th></tr><tr><td>x</td></tr><tr><td><a href='/b'>b</a></td></tr></table>"
            b"</main></body></html>")
    fetch = FetchResult(url=url, final_url=url, raw_key="k", content_type="text/html")
    nodes = build_nodes(parse_html(html, url), document_id(url), fetch, ParseConfig())
    by_id = {n["id"]: n for n in nodes.components + nodes.subcomponents}
    links = [e for e in nodes.edges if e["kind"] == "links_to"]
    sources = sorted((by_id[e["src_id"]]["kind"], by_id[e["src_id"]]["text"], e["target_url"]) for e in links)
    assert sources == [
        ("paragraph", "No link here. This one has a link. None again.", "http://h.test/a"),
        ("row", "k: b", "http://h.test/b"),
        ("sentence", "This one has a link.", "http://h.test/a"),
        ("table", "k\nx\nb", "http://h.test/b"),
    ]
    assert all(e["dst_id"] == document_id(e["target_url"]) for e in links)
    contains = [e for e in nodes.edges if e["kind"] == "contains"]
    assert len(contains) == len(nodes.components) + len(nodes.subcomponents)
    for sub in nodes.subcomponents:
        if sub["kind"] == "sentence":
            parent = by_id[sub["parent_id"]]
            assert parent["text"][sub["char_start"]:sub["char_end"]] == sub["text"]


def test_colspan_cells_are_said_once_in_row_text():
    assert row_text(["A", "B", "C"], ["wide", "wide", "3"]) == "A: wide | C: 3"


def test_sentences_are_exactly_what_pysbd_segment_gives():

    import pysbd

    from laminae.tasks.nodes.sentences import _sentences
    from laminae.tasks.parse.pdf import parse_pdf
    from tests.support.synthetic_pdf import report_pdf

    site = ROOT / "examples" / "site"
    texts = [c.text for path in sorted(site.glob("*.html"))
             for c in parse_html(path.read_bytes(), f"http://site.test/{path.name}").components]
    texts += [c.text for c in parse_pdf(report_pdf(pages=4, seed=3), "http://site.test/r.pdf").components]
    texts += [
        "Ha. Ha. Ha. Ha.", "aa. aa. aaa. aa.", "He said: “Stop.” Then he left… Why?", "Dr. Smith met Mr. J. R. Jones Jr. at 5 p.m. on Jan. 3.",
        "1. Knead. 2. Proof. 3. Bake.", "a) flour b) water c) salt", "Line one\nline two.\n\nNext.", "Tabs\tand\u00a0nbsp. End",
        "Visit www.example.com. Or e-mail a.b@c.io. Done!", "(Parenthetical. Sentences.) And after.", "", "   ", "No stop",
        "'Quoted.' 'Again.'", "The U.S. economy grew 3.5% in Q1. Prices rose.", "What?! Really?! Yes.",
    ]
    segmenter = pysbd.Segmenter(language="en", clean=False)
    assert len(texts) > 80
    for text in texts:
        assert _sentences(text, "en") == (segmenter.segment(text) if text else []), text


def test_a_text_without_a_possible_sentence_end_skips_pysbd_with_the_same_spans(monkeypatch):
    import random

    import pysbd

    import laminae.tasks.nodes.sentences as sentences

    rng = random.Random(5)
    words = ["Mr", "Dr", "i", "ii", "(", "[", "]", '"', "'", "-", "–", "•", "*", "1", "No", "vs", "etc", "U", "S",
             ":", ";", ",", "/", "#", "%", "&", "\t", "\u00a0", "Inc", "St", "Jr", "ΑΒΓ", "日本", "مرحبا"]
    texts = ["A heading", "  a caption with no stop  ", "Mr Smith vs Jones Inc", "i ii iii"]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(400)]
    for language in ("en", "de", "el", "ar", "ja"):
        segmenter = pysbd.Segmenter(language=language, clean=False)
        for text in texts:
            if sentences._boundary(language).search(text):  # Greek ';' is a question mark
                continue
            assert sentences._located(text, language) == sentences._located_by_pysbd(text, language), text
            assert "".join(segmenter.segment(text)).strip() == text.strip()
    monkeypatch.setattr(sentences, "_sentences", lambda text, language: pytest.fail("pysbd ran"))
    assert split_sentences("  Gluten – the protein network  ") == [(2, 30)]
    assert split_sentences("rye flour; water", segments=[(0, 9), (11, 16)]) == [(0, 9), (11, 16)]
