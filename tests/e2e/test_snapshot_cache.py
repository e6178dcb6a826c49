"""The snapshot cache of an index on object storage (moto's S3 server, started as in
test_object_store): keyed by the manifest's run id, so an index deleted and built again at the same
URI, whose manifest numbers start over, is never served from the old index's cache; a damaged
cached snapshot is streamed again."""

from __future__ import annotations

import logging
import os
import uuid

import pytest

import laminae
from laminae.snapshots import snapshot_problem
from tests.e2e.test_object_store import BUCKET, s3  # noqa: F401 - the moto server fixture
from tests.support.synthetic import make_synthetic_index

pytestmark = pytest.mark.slow


def _build(uri: str, seed: int) -> int:
    """A small index at ``uri`` and a second manifest naming a run of its own (as every build's does)."""
    from laminae.tasks.storage.index_store import IndexStore

    make_synthetic_index(uri, documents=5, components_per_document=2, subcomponents_per_component=2, dim=8,
                         seed=seed, snapshot=False)
    return IndexStore(uri).publish(f"build-{seed}-{uuid.uuid4().hex[:8]}", {})


def _delete(s3_client, prefix: str) -> None:
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    for page in pages:
        for item in page.get("Contents", []):
            s3_client.delete_object(Bucket=BUCKET, Key=item["Key"])


def _documents(index: laminae.Index) -> list[str]:
    return sorted(index.graph.layers[0].ids)


def test_an_index_built_again_at_the_same_uri_is_read_afresh(s3, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path / "cache"))
    uri = f"s3://{BUCKET}/indexes/rebuilt"
    _build(uri, seed=1)
    first = laminae.open(uri)
    before = _documents(first)  # streamed into the cache
    assert snapshot_problem(first.snapshot_path) is None

    _delete(s3, "indexes/rebuilt/")
    _build(uri, seed=2)
    second = laminae.open(uri)
    assert second.version == first.version and second.snapshot_path != first.snapshot_path
    tables = sorted(second.table("documents").search().select(["id"]).limit(None).to_arrow().column("id").to_pylist())
    assert _documents(second) == tables and tables != before  # the new index's, not the cached old one's

    _build(uri, seed=3)  # a third build at the same URI (manifests 3 and 4)
    third = laminae.open(uri)
    _documents(third)
    cached = sorted(p.name for p in third.snapshot_path.parent.iterdir() if not p.name.startswith("."))
    assert cached == sorted([second.snapshot_path.name, third.snapshot_path.name])  # the two newest


def test_a_damaged_cached_snapshot_is_streamed_again(s3, tmp_path, monkeypatch, caplog):  # noqa: F811
    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path / "cache"))
    uri = f"s3://{BUCKET}/indexes/damaged-cache"
    _build(uri, seed=4)
    expected = _documents(laminae.open(uri))
    path = laminae.open(uri).snapshot_path
    vectors = path / "vectors1.npy"
    os.truncate(vectors, vectors.stat().st_size - 8)
    with caplog.at_level(logging.WARNING, logger="laminae.view_loading"):
        again = laminae.open(uri)
    assert "vectors1.npy is truncated" in caplog.text and "streamed again" in caplog.text
    assert _documents(again) == expected and snapshot_problem(path) is None
