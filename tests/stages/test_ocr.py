"""OCR on the real recognizer: pictures and image-only PDF pages with known words, read back."""

from __future__ import annotations

import json
import os
import random
import re

import pytest

from laminae.schemas.pictures import load_image
from laminae.schemas.storage import IndexFiles
from laminae.tasks.config import OcrConfig
from laminae.tasks.model_runtime import loaded_models
from laminae.tasks.nodes import ocr_lines
from laminae.tasks.nodes.document_nodes import id_maker
from laminae.tasks.nodes.ocr_lines import TEXT_MARK, cache_path, read_image_text
from laminae.tasks.parse import ocr_int8
from laminae.tasks.parse.ocr import (
    ENGINE,
    TextLine,
    engine_name,
    read_lines,
    reading_order,
    repair_spacing,
)
from laminae.tasks.parse.pdf import parse_pdf
from laminae.tasks.storage.rawstore import RawStore
from tests.support.scans import random_lines, scanned_pdf, text_picture


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())  # as the full-text index splits words


def _recall(expected: list[str], got: str) -> float:
    found = _words(got)
    return sum(w in found for w in expected) / len(expected)


def test_spacing_is_repaired_only_where_every_part_is_a_word():
    assert repair_spacing("Wheatharvestreachedrecordlevels in 1923") == "Wheat harvest reached record levels in 1923"
    assert repair_spacing("Pumpernickel from Westphalian bakeries") == "Pumpernickel from Westphalian bakeries"
    assert repair_spacing("batch QX7-2291, Mondragon, Kensington, Hetherington") == (
        "batch QX7-2291, Mondragon, Kensington, Hetherington")  # names the dictionary lacks stay whole
    assert repair_spacing("Annualrainfall2019:1,204mm") == "Annual rainfall 2019:1,204 mm"
    assert repair_spacing("the 21st batch, QX7 and A4 in 1923harvest") == "the 21st batch, QX7 and A4 in 1923 harvest"
    assert repair_spacing("Stonevalley ryebushel river deckvillage") == "Stone valley rye bushel river deck village"
    assert repair_spacing("Annex:a letter, 12:30, 1,204") == "Annex: a letter, 12:30, 1,204"
    assert repair_spacing("") == ""


def test_reading_order_is_by_line_then_left_to_right():
    right = TextLine("right", 0.9, (300, 12, 400, 40))
    left = TextLine("left", 0.9, (10, 10, 100, 38))
    below = TextLine("below", 0.9, (10, 60, 100, 88))
    assert [t.text for t in reading_order([below, right, left])] == ["left", "right", "below"]


def test_a_picture_reads_back_its_words_with_boxes():
    lines = ["Annual rainfall 2019: 1,204 mm", "Wheat harvest reached record levels"]
    picture = load_image(text_picture(lines))
    found = read_lines(picture, OcrConfig())
    assert [round(_recall(_words(e), f.text), 2) for e, f in zip(lines, found, strict=True)] == [1.0, 1.0]
    for line in found:
        x0, y0, x1, y1 = line.bbox
        assert 0 <= x0 < x1 <= picture.size[0] and 0 <= y0 < y1 <= picture.size[1] and 0.5 <= line.confidence <= 1
    assert found[0].bbox[1] < found[1].bbox[1]
    assert read_lines(load_image(text_picture([])), OcrConfig()) == []  # a blank picture: nothing


def test_an_image_only_pdf_becomes_paragraphs_with_page_and_box():
    rng = random.Random(7)
    first, second = random_lines(rng, 3), random_lines(rng, 3)
    second[-1] += "."  # the paragraph ends on page 1 (one that does not runs on into page 2)
    body = scanned_pdf([[*first, "", *second], random_lines(rng, 2)])
    parsed = parse_pdf(body, "http://example.test/scan.pdf")
    paragraphs = [c for c in parsed.components if c.kind == "paragraph"]
    assert any(w.startswith("ocr_used: 2 of the 2 pages") for w in parsed.warnings)
    assert not any(w.startswith("no_text_layer") for w in parsed.warnings)
    assert not [c for c in parsed.components if c.kind == "image"]  # the scan itself is now text
    page_one = [c for c in paragraphs if c.page == 1]
    assert len(page_one) == 2  # the blank line between the two groups splits them
    assert _recall(_words(" ".join(first)), page_one[0].text) >= 0.95
    assert _recall(_words(" ".join(second)), page_one[1].text) >= 0.95
    assert all(0 <= c.bbox[0] < c.bbox[2] <= 595 and 0 <= c.bbox[1] < c.bbox[3] <= 842 for c in paragraphs)
    assert {c.page for c in paragraphs} == {1, 2}

    off = parse_pdf(body, "http://example.test/scan.pdf", ocr=OcrConfig(pdf_pages=False))
    assert not [c for c in off.components if c.kind == "paragraph"]
    assert any(w.startswith("no_text_layer") and "OCR is off" in w for w in off.warnings)
    capped = parse_pdf(body, "http://example.test/scan.pdf", ocr=OcrConfig(max_pages=1))
    assert any(w.startswith("ocr_skipped: pages 2") for w in capped.warnings)
    assert {c.page for c in capped.components if c.kind == "paragraph"} == {1}


