"""What the MCP server and the terminal show of a node: cut text, tables, section paths, pictures."""

from __future__ import annotations

from laminae.index import Hit
from laminae.views import cut, hit_view, node_view, picture


def test_cut_marks_what_it_leaves_out():
    assert cut("short", 10) == "short"
    assert cut(None, 10) is None
    text = "word " * 100
    shown = cut(text, 42)
    assert shown.startswith(text[:40]) and shown.endswith(f"[{len(text) - 42} more characters]")


def test_table_view_pages_rows_and_names_its_document():
    doc = {"id": "d1", "layer": 0, "kind": "html", "title": "Ovens", "url": "http://x/o", "final_url": "http://x/o2",
           "canonical_url": None}
    table = {"id": "c1", "layer": 1, "kind": "table", "document_id": "d1", "parent_id": "d1",
             "section_path": ["Ovens", "Kinds"], "text": "t" * 50, "caption": "Kinds of oven", "table_kind": "data",
             "table_header": ["Oven", "Fuel"], "table_rows": [["deck", "gas"], ["wood-fired", "w" * 500], ["steam", "x"]]}
    view = node_view(table, document=doc, max_chars=20, max_rows=2)
    assert view["title"] == "Ovens" and view["url"] == "http://x/o2"  # after redirects
    assert view["section_path"] == ["Ovens", "Kinds"] and view["text"].endswith("[30 more characters]")
    assert view["header"] == ["Oven", "Fuel"] and view["rows_total"] == 3 and len(view["rows"]) == 2
    assert view["rows"][1][1].endswith("[300 more characters]")


def test_row_takes_its_section_from_the_table_and_objects_their_crop():
    parent = {"id": "c1", "section_path": ["Ovens"]}
    row = {"id": "s1", "layer": 2, "kind": "row", "document_id": "d1", "parent_id": "c1", "text": "Oven: deck",
           "header": ["Oven"], "cells": ["deck"]}
    assert node_view(row, parent=parent)["section_path"] == ["Ovens"]
    obj = {"id": "s2", "layer": 2, "kind": "object", "document_id": "d1", "parent_id": "c2", "text": "person",
           "label": "person", "score": 0.68190002, "bbox": [1.04, 2.0, 3.0, 4.0], "crop": b"\x89PNG..."}
    view = node_view(obj)
    assert view["has_image"] and view["score"] == 0.6819 and view["bbox"] == [1.0, 2.0, 3.0, 4.0]
    assert picture(obj) == (b"\x89PNG...", "image/png")
    image = {"id": "c2", "layer": 1, "kind": "image", "document_id": "d1", "parent_id": "d1", "image": b"\xff\xd8",
             "image_mime": "image/jpeg"}
    assert picture(image) == (b"\xff\xd8", "image/jpeg")
    assert picture({"id": "c3", "kind": "paragraph"}) is None


def test_hit_view_keeps_the_dense_similarity_and_the_probability():
    hit = Hit("c1", 0.0312345678, 1, "table", "d1", text="x" * 30,
              extra={"title": "T", "url": "u", "similarity": 0.5, "probability": 0.87654321})
    view = hit_view(hit, max_chars=10)
    assert view == {"id": "c1", "score": 0.031235, "layer": 1, "kind": "table", "document_id": "d1", "title": "T",
                    "url": "u", "text": "x" * 10 + " … [20 more characters]", "similarity": 0.5,
                    "probability": 0.876543}
    del hit.extra["probability"]
    assert "probability" not in hit_view(hit)
