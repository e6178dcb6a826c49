"""An index on object storage: the sample site built into s3:// on a local S3-compatible server
(moto's server mode, started by the test), then read, searched, reported and refreshed there."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import laminae
from laminae.flows.demo import SiteServer

pytestmark = pytest.mark.slow
BUCKET = "laminae-test"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    boto3 = pytest.importorskip("boto3")  # comes with moto, in the dev extra
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("w")
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except OSError:
            time.sleep(0.2)
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": endpoint}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket=BUCKET)
    yield client
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.terminate()
    server.wait(timeout=10)
    log.close()


@pytest.fixture(scope="module")
def remote_index(s3, tmp_path_factory, prefect_harness):
    from laminae.flows.build import build_index, refresh_index

    tmp = tmp_path_factory.mktemp("remote")
    uri = f"s3://{BUCKET}/indexes/site"
    cwd = os.getcwd()
    os.chdir(tmp)  # a stray local path named after the URI would appear here
    try:
        with SiteServer(port=0) as site:
            seeds = tmp / "seeds.txt"
            seeds.write_text("\n".join(site.seeds()) + "\n")
            settings = {"embed": {"device": "cpu", "threads": 1}}
            built = build_index(seeds=str(seeds), index=uri, settings=settings)
            local = build_index(seeds=str(seeds), index=str(tmp / "local"), settings=settings)
            refreshed = refresh_index(index=uri)
    finally:
        os.chdir(cwd)
    return uri, built, local, refreshed, tmp


def test_build_on_s3_matches_the_local_build(remote_index, s3):
    uri, built, local, _, tmp = remote_index
    assert built["status"] == "success" and built["counts"] == local["counts"]
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="indexes/site/")
            for o in page.get("Contents", [])]
    assert any(k.startswith("indexes/site/raw/") for k in keys)  # the raw store follows the index
    assert "indexes/site/_manifests/LATEST" in keys and "indexes/site/report.html" in keys
    assert any(k.startswith("indexes/site/components.lance/") for k in keys)
    assert not (tmp / "s3:").exists()
    index = laminae.open(uri)
    assert index.stats()["documents"] == 14


def test_reader_moves_on_s3(remote_index, tmp_path, monkeypatch):
    uri, *_ = remote_index
    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path))  # the view's local snapshot goes there
    index = laminae.open(uri)
    image = next(c for c in index.table("components").to_arrow().to_pylist() if c["kind"] == "image"
                 and c["image_key"])
    assert index.get([image["id"]])[0]["image"]  # bytes from the raw store on S3
    hits = index.search("rye", layer=1, k=3, mode="fts")
    assert hits and "rye" in index.get([hits[0].id])[0]["text"].lower()
    query = index.graph.layers[1].vectors[0]
    assert index.documents(query, k=3, granularity=2)


def test_reader_of_s3_keeps_its_view_in_the_local_cache(remote_index, tmp_path, monkeypatch, caplog):
    import numpy as np

    from laminae import view_loading
    from laminae.graph import Graph
    from laminae.schemas.storage import snapshot_dir

    uri, *_ = remote_index
    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path / "cache"))
    index = laminae.open(uri)
    cached = snapshot_dir(uri, index.version, index.manifest["run_id"])
    assert str(cached).startswith(str(tmp_path / "cache" / "snapshots"))
    graph = index.graph  # streamed from the tables on S3 into the cache, then memory-mapped
    assert (cached / "COMPLETE").exists() and isinstance(graph.layers[2].vectors, np.memmap)
    view = Graph({name: index.table(name) for name in ("documents", "components", "subcomponents", "edges")},
                 int(index.embedder["dim"]))
    for a, b in zip(view.layers, graph.layers, strict=True):
        assert list(a.ids) == list(b.ids) and np.array_equal(a.vectors, b.vectors)
        assert np.array_equal(a.parent, b.parent) and np.array_equal(a.starts, b.starts)
    assert view.out_links == graph.out_links and view.component_links == graph.component_links

    def refuse(*args, **kwargs):
        raise AssertionError("the cached snapshot should be read, not written again")

    monkeypatch.setattr(view_loading, "write_snapshot", refuse)
    again = laminae.open(uri)
    q = graph.layers[1].vectors[0]
    assert [h.id for h in again.documents(q, k=3, granularity=2)] == [h.id for h in index.documents(q, k=3, granularity=2)]

    monkeypatch.undo()
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(blocked))
    with caplog.at_level("WARNING", logger="laminae.snapshots"):
        fallback = laminae.open(uri).graph
    assert not isinstance(fallback.layers[2].vectors, np.memmap)  # in memory, from the tables
    assert "LAMINAE_CACHE_DIR" in caplog.text


def test_refresh_on_s3_changes_nothing(remote_index):
    _, _, _, refreshed, _ = remote_index
    assert refreshed["status"] == "success"
    assert refreshed["embedded"] == 0 and refreshed["changes"]["unchanged"] == 14
