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


def test_reader_moves_on_s3(remote_index):
    uri, *_ = remote_index
    index = laminae.open(uri)
    image = next(c for c in index.table("components").to_arrow().to_pylist() if c["kind"] == "image"
                 and c["image_key"])
    assert index.get([image["id"]])[0]["image"]  # bytes from the raw store on S3
    hits = index.search("rye", layer=1, k=3, mode="fts")
    assert hits and "rye" in index.get([hits[0].id])[0]["text"].lower()
    query = index.graph.layers[1].vectors[0]  # loaded from the tables: no snapshot on object storage
    assert index.documents(query, k=3, granularity=2)


def test_refresh_on_s3_changes_nothing(remote_index):
    _, _, _, refreshed, _ = remote_index
    assert refreshed["status"] == "success"
    assert refreshed["embedded"] == 0 and refreshed["changes"]["unchanged"] == 14
