"""Schemas are declared once and checked against a snapshot; ids are deterministic and stable."""

from __future__ import annotations

import pyarrow as pa
import pytest

from laminae.schemas import document_id, node_id, normalize_url, table_schemas
from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import build_nodes
from laminae.tasks.parse.html import parse_html
from tests.conftest import GOLDEN, golden_text

SNAPSHOT = GOLDEN / "schemas.txt"


def render_schemas(dim: int = 384) -> str:
    out = []
    for name, schema in table_schemas(dim).items():
        out.append(f"== {name}")
        out.extend(f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in schema)
    return "\n".join(out) + "\n"


def test_schema_snapshot():
    assert render_schemas() == golden_text(SNAPSHOT, render_schemas()), (
        "a table schema changed: bump SCHEMA_VERSION if readers must notice, then regenerate with "
        "LAMINAE_UPDATE_GOLDEN=1 pytest tests/unit/test_schemas.py, then again without it"
    )


def test_vectors_are_fixed_size_float32():
    for name in ("documents", "components", "subcomponents"):
        vec = table_schemas(7)[name].field("vector").type
        assert pa.types.is_fixed_size_list(vec) and vec.list_size == 7
        assert vec.value_type == pa.float32()


def test_child_tables_carry_document_and_parent():
    for name in ("components", "subcomponents"):
        schema = table_schemas(4)[name]
        assert schema.field("document_id").nullable is False
        assert schema.field("parent_id").nullable is False


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("HTTP://Example.COM:80/a b#frag", "http://example.com/a%20b"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com:8443/x?q=1", "https://example.com:8443/x?q=1"),
    ],
)
def test_normalize_url(a, b):
    assert normalize_url(a) == b
    assert document_id(a) == document_id(b)


def test_node_ids_depend_on_occurrence_and_document():
    assert node_id("d1", "paragraph", "x", 0) != node_id("d1", "paragraph", "x", 1)
    assert node_id("d1", "paragraph", "x", 0) != node_id("d2", "paragraph", "x", 0)
    assert node_id("d1", "paragraph", "x", 0) == node_id("d1", "paragraph", "x", 0)


def _nodes(body: str):
    html = f"<html><head><title>T</title></head><body><main>{body}</main></body></html>".encode()
    url = "http://site.test/p"
    fetch = FetchResult(url=url, final_url=url, raw_key="k", content_type="text/html")
    return build_nodes(parse_html(html, url), document_id(url), fetch, ParseConfig())


def test_inserting_a_paragraph_keeps_the_other_ids():
    before = _nodes("<p>Alpha one. Alpha two.</p><p>Beta.</p><p>Alpha one. Alpha two.</p>"
                    "<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>")
    after = _nodes("<p>New first paragraph.</p><p>Alpha one. Alpha two.</p><p>Beta.</p>"
                   "<p>Alpha one. Alpha two.</p>"
                   "<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>")
    old = {c["id"] for c in before.components}
    new = {c["id"] for c in after.components}
    assert old < new and len(new - old) == 1
    old_subs = {s["id"] for s in before.subcomponents}
    new_subs = {s["id"] for s in after.subcomponents}
    assert old_subs < new_subs and len(new_subs - old_subs) == 1
    # duplicates stay distinct
    assert len(old) == len(before.components)


def test_updating_golden_files_always_fails_the_run(tmp_path, monkeypatch):
    target = tmp_path / "golden" / "x.txt"
    monkeypatch.delenv("LAMINAE_UPDATE_GOLDEN", raising=False)
    target.parent.mkdir()
    target.write_text("old\n")
    assert golden_text(target, "new\n") == "old\n"
    monkeypatch.setenv("LAMINAE_UPDATE_GOLDEN", "1")
    with pytest.raises(pytest.fail.Exception, match="rewritten"):
        golden_text(target, "new\n")
    assert target.read_text() == "new\n"
