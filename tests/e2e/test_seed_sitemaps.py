"""End-to-end: a sitemap seed (a JSONL seed flagged ``"sitemap": true``) is built, remembered and
refreshed; pages its lastmod vouches for are not requested again."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

import laminae
from tests.conftest import Route, page

pytestmark = pytest.mark.slow
SETTINGS = {"crawl": {"backoff": 0.01, "retries": 0, "timeout_read": 2.0}, "embed": {"device": "cpu", "threads": 1}}


def urlset(*entries: tuple[str, str | None]) -> bytes:
    rows = "".join(f"<url><loc>{loc}</loc>{f'<lastmod>{mod}</lastmod>' if mod else ''}</url>" for loc, mod in entries)
    return (f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{rows}</urlset>").encode()


def test_a_sitemap_seed_builds_and_refreshes_by_lastmod(server, tmp_path, prefect_harness):
    from laminae.flows.build import build_index, refresh_index

    s = server
    long_ago = (datetime.now(UTC) - timedelta(days=365)).isoformat()
    s.routes["/feed.xml"] = Route(body=urlset((s.url("/a"), long_ago), (s.url("/b"), None)),
                                  content_type="application/xml")
    s.routes["/a"] = Route(body=page("A", "<p>Rye needs a long proof.</p>"))
    s.routes["/b"] = Route(body=page("B", "<p>Spelt is an old wheat.</p>"))
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps({"url": s.url("/feed.xml"), "sitemap": True, "team": "bakery"}) + "\n")
    index = str(tmp_path / "index")
    first = build_index(seeds=str(seeds), index=index, settings=SETTINGS)
    assert first["status"] == "success" and first["documents_indexed"] == 2
    docs = laminae.open(index).table("documents").to_arrow().to_pylist()
    assert {d["url"] for d in docs} == {s.url("/a"), s.url("/b")}
    assert all(json.loads(d["annotations"]) == {"team": "bakery"} for d in docs)

    s.requests.clear()
    same = refresh_index(index=index)  # the remembered seed is still a sitemap
    assert same["changes"] == {"unchanged": 2, "changed": 0, "added": 0, "removed": 0}
    assert "/feed.xml" in s.requests and "/b" in s.requests and "/a" not in s.requests

    s.routes["/a"] = Route(body=page("A", "<p>Rye needs a long, cool proof.</p>"))
    s.routes["/c"] = Route(body=page("C", "<p>Emmer is older still.</p>"))
    s.routes["/feed.xml"] = Route(body=urlset((s.url("/a"), (datetime.now(UTC) + timedelta(minutes=1)).isoformat()),
                                              (s.url("/c"), None)), content_type="application/xml")
    s.requests.clear()
    edited = refresh_index(index=index)
    assert "/a" in s.requests
    assert edited["changes"] == {"unchanged": 0, "changed": 1, "added": 1, "removed": 1}
    assert {d["url"] for d in laminae.open(index).table("documents").to_arrow().to_pylist()} == {s.url("/a"),
                                                                                                s.url("/c")}
