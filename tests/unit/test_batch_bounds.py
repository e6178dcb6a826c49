"""A run's pages in batches: every page once, in order, the first batch a quarter of the others."""

from __future__ import annotations

from laminae.tasks.run import batch_bounds


def test_the_first_batch_is_a_quarter_and_every_page_is_in_one_batch():
    assert batch_bounds(200, 64) == [(0, 16), (16, 80), (80, 144), (144, 200)]
    assert batch_bounds(64, 64) == [(0, 64)]
    assert batch_bounds(65, 64) == [(0, 16), (16, 65)]
    assert batch_bounds(3, 1) == [(0, 1), (1, 2), (2, 3)]
    assert batch_bounds(0, 64) == []
    for count in range(0, 300, 7):
        for size in (1, 2, 3, 5, 64, 100):
            bounds = batch_bounds(count, size)
            pages = [i for start, end in bounds for i in range(start, end)]
            assert pages == list(range(count))
            assert all(0 < end - start <= size for start, end in bounds)
            if count > size:
                assert bounds[0][1] == -(-size // 4)