def _image(raw: RawStore, doc: str, cid: str, data: bytes, width: int, height: int) -> dict:
    return {"id": cid, "document_id": doc, "kind": "image", "text": "Image: a chart.", "image_key": raw.put(data),
            "image_url": f"http://example.test/{cid}.png", "image_mime": "image/png", "image_width": width,
            "image_height": height, "section_path": []}


def test_the_ocr_stage_makes_text_nodes_and_reads_each_picture_once(tmp_path, monkeypatch):
    raw, files = RawStore(tmp_path), IndexFiles(tmp_path)
    chart = text_picture(["Rainfall by month", "Barley yield per acre"], chart=True)
    width, height = load_image(chart).size
    shown_twice = [_image(raw, "d1", "c1", chart, width, height), _image(raw, "d2", "c2", chart, width, height)]
    icon = _image(raw, "d1", "c3", text_picture(["x"], width=40, font_size=10), 40, 20)
    broken = _image(raw, "d1", "c4", b"\x89PNG\r\n\x1a\n broken", 500, 300)
    calls = []
    real = ocr_lines.read_lines
    monkeypatch.setattr(ocr_lines, "read_lines",
                        lambda picture, cfg, engine=None: calls.append(1) or real(picture, cfg, engine))

    found = read_image_text([*shown_twice, icon, broken], raw, files, OcrConfig(), "run1", id_maker)
    assert len(calls) == 1 and (found.read, found.cached, found.skipped) == (1, 0, 1)  # one picture, one icon
    assert [(p["stage"], p["reason"], p["url"]) for p in found.problems] == [("ocr", "ocr_failed", broken["image_url"])]
    for image in shown_twice:
        rows = [r for r in found.rows if r["parent_id"] == image["id"]]
        assert [r["kind"] for r in rows] == ["text", "text"] and rows[0]["document_id"] == image["document_id"]
        assert _recall(["rainfall", "by", "month"], rows[0]["text"]) == 1.0
        assert _recall(["barley", "yield", "per", "acre"], rows[1]["text"]) == 1.0
        assert all(0 <= v <= 1 for r in rows for v in r["bbox_norm"]) and rows[0]["score"] >= 0.5
        assert image["text"].startswith("Image: a chart." + TEXT_MARK) and "Barley" in image["text"]
    assert {e["src_id"] for e in found.edges} == {"c1", "c2"} and len(found.edges) == 4
    assert "c3" not in {r["parent_id"] for r in found.rows} and icon["text"] == "Image: a chart."
    assert json.loads(files.read_text(cache_path(shown_twice[0]["image_key"], OcrConfig())))["lines"][0][0] == rows[0]["text"]

    again = [_image(raw, "d3", "c5", chart, width, height)]
    second = read_image_text(again, raw, files, OcrConfig(), "run2", id_maker)
    assert len(calls) == 1 and (second.read, second.cached) == (0, 1)  # from the cache, not the recognizer
    assert [r["text"] for r in second.rows] == [r["text"] for r in found.rows if r["parent_id"] == "c1"]
    assert read_image_text(again, raw, files, OcrConfig(enabled=False), "run3", id_maker).rows == []


