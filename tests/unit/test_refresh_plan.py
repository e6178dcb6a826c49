"""The refresh plan at corpus size: splitting pages into unchanged and to-parse is linear."""

from __future__ import annotations

import time

from laminae.tasks.crawl.fetch import FetchResult
from laminae.tasks.refresh import plan_refresh


def test_plan_refresh_splits_twenty_thousand_pages_in_well_under_a_second():
    pages = [FetchResult(url=f"http://x.test/{i}", content_type="text/html", raw_key=f"k{i}") for i in range(20_000)]
    previous = {r.url: {"raw_key": r.raw_key if i % 100 else "old"} for i, r in enumerate(pages)}
    by_url = {r.url: f"d{i}" for i, r in enumerate(pages)}
    start = time.perf_counter()
    plan = plan_refresh(pages, previous, by_url, 0, False)
    assert time.perf_counter() - start < 2  # comparing every pair took about 90 s
    assert [r.url for r in plan.parse] == [f"http://x.test/{i}" for i in range(0, 20_000, 100)]
    assert plan.changes == {"unchanged": 19_800, "changed": 200, "added": 0, "removed": 0}
