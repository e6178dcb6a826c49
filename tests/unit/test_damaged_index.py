"""Readers that fail clearly (issue 28): every damaged or missing file on the read path is an
``IndexOpenError`` naming the file and the fix, a damaged snapshot is rebuilt from the tables, a
table version cleaned up under a pinned reader says so, and a query's full-text part is bounded
in terms. Real indexes (``tests.support.synthetic``) copied per case and damaged on disk."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pytest

import laminae
from laminae import ranking
from laminae.query import MAX_QUERY_TERMS, MAX_TERM_CHARS, STOP_WORDS, bounded_query, query_terms
from laminae.snapshots import snapshot_problem
from tests.support.synthetic import make_synthetic_index

DIM = 16


def _set(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _truncate(path: Path) -> None:  # the last bytes lost, as by a write cut short
    os.truncate(path, path.stat().st_size - 8)


def _manifest_without(*keys: str) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        path = root / "_manifests" / "00000001.json"
        manifest = json.loads(path.read_text())
        for key in keys:
            part = manifest
            *parents, last = key.split(".")
            for p in parents:
                part = part[p]
            del part[last]
        path.write_text(json.dumps(manifest))
    return damage


def _short_doc(root: Path) -> None:  # a whole .npy file, one row short of its layer
    path = root / "_snapshots" / "00000001" / "doc1.npy"
    np.save(path, np.load(path)[:-1])


SNAPSHOT = Path("_snapshots") / "00000001"

# damage done to a copy of the index -> what the error must name
OPEN_DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "latest-garbage": (lambda r: _set(r / "_manifests/LATEST", b"seven\n"), "LATEST holds 'seven"),
    "latest-binary": (lambda r: _set(r / "_manifests/LATEST", b"\xff\xfe\x00"), "not a manifest number"),
    "latest-empty": (lambda r: _set(r / "_manifests/LATEST", b""), "LATEST is empty"),
    "latest-names-a-missing-manifest": (lambda r: _set(r / "_manifests/LATEST", b"9"), "00000009.json is missing"),
    "manifest-missing": (lambda r: (r / "_manifests/00000001.json").unlink(), "00000001.json is missing"),
    "manifest-truncated": (lambda r: _truncate(r / "_manifests/00000001.json"), "00000001.json is not valid JSON"),
    "manifest-not-json": (lambda r: _set(r / "_manifests/00000001.json", b"<html>"), "not valid JSON"),
    "manifest-not-utf8": (lambda r: _set(r / "_manifests/00000001.json", b"{\xff}"), "not UTF-8"),
    "manifest-a-list": (lambda r: _set(r / "_manifests/00000001.json", b"[1, 2]"), "JSON list, not an object"),
    "manifest-without-version": (_manifest_without("version"), "lacks 'version'"),
    "manifest-without-tables": (_manifest_without("tables"), "lacks 'tables'"),
    "manifest-without-a-table": (_manifest_without("tables.subcomponents"), "tables lack subcomponents"),
    "manifest-without-dim": (_manifest_without("embedder.dim"), "embedder has no dimension"),
}

SNAPSHOT_DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "vectors-truncated": (lambda r: _truncate(r / SNAPSHOT / "vectors2.npy"), "vectors2.npy is truncated"),
    "codes-truncated": (lambda r: _truncate(r / SNAPSHOT / "codes1.npy"), "codes1.npy is truncated"),
    "pointers-truncated": (lambda r: _truncate(r / SNAPSHOT / "doc0.npy"), "doc0.npy is truncated"),
    "nodes-truncated": (lambda r: _truncate(r / SNAPSHOT / "nodes1.arrow"), "nodes1.arrow is not a readable"),
    "starts-missing": (lambda r: (r / SNAPSHOT / "parent_starts2.npy").unlink(), "parent_starts2.npy is missing"),
    "links-missing": (lambda r: (r / SNAPSHOT / "links.npy").unlink(), "links.npy is missing"),
    "complete-missing": (lambda r: (r / SNAPSHOT / "COMPLETE").unlink(), "COMPLETE is missing"),
    "lengths-disagree": (_short_doc, "doc1.npy holds 35 rows; nodes1.arrow holds 36"),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("built") / "index"
    make_synthetic_index(str(path), documents=12, components_per_document=3, subcomponents_per_component=3,
                         dim=DIM, links_per_document=2, seed=3)
    return path


@pytest.fixture
def copy(built, tmp_path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(built, target)
    return target


def _query(seed: int) -> np.ndarray:
    q = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return q / np.linalg.norm(q)


def _answers(index: laminae.Index) -> list:
    q = _query(1)
    return [[(h.id, round(h.score, 5)) for h in index.search(q, layer=layer, k=5)] for layer in (0, 1, 2)] + \
        [index.beam_search([q, _query(2)], beam=4, k=3).edges, index.neighbors([index.graph.layers[0].ids[0]])]


@pytest.mark.parametrize("case", sorted(OPEN_DAMAGE))
def test_a_damaged_manifest_or_latest_is_an_open_error_naming_the_file(copy, case):
    damage, named = OPEN_DAMAGE[case]
    damage(copy)
    with pytest.raises(laminae.IndexOpenError) as caught:
        laminae.open(str(copy))
    message = str(caught.value)
    assert named in message and str(copy) in message
    assert "laminae refresh" in message or "version" in message  # and the way out
    assert "\n" not in message


def test_a_version_given_skips_a_damaged_latest(copy):
    (copy / "_manifests/LATEST").write_bytes(b"garbage")
    assert laminae.open(str(copy), version=1).stats()["documents"] == 12
    with pytest.raises(laminae.IndexOpenError, match="no manifest version 4"):
        laminae.open(str(copy), version=4)
    with pytest.raises(laminae.ReaderArgumentError, match="manifest number"):
        laminae.open(str(copy), version="latest")


@pytest.mark.parametrize("case", sorted(SNAPSHOT_DAMAGE))
def test_snapshot_problem_names_the_damaged_file(copy, case):
    damage, named = SNAPSHOT_DAMAGE[case]
    assert snapshot_problem(copy / SNAPSHOT, DIM) is None
    damage(copy)
    problem = snapshot_problem(copy / SNAPSHOT, DIM)
    assert problem is not None and named in problem and "\n" not in problem


def test_snapshot_problem_checks_the_width_and_a_missing_folder(copy):
    assert "the index's are 8-d" in snapshot_problem(copy / SNAPSHOT, 8)
    assert "directory is missing" in snapshot_problem(copy / "_snapshots" / "00000002")


@pytest.mark.parametrize("case", sorted(SNAPSHOT_DAMAGE))
def test_a_damaged_snapshot_is_rebuilt_from_the_tables_with_a_warning(built, copy, case, caplog):
    expected = _answers(laminae.open(str(built)))
    damage, named = SNAPSHOT_DAMAGE[case]
    damage(copy)
    with caplog.at_level(logging.WARNING, logger="laminae.view_loading"):
        index = laminae.open(str(copy))
    assert named in caplog.text and "rebuilt it from the tables" in caplog.text
    assert snapshot_problem(copy / SNAPSHOT, DIM) is None
    assert _answers(index) == expected
    assert not [p.name for p in (copy / "_snapshots").iterdir() if p.name.startswith(".")]  # no leftovers


def test_readers_rebuilding_one_snapshot_at_once_all_open_it(built, copy):
    expected = _answers(laminae.open(str(built)))
    _truncate(copy / SNAPSHOT / "vectors1.npy")
    start = threading.Barrier(4)
    results: list = []
    errors: list[BaseException] = []

    def reader() -> None:
        start.wait()
        try:
            results.append(_answers(laminae.open(str(copy))))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [expected] * 4
    assert snapshot_problem(copy / SNAPSHOT, DIM) is None
    assert sorted(p.name for p in (copy / "_snapshots").iterdir()) == ["00000001"]


def test_a_snapshot_damaged_after_open_is_an_open_error(copy):
    index = laminae.open(str(copy))
    _truncate(copy / SNAPSHOT / "nodes2.arrow")
    with pytest.raises(laminae.IndexOpenError, match="nodes2.arrow.*laminae compact --index"):
        index.graph  # noqa: B018 - loads the view


def _two_versions_first_cleaned(root: Path) -> laminae.Index:
    """An index with manifests 1 and 2 whose tables keep only manifest 2's versions (the writer's
    cleanup), and a reader opened on manifest 1 before the cleanup, its tables not yet read."""
    from laminae.tasks.storage.index_store import IndexStore
    from laminae.tasks.storage.versions import CLEANUP_MARGIN_S

    make_synthetic_index(str(root), documents=4, components_per_document=2, subcomponents_per_component=2,
                         dim=DIM, seed=1)
    before = laminae.open(str(root), version=1)
    # LanceDB prunes by age and the cleanup keeps what is younger than the kept versions by a
    # margin: builds are that far apart in practice, two synthetic ones are not
    time.sleep(CLEANUP_MARGIN_S + 0.2)
    make_synthetic_index(str(root), documents=4, components_per_document=2, subcomponents_per_component=2,
                         dim=DIM, seed=2)
    freed = IndexStore(str(root)).clean_up(keep=1)
    assert freed.get("documents")
    return before


def test_a_table_version_cleaned_up_is_an_open_error_saying_so(tmp_path):
    before = _two_versions_first_cleaned(tmp_path / "index")
    for read in (before.stats, lambda: before.get(["x"]), lambda: before.search("keyword0", layer=2, mode="fts")):
        with pytest.raises(laminae.IndexOpenError, match="which manifest 1 names, no longer exists.*cleaned up"):
            read()
    pinned = laminae.open(str(tmp_path / "index"), version=1)  # open reads no table: the check is verify's
    with pytest.raises(laminae.IndexOpenError, match="table 'documents'.*LAMINAE_KEEP_MANIFESTS"):
        pinned.verify()
    latest = laminae.open(str(tmp_path / "index"))
    latest.verify()
    assert latest.stats()["documents"] == 8


def test_an_old_readers_every_move_fails_alike_once_its_versions_are_cleaned_up(tmp_path):
    """An unpinned reader that read its tables and loaded its view, then three refreshes (the
    first deletes every one of its documents, so compaction rewrites their files) and a cleanup
    keeping one manifest: its data files are gone. Every move, those answered from the in-memory
    view (dense search, hops, navigation) included, raises one IndexOpenError naming a table
    whose version is gone and the fix: none answers from a manifest whose tables are gone, none
    raises LanceDB's own error, none quotes another table's."""
    from laminae.tasks.storage.index_store import IndexStore
    from laminae.tasks.storage.versions import CLEANUP_MARGIN_S

    root = str(tmp_path / "index")
    sizes = {"documents": 60, "components_per_document": 3, "subcomponents_per_component": 3, "dim": DIM}
    make_synthetic_index(root, seed=1, **sizes)
    old = laminae.open(root)
    documents = list(old.graph.layers[0].ids)
    assert old.stats()["documents"] == 60 and old.get(documents[:1]) and old.frame(1).collect().height == 180
    assert old.search(_query(1), layer=1, k=3)
    lazy = old.frame(1)  # made before the cleanup, collected after it
    first_files = set(os.listdir(tmp_path / "index" / "components.lance" / "data"))
    store = IndexStore(root)
    # each step older than the cleanup's margin, so that only the newest build's versions are kept
    time.sleep(CLEANUP_MARGIN_S + 0.2)
    make_synthetic_index(root, seed=2, **sizes)
    store.delete_documents(documents)
    time.sleep(CLEANUP_MARGIN_S + 0.2)
    store.compact_tables()
    store.publish("deleted", {})
    time.sleep(CLEANUP_MARGIN_S + 0.2)
    make_synthetic_index(root, seed=3, **sizes)
    time.sleep(CLEANUP_MARGIN_S + 0.2)
    store.clean_up(keep=1)
    assert not first_files & set(os.listdir(tmp_path / "index" / "components.lance" / "data"))

    q = _query(1)
    moves = {"dense search": lambda: old.search(q, layer=1, k=3), "retrieve": lambda: old.retrieve(q, k=3),
             "documents": lambda: old.documents(q, k=3), "beam search": lambda: old.beam_search([q], beam=4),
             "neighbors": lambda: old.neighbors(documents[:1]), "children": lambda: old.children(documents[0]),
             "frame": lambda: old.frame(1).collect(), "frame made before": lazy.collect, "stats": old.stats, "get": lambda: old.get(documents[:1]),
             "full text": lambda: old.search("keyword0", layer=2, mode="fts"), "verify": old.verify}
    said = set()
    for name, move in moves.items():
        with pytest.raises(laminae.IndexOpenError) as caught:
            move()
        said.add(str(caught.value))
        assert "no longer exists (Version" in str(caught.value), (name, str(caught.value))
    assert len(said) == 1, said  # one error, whatever the move
    message = said.pop()
    assert "which manifest 1 names" in message and "Open the index again" in message
    assert "lance error" not in message and "Not found" not in message
    latest = laminae.open(root)  # what the message says to do
    assert latest.stats()["documents"] == 120 and latest.search(q, layer=1, k=3)


def test_a_kept_manifest_reads_though_the_embedding_cache_keeps_only_its_newest_version(tmp_path):
    """The cleanup keeps the embedding cache's newest version only (no reader reads it): a reader of
    an older kept manifest must neither check that table out nor verify it."""
    from laminae.schemas.tables import table_schemas
    from laminae.tasks.storage.index_store import IndexStore
    from laminae.tasks.storage.versions import CLEANUP_MARGIN_S

    root = str(tmp_path / "index")
    for seed in (1, 2):
        make_synthetic_index(root, documents=4, components_per_document=2, subcomponents_per_component=2,
                             dim=DIM, seed=seed)
        cache = IndexStore(root).table("embeddings")  # a build's new cache rows: a newer cache version
        cache.add(pa.Table.from_pylist([{"id": f"k{seed}", "model_id": "m", "vector": [0.5] * DIM}],
                                       schema=table_schemas(DIM)["embeddings"]))
        time.sleep(CLEANUP_MARGIN_S + 0.2)  # see _two_versions_first_cleaned
    IndexStore(root).publish("after-the-cache-grew", {})  # manifest 3
    IndexStore(root).clean_up(keep=2)
    cached = json.loads((tmp_path / "index" / "_manifests" / "00000002.json").read_text())["tables"]["embeddings"]
    with pytest.raises(ValueError, match="no longer exists"):  # the cache's version manifest 2 names is gone
        lancedb.connect(root).open_table("embeddings").checkout(cached)
    kept = laminae.open(root, version=2)
    kept.verify()
    assert kept.stats()["documents"] == 8 and kept.search("keyword0", layer=2, mode="fts")
    with pytest.raises(laminae.IndexOpenError, match="no longer exists"):
        laminae.open(root, version=1).verify()


def test_verify_passes_on_a_whole_index(copy):
    laminae.open(str(copy)).verify()


# -- the full-text part of a query, bounded -----------------------------------------------------
def test_query_terms_drop_repeats_and_stop_words_and_keep_the_longest():
    assert query_terms("What is the Rye of the rye bread?") == ["rye", "bread"]
    words = [f"w{i:03d}" for i in range(100)]
    long = " ".join(words[:40] + ["sourdough", "a", "the"] + words[40:])
    kept = query_terms(long)
    assert len(kept) == MAX_QUERY_TERMS and "sourdough" in kept and kept == sorted(kept, key=long.index)
    assert query_terms("x" * (MAX_TERM_CHARS + 1) + " " + " ".join(words), limit=3) == ["w000", "w001", "w002"]
    assert bounded_query("what is rye bread") == "what is rye bread"  # a question is searched as it is
    assert bounded_query(long) == " ".join(kept)


def test_a_long_query_searches_its_longest_terms(built):
    index = laminae.open(str(built), embed=lambda text: _query(len(text)))
    fillers = [a + b + c for a in "bcdfg" for b in "aeiou" for c in "klmnp"]  # 125 words of 3 letters
    text = " ".join(fillers[:60] + ["keyword10"] + fillers[60:])
    assert len(text) > 500 and len(query_terms(text)) == MAX_QUERY_TERMS
    hits = index.search(text, layer=2, k=3, mode="fts")
    assert [h.text.split()[-1] for h in hits] == ["keyword10"]
    assert index.retrieve(text, k=3) and index.search(text, layer=0, k=3)


def test_stop_words_are_those_the_full_text_index_drops(tmp_path):
    """Every word in ``STOP_WORDS`` finds nothing in a real full-text index built as builds build
    it, so leaving them out of a query changes no result; words of ``MAX_TERM_CHARS`` are found,
    longer ones are not."""
    from laminae.schemas.tables import table_schemas
    from laminae.tasks.storage.index_store import IndexStore

    root = str(tmp_path / "index")
    make_synthetic_index(root, documents=2, components_per_document=1, subcomponents_per_component=1, dim=DIM,
                         seed=5, snapshot=False)
    longest, too_long = "k" * MAX_TERM_CHARS, "q" * (MAX_TERM_CHARS + 1)
    text = " ".join([*sorted(STOP_WORDS), "zebra", longest, too_long])
    row = {"id": "dstop", "kind": "html", "url": "http://synthetic.test/stop", "title": "stop", "text": text,
           "search_text": text, "vector": [0.25] * DIM}
    schema = table_schemas(DIM)["documents"]
    store = IndexStore(root)
    store.table("documents").add(pa.Table.from_pylist([{f.name: row.get(f.name) for f in schema}], schema=schema))
    store.build_text_indexes()
    store.publish("stop-words", {})
    index = laminae.open(root)
    assert index.get(["dstop"])[0]["text"] == text
    found = {word: [index.graph.layers[0].ids[r] for r, _ in ranking.fts(index._sources, word, 0, 5, None, None)]
             for word in [*STOP_WORDS, "zebra", longest, too_long]}
    assert found.pop("zebra") == ["dstop"] and found.pop(longest) == ["dstop"] and found.pop(too_long) == []
    assert {w: f for w, f in found.items() if f} == {}