def test_pictures_read_at_once_read_as_one_at_a_time(tmp_path, monkeypatch):
    raw = RawStore(tmp_path)
    rng = random.Random(3)
    pictures = [text_picture(random_lines(rng, 2, words=3), font_size=24) for _ in range(5)]
    images = [_image(raw, f"d{i}", f"c{i}", data, *load_image(data).size) for i, data in enumerate(pictures)]
    images.append(_image(raw, "d9", "c9", b"\x89PNG\r\n\x1a\n broken", 500, 300))
    engines = set()
    real = ocr_lines.read_lines
    monkeypatch.setattr(ocr_lines, "read_lines",
                        lambda picture, cfg, engine=None: engines.add(id(engine)) or real(picture, cfg, engine))

    def run(workers: int, folder: str):
        batch = [dict(image) for image in images]
        found = read_image_text(batch, raw, IndexFiles(tmp_path / folder), OcrConfig(workers=workers), "run1",
                                id_maker)
        return found, [image["text"] for image in batch]

    one, one_texts = run(1, "one")
    assert len(engines) == 1
    engines.clear()
    two, two_texts = run(2, "two")
    assert len(engines) == 2  # each thread reads with its own recognizer
    assert two.rows == one.rows and two_texts == one_texts and (two.read, one.read) == (5, 5)
    assert [p["url"] for p in two.problems] == [images[-1]["image_url"]]
    assert ("rapidocr", engine_name(OcrConfig()), "cpu", 1, OcrConfig().detect_side, 1) in loaded_models()
    assert ocr_lines.workers(OcrConfig()) == len(os.sched_getaffinity(0))
    pair = set(engines)
    engines.clear()
    lone = read_image_text([dict(images[0])], raw, IndexFiles(tmp_path / "lone"), OcrConfig(workers=2),
                           "run2", id_maker)
    assert lone.rows == [r for r in one.rows if r["parent_id"] == "c0"]
    assert len(engines) == 1 and engines <= pair  # one picture is read by slot 0: no third recognizer


def test_a_document_reads_its_largest_pictures_first(tmp_path):
    raw, files = RawStore(tmp_path), IndexFiles(tmp_path)
    small = _image(raw, "d1", "c1", text_picture(["Small oven"], width=300), 300, 80)
    large = _image(raw, "d1", "c2", text_picture(["Large oven"], width=600), 600, 80)
    found = read_image_text([small, large], raw, files, OcrConfig(max_pictures=1), "run1", id_maker)
    assert {r["parent_id"] for r in found.rows} == {"c2"} and found.skipped == 1


@pytest.mark.parametrize("value", [{"min_confidence": 1.5}, {"render_dpi": 10}, {"max_pictures": -1}])
def test_bad_ocr_settings_are_refused(value):
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        OcrConfig(**value)


def test_a_gigantic_page_is_rendered_within_the_pixel_budget():
    import pymupdf

    from laminae.tasks.parse.pdf.scans import render_page

    doc = pymupdf.open()
    page = doc.new_page(width=5000, height=5000)  # 108 Mpx at 150 dpi
    cfg = OcrConfig(max_render_pixels=4_000_000)
    picture, scale = render_page(page, cfg)
    assert picture.size[0] * picture.size[1] <= cfg.max_render_pixels
    assert abs(picture.size[0] * scale - 5000) < 1  # pixels map back onto the page's points


def test_the_int8_recognizer_is_quantized_once_and_reads_as_many_words_as_fp32(tmp_path, monkeypatch):
    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path / "cache"))
    before = ocr_int8.EXPORTS
    graph = ocr_int8.int8_recognizer()
    assert graph.parent == tmp_path / "cache" / "onnx" and before + 1 == ocr_int8.EXPORTS
    assert ocr_int8.int8_recognizer() == graph and before + 1 == ocr_int8.EXPORTS  # cached, not quantized again
    assert graph.stat().st_size < ocr_int8.fp32_recognizer_path().stat().st_size / 2
    rng = random.Random(11)
    pictures = [(lines, load_image(text_picture(lines, font_size=size)))
                for size in (16, 24, 34) for lines in [random_lines(rng, 2, words=4) for _ in range(3)]]
    int8, fp32 = OcrConfig(precision="int8"), OcrConfig(precision="fp32")
    assert engine_name(int8) != engine_name(fp32) and ocr_lines.cache_path("k", int8) != ocr_lines.cache_path("k", fp32)
    recall = {}
    for cfg in (int8, fp32):
        words = [(w, " ".join(line.text for line in read_lines(picture, cfg)))
                 for lines, picture in pictures for w in _words(" ".join(lines))]
        recall[cfg.precision] = sum(w in _words(got) for w, got in words) / len(words)
    assert recall["int8"] >= 0.95 and recall["int8"] >= recall["fp32"] - 0.03, recall


def test_the_recognizer_is_fp32_unless_int8_is_asked_for_and_int8_needs_onnx(monkeypatch):
    assert OcrConfig().precision == "fp32" and engine_name(OcrConfig()) == ENGINE
    assert engine_name(OcrConfig(precision="int8")) == ENGINE + "#int8"
    monkeypatch.setattr(ocr_int8, "onnx_available", lambda: False)
    with pytest.raises(ocr_int8.OcrQuantizeError, match="LAMINAE_OCR__PRECISION at fp32"):
        ocr_int8.quantize_recognizer(ocr_int8.fp32_recognizer_path(), ocr_int8.cache_dir() / "never.onnx")
