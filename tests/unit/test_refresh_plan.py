"""The refresh plan: splitting pages into unchanged and to-parse is linear at corpus size; a seed
folder that cannot be listed, or lists nothing where it held files, drops nothing; the deletion
bound (rsync's --max-delete)."""

from __future__ import annotations

import time

import pytest

from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.refresh import deletion_bound, plan_refresh


def test_plan_refresh_splits_twenty_thousand_pages_in_well_under_a_second():
    pages = [FetchResult(url=f"http://x.test/{i}", content_type="text/html", raw_key=f"k{i}") for i in range(20_000)]
    previous = {r.url: {"raw_key": r.raw_key if i % 100 else "old"} for i, r in enumerate(pages)}
    by_url = {r.url: f"d{i}" for i, r in enumerate(pages)}
    start = time.perf_counter()
    plan = plan_refresh(pages, previous, by_url, 0, False)
    assert time.perf_counter() - start < 2  # comparing every pair took about 90 s
    assert [r.url for r in plan.parse] == [f"http://x.test/{i}" for i in range(0, 20_000, 100)]
    assert plan.changes == {"unchanged": 19_800, "changed": 200, "added": 0, "removed": 0}


FOLDER = "file:///data/site/"
HELD = {f"{FOLDER}p{i}.html": f"d{i}" for i in range(4)}


def test_a_folder_seed_that_cannot_be_listed_drops_nothing():
    """Moved aside (not_found) or unreadable: the listing failed, so nothing it did not reach is
    dropped (rsync skips deletions after an I/O error); each is one kept entry naming the folder."""
    for reason in ("not_found", "unreadable"):
        listing = FetchResult(url=FOLDER, kind="folder", error=reason, message="cannot be listed")
        plan = plan_refresh([listing], {}, HELD, 0, False, [FOLDER])
        assert plan.removed == [] and plan.changes["removed"] == 0
        assert [(url, why) for url, why, _ in plan.kept] == [(FOLDER, "deletions_skipped")]
        assert "4 indexed document(s) this run did not reach are kept (4 under it)" in plan.kept[0][2]


def test_an_emptied_folder_seed_drops_nothing_but_a_shrunk_one_does():
    plan = plan_refresh([], {}, HELD, 0, False, [FOLDER])  # listed, no file: an unmounted mount point
    assert plan.removed == [] and [why for _, why, _ in plan.kept] == ["deletions_skipped"]
    one = FetchResult(url=f"{FOLDER}p0.html", content_type="text/html", raw_key="k0")
    plan = plan_refresh([one], {one.url: {"raw_key": "k0"}}, HELD, 0, False, [FOLDER])
    assert plan.removed == ["d1", "d2", "d3"] and plan.kept == [] and plan.dropped == set(HELD) - {one.url}


def test_a_failed_listing_with_nothing_left_to_drop_is_no_warning():
    listing = FetchResult(url=FOLDER, kind="folder", error="unreadable", message="cannot be listed")
    pages = [FetchResult(url=u, content_type="text/html", raw_key=u) for u in HELD]
    plan = plan_refresh([listing, *pages], {u: {"raw_key": u} for u in HELD}, HELD, 0, False, [FOLDER])
    assert plan.kept == [] and plan.removed == []


def test_a_gone_file_still_goes():
    gone = FetchResult(url=f"{FOLDER}p1.html", error="not_found", message="gone")
    rest = [FetchResult(url=u, content_type="text/html", raw_key=u) for u in HELD if u != gone.url]
    plan = plan_refresh([gone, *rest], {u: {"raw_key": u} for u in HELD}, HELD, 0, False, [FOLDER])
    assert plan.removed == ["d1"] and plan.gone == {gone.url}


@pytest.mark.parametrize(("count", "total", "refused"), [
    (20, 20, False),  # at max_delete_count: always allowed
    (21, 100, False),  # within max_delete_fraction
    (21, 40, True),  # past both
    (51, 100, True),
    (50, 100, False),
])
def test_the_deletion_bound_needs_both_the_count_and_the_share_passed(count, total, refused):
    reason = deletion_bound(count, total, 20, 0.5, "/ix")
    assert (reason is not None) == refused
    if refused:
        assert f"delete {count} of the index's {total}" in reason and "--allow-mass-delete" in reason
