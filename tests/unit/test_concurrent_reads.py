"""One ``laminae.Index`` shared by threads (the MCP server's workers): mixed moves started at once on
a fresh reader, so that the view, the id maps, the table handles and the query model are all
first needed concurrently, give exactly what the same moves give one after another."""

from __future__ import annotations

import threading
import zlib

import numpy as np
import pytest

import laminae
from tests.support.synthetic import make_synthetic_index

DIM = 16
THREADS = 8


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("concurrent") / "index"
    make_synthetic_index(str(path), documents=30, components_per_document=4, subcomponents_per_component=3,
                         dim=DIM, links_per_document=3, seed=11)
    return str(path)


class OneAtATime:
    """A query model that fails when two threads call it at once (as a shared Hugging Face fast
    tokenizer does: "Already borrowed"), and embeds a text deterministically."""

    def __init__(self) -> None:
        self.inside = threading.Lock()
        self.calls = 0

    def __call__(self, text: str) -> np.ndarray:
        if not self.inside.acquire(blocking=False):
            raise RuntimeError("Already borrowed")
        try:
            self.calls += 1
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            return rng.standard_normal(DIM).astype(np.float32)
        finally:
            self.inside.release()


def _moves(index: laminae.Index, i: int) -> list:
    """The i-th mix of moves: text and vector queries, every kind of move."""
    docs = [str(index.graph.layers[0].ids[d]) for d in (i % 30, (i * 7) % 30)]
    text = f"keyword{(i * 10) % 997} sentence {i}"
    vector = np.random.default_rng(i).standard_normal(DIM).astype(np.float32)
    hits = lambda found: [(h.id, round(h.score, 5)) for h in found]  # noqa: E731
    beam = index.beam_search([vector, text], beam=5, k=4)
    return [
        hits(index.search(text, k=5)),  # retrieve: dense, BM25 and one query per term
        hits(index.search(text, layer=2, k=5, mode="hybrid")),
        hits(index.search(vector, layer=0, k=5)),
        hits(index.documents(text, k=5, granularity=1)),
        hits(index.documents(vector, k=5, scope="local", anchors=docs[:1], granularity=2)),
        hits(index.components(text, docs, k=5)),
        [(u, v, round(s, 5)) for u, v, s in beam.edges],
        [n["id"] for n in index.get([h[0] for h in hits(index.search(vector, layer=2, k=3))] + docs)],
        index.neighbors(docs, direction="both"),
    ]


@pytest.mark.parametrize("search", ["exact", "compact"])
def test_threads_sharing_one_reader_get_the_serial_results(built, search):
    serial = laminae.open(built, embed=OneAtATime(), search=search)
    expected = [_moves(serial, i) for i in range(THREADS * 2)]

    model = OneAtATime()
    shared = laminae.open(built, embed=model, search=search)  # nothing loaded yet
    start = threading.Barrier(THREADS)
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        start.wait()
        try:
            for i in (t, t + THREADS):
                results[i] = _moves(shared, i)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [results[i] for i in range(THREADS * 2)] == expected
    assert model.calls > THREADS  # every text query went through the model, one at a time
