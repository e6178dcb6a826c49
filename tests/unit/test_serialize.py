"""Serialization (what nodes are searched and embedded from) and the reader's fusion.

Golden search texts per node kind from a real parse; an index written with the previous
serialization refreshes into the current one as a whole; ``rrf``, the learned fusion and
``retrieve`` against brute-force references.
"""

from __future__ import annotations

import json
import math
import re

import lancedb
import numpy as np
import pytest

import laminae
from laminae import fusion
from laminae.ranking import RRF_K, rrf, term_coverage
from laminae.schemas import document_id
from laminae.schemas.search_text import SERIALIZATION, embed_text, serialize_document
from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import build_nodes
from laminae.tasks.nodes.objects import object_rows
from laminae.tasks.parse.html import parse_html
from tests.conftest import Route, page
from tests.support.embedders import HashingEmbedder
from tests.support.synthetic import make_synthetic_index

PAGE = b"""<html><head><title>1969 NFL Draft</title></head><body><h1>1969 NFL Draft</h1>
<p>The draft was held in New York. It had seventeen rounds.</p>
<h2>Player selections</h2><h3>Round seventeen</h3>
<table><caption>Round 17</caption><tr><th>Pick</th><th>Team</th></tr>
<tr><td>417</td><td>Buffalo Bills</td></tr></table>
<figure><img src="/field.png" alt="War Memorial Stadium" width="200" height="120">
<figcaption>The Bills' field</figcaption></figure></body></html>"""


def _nodes():
    url = "http://t.test/draft"
    fetch = FetchResult(url=url, final_url=url, raw_key="k", content_type="text/html")
    return build_nodes(parse_html(PAGE, url), document_id(url), fetch, ParseConfig())


def test_golden_search_text_per_node_kind():
    nodes = _nodes()
    comps = {c["kind"]: c for c in nodes.components}
    subs = [(s["kind"], s["search_text"]) for s in nodes.subcomponents]
    assert comps["paragraph"]["search_text"] == (
        "1969 NFL Draft\nThe draft was held in New York. It had seventeen rounds.")
    assert comps["table"]["search_text"] == (
        "1969 NFL Draft | Player selections > Round seventeen\nRound 17\nPick | Team\n417 | Buffalo Bills")
    assert comps["image"]["search_text"].startswith("1969 NFL Draft | Player selections > Round seventeen\nImage: "
                                                    "War Memorial Stadium. Caption: The Bills' field")
    assert subs == [
        ("sentence", "1969 NFL Draft\nThe draft was held in New York."),
        ("sentence", "1969 NFL Draft\nIt had seventeen rounds."),
        ("header", "1969 NFL Draft | Player selections > Round seventeen\nRound 17\nPick | Team"),
        ("row", "1969 NFL Draft | Player selections > Round seventeen | Round 17\nPick: 417 | Team: Buffalo Bills"),
    ]
    # what a reader shows stays the node's own content
    assert [s["text"] for s in nodes.subcomponents][-2:] == ["Round 17\nPick | Team", "Pick: 417 | Team: Buffalo Bills"]
    assert nodes.document["search_text"] == nodes.document["text"]
    # a detected object is serialized under its image's context
    image = comps["image"]
    objects, _ = object_rows(image, [("person", 0.9, [1.0, 2.0, 30.0, 40.0])], 200, 120, lambda kind, c: "o1")
    serialize_document(nodes.document, nodes.components, objects)
    assert objects[0]["search_text"] == ("1969 NFL Draft | Player selections > Round seventeen\n"
                                         f"person in {image['text']}")


def test_vectors_are_computed_from_the_bare_text_but_a_table_heading_from_its_context():
    nodes = _nodes()
    for row in [nodes.document, *nodes.components, *nodes.subcomponents]:
        expected = row["search_text"] if row["kind"] == "header" else row["text"]
        assert embed_text(row) == (expected or "")
    heading = next(s for s in nodes.subcomponents if s["kind"] == "header")
    assert heading["ordinal"] == -1 and heading["header"] == ["Pick", "Team"]
    assert embed_text(heading).startswith("1969 NFL Draft | Player selections > Round seventeen\n")


def test_rrf_matches_a_brute_force_reference():
    rng = np.random.default_rng(3)
    rankings = [rng.permutation(40)[: rng.integers(5, 40)] for _ in range(4)]
    rows, scores = rrf(rankings)
    reference = {}
    for ranking in rankings:
        for position, row in enumerate(ranking):
            reference[int(row)] = reference.get(int(row), 0.0) + 1 / (RRF_K + position + 1)
    expected = sorted(reference, key=lambda r: (-reference[r], r))
    assert rows.tolist() == expected
    assert np.allclose(scores, [reference[r] for r in expected])


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("fusion")
    make_synthetic_index(str(root), documents=30, components_per_document=4, subcomponents_per_component=3,
                         dim=16, seed=7)
    return laminae.open(str(root))


def _brute_dense_lists(index, q, rows):
    """Per component kind: rows ranked by the best subcomponent similarity (own vector if none)."""
    g = index.graph
    comps, subs = g.layers[1], g.layers[2]
    best = {}
    for r in rows:
        children = [i for i in range(len(subs.ids)) if subs.parent[i] == r]
        best[r] = max(float(subs.vectors[i] @ q) for i in children) if children else float(comps.vectors[r] @ q)
    lists = []
    for kind in sorted({comps.kinds[r] for r in rows}):
        of_kind = [r for r in rows if comps.kinds[r] == kind]
        lists.append(sorted(of_kind, key=lambda r: (-best[r], r))[:100])
    return lists, best


def test_retrieve_with_a_vector_matches_a_brute_force_fusion(synthetic):
    index = synthetic
    q = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    q /= np.linalg.norm(q)
    rows = list(range(len(index.graph.layers[1].ids)))
    lists, best = _brute_dense_lists(index, q, rows)
    comps = index.graph.layers[1]
    expected_rows = _by_score_then_id(comps, *rrf([np.array(x) for x in lists]))
    hits = index.retrieve(q, k=8)
    assert [h.id for h in hits] == [str(comps.ids[r]) for r, _ in expected_rows[:8]]
    assert np.allclose([h.score for h in hits], [s for _, s in expected_rows[:8]])
    assert np.allclose([h.extra["similarity"] for h in hits], [best[r] for r, _ in expected_rows[:8]], atol=1e-6)


def _by_score_then_id(comps, rows, scores):
    """Fused rows as hits list them: best score first, ties by node id."""
    return sorted(zip(rows.tolist(), scores.tolist(), strict=True), key=lambda p: (-p[1], str(comps.ids[p[0]])))


def _brute_coverage(index, text: str) -> tuple[list[int], dict[int, float], float]:
    """Components ranked by the summed idf of the question's words found in their search text;
    every component's coverage; the idf summed over the words found anywhere."""
    comps = index.graph.layers[1]
    found = index.table("components").to_arrow().select(["id", "search_text"]).to_pylist()
    words = {comps.position[r["id"]]: set(re.findall(r"\w+", r["search_text"].lower())) for r in found}
    n = len(comps.ids)
    score = dict.fromkeys(range(n), 0.0)
    total = 0.0
    for term in set(re.findall(r"\w+", text.lower())):
        holders = [r for r in range(n) if term in words[r]]
        for r in holders:
            score[r] += math.log((n + 1) / (len(holders) + 0.5))
        total += math.log((n + 1) / (len(holders) + 0.5)) if holders else 0.0
    return sorted((r for r in score if score[r] > 0), key=lambda r: (-score[r], r))[:100], score, total


def test_term_coverage_matches_a_brute_force_reference(synthetic, monkeypatch):
    text = "sentence keyword10 keyword20 Keyword30 keyword10"
    ranked, coverage, total = term_coverage(synthetic._sources, text, np.arange(len(synthetic.graph.layers[1].ids)))
    expected, expected_coverage, expected_total = _brute_coverage(synthetic, text)
    assert ranked.tolist() == expected
    assert np.allclose(coverage, [expected_coverage[r] for r in range(len(coverage))])
    assert math.isclose(total, expected_total)
    assert len(expected) == 100 and set(ranked[:3].tolist()) == {3, 6, 10}  # the holders of rare words lead
    # restricted to some components, only those rank
    some = np.array([6, 10, 50, 51], dtype=np.int64)
    assert term_coverage(synthetic._sources, text, some)[0].tolist() == [r for r in expected if r in {6, 10, 50, 51}]
    # a word in more components than the depth counts for that many best matches, with their idf
    monkeypatch.setattr("laminae.ranking.COVERAGE_DEPTH", 7)
    capped, _, _ = term_coverage(synthetic._sources, "sentence", np.arange(len(synthetic.graph.layers[1].ids)))
    assert len(capped) == 12  # max(7, 120 // 10)


def _brute_learned(comps, candidates, kind_lists, best, lexical, lexical_order, covered, cover_order, total, q,
                   question: bool):
    """The learned fusion's score of every candidate, each feature computed on its own."""
    def rank(order, r):
        return order.index(r) + 1 if r in order else fusion.ABSENT_RANK

    out = {}
    for r in candidates:
        kind = comps.kinds[r]
        same_kind = [c for c in candidates if comps.kinds[c] == kind]
        in_kind = next(lst for lst in kind_lists if comps.kinds[lst[0]] == kind)
        x = [best[r], best[r] - max(best[c] for c in same_kind), best[r] - max(best[c] for c in candidates),
             1 / (fusion.RANK_K + rank(in_kind, r)), lexical.get(r, 0.0) / max(lexical.values()),
             1 / (fusion.RANK_K + rank(lexical_order, r)), covered[r] / total,
             1 / (fusion.RANK_K + rank(cover_order, r)), float(comps.vectors[r] @ q)]
        weights = fusion.WEIGHTS.tolist()
        assert not any(weights[len(x):])  # the page features (issue 34) weigh nothing but for how-to questions
        z = sum(w * v for w, v in zip(weights[:len(x)], x, strict=True))
        z += (fusion.KIND_PRIOR.get(kind, 0.0) if question else 0.0) + fusion.INTERCEPT
        out[r] = 1 / (1 + math.exp(-z))
    return out


@pytest.mark.parametrize("text", ["keyword10 sentence", "which sentence holds keyword10?"])
def test_retrieve_with_text_ranks_by_the_learned_fusion_of_every_ranking(synthetic, text):
    index = synthetic
    g = index.graph
    comps, subs = g.layers[1], g.layers[2]
    vector = np.ones(16, np.float32) / 4.0  # unit length: the query model's vector as it is
    fixed = laminae.Index(index.root, index.manifest, embed=lambda text: vector)
    rows = list(range(len(comps.ids)))
    kind_lists, best = _brute_dense_lists(fixed, vector, rows)
    table = index.table("subcomponents")
    found = table.search(text, query_type="fts", fts_columns="search_text").select(["id", "_score"]).limit(200)
    per_parent: dict[int, list[float]] = {}
    for hit in found.to_arrow().to_pylist():
        per_parent.setdefault(int(subs.parent[subs.position[hit["id"]]]), []).append(hit["_score"])
    lexical = {c: sorted(s, reverse=True)[0] + 0.5 * (sorted(s, reverse=True)[1] if len(s) > 1 else 0)
               for c, s in per_parent.items()}
    lexical_order = sorted(lexical, key=lambda c: (-lexical[c], c))
    cover_order, covered, total = _brute_coverage(index, text)
    # and the best component (by coverage) of each page the whole-page BM25 finds (all of them here)
    best_of_page: dict[int, int] = {}
    for r in range(len(comps.ids)):  # in row order: the first wins a tie
        page = int(comps.doc[r])
        if covered[r] > 0 and (page not in best_of_page or covered[r] > covered[best_of_page[page]]):
            best_of_page[page] = r
    candidates = sorted({*[r for lst in kind_lists for r in lst], *lexical_order, *cover_order,
                         *best_of_page.values()})
    question = text.endswith("?")  # the kind priors apply to questions, not to keyword queries
    assert fusion.is_question(text) == question
    ev = fixed._fusion_evidence(text, vector, np.arange(len(comps.ids)), None, 2)[1]
    assert not ev.procedural  # the gate serves it with the general weights
    assert ev.rows.tolist() == candidates
    learned = _brute_learned(comps, candidates, kind_lists, best, lexical, lexical_order, covered, cover_order,
                             total, vector, question)
    expected = _by_score_then_id(comps, np.array(candidates), np.array([learned[r] for r in candidates]))
    hits = fixed.retrieve(text, k=6)
    assert lexical and [h.id for h in hits] == [str(comps.ids[r]) for r, _ in expected[:6]]
    assert np.allclose([h.score for h in hits], [s for _, s in expected[:6]], atol=1e-6)
    assert [h.extra["probability"] for h in hits] == [h.score for h in hits]  # the score is the probability
    # the learned order is not reciprocal rank fusion's: margins and kinds count
    by_rrf = _by_score_then_id(comps, *rrf([np.array(x) for x in [*kind_lists, lexical_order, cover_order]]))
    assert [r for r, _ in by_rrf] != [r for r, _ in expected]
    plain = fixed.retrieve(text, k=6, ranking="rrf")  # reciprocal rank fusion stays available
    assert [h.id for h in plain] == [str(comps.ids[r]) for r, _ in by_rrf[:6]]
    assert np.allclose([h.score for h in plain], [s for _, s in by_rrf[:6]])
    assert not any("probability" in h.extra for h in plain)
    with pytest.raises(laminae.index.ReaderArgumentError, match="ranking must be one of learned, rrf"):
        fixed.retrieve(text, ranking="best")
    # pages="one": each page's best component first, then the others in their own order
    seen, first, rest = set(), [], []
    for r, _ in expected:
        (rest if int(comps.doc[r]) in seen else first).append(r)
        seen.add(int(comps.doc[r]))
    assert (first + rest)[:10] != [r for r, _ in expected][:10]  # the plain ranking repeats a page early
    spread = fixed.retrieve(text, k=10, pages="one")
    assert [h.id for h in spread] == [str(comps.ids[r]) for r in (first + rest)[:10]]
    assert [h.score for h in spread] == sorted((h.score for h in spread), reverse=True)
    # a page's later components get a score below every page's best, no longer a probability; the
    # probability stays with the hit
    spread = fixed.retrieve(text, k=len(first) + 5, pages="one")
    assert np.allclose([h.extra["probability"] for h in spread], [learned[r] for r in (first + rest)[:len(spread)]],
                       atol=1e-6)
    assert [h.score for h in spread[:len(first)]] == [h.extra["probability"] for h in spread[:len(first)]]
    assert all(h.score < h.extra["probability"] for h in spread[len(first):]) and len(spread) > len(first)
    assert [h.id for h in fixed.retrieve(text, k=6, pages="any")] == [h.id for h in hits]  # as "auto" here
    with pytest.raises(laminae.index.ReaderArgumentError, match="pages"):
        fixed.retrieve(text, pages="all")
    # the default search is retrieve; documents(g=2) ranks documents by their best fused component
    assert [h.id for h in fixed.search(text, k=6)] == [h.id for h in hits]
    docs = fixed.documents(text, k=3, granularity=2)
    first_docs = list(dict.fromkeys(str(g.layers[0].ids[comps.doc[r]]) for r, _ in expected))[:3]
    assert [d.id for d in docs] == first_docs
    within = fixed.components(text, first_docs, k=4, granularity=2)
    assert {h.document_id for h in within} <= set(first_docs)


@pytest.mark.slow
def test_an_index_of_the_previous_serialization_refreshes_into_the_current_one(server, tmp_path, prefect_harness):
    from laminae.flows.build import build_index, refresh_index
    from laminae.tasks.storage.index_store import IndexStore

    server.routes["/a"] = Route(body=page("Rye", "<h2>Baking</h2><p>Rye bread keeps for days. It is dense.</p>"))
    server.routes["/b"] = Route(body=page("Bakery ledger", "<table><caption>Prices</caption><tr><th>Loaf</th>"
                                          "<th>Price</th></tr><tr><td>Rye</td><td>4</td></tr></table>"))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(server.url("/a") + "\n" + server.url("/b") + "\n")
    index = str(tmp_path / "index")
    settings = {"crawl": {"retries": 0}, "embed": {"device": "cpu", "threads": 1}}
    build_index(seeds=str(seeds), index=index, settings=settings)
    # turn it into what laminae wrote before serialization 2: no search_text, text indexed
    store = IndexStore(index)
    for name in ("documents", "components", "subcomponents"):
        tbl = store.table(name)
        tbl.drop_columns(["search_text"])
        tbl.create_index("text", config=lancedb.index.FTS(), replace=True)
    meta = store.metadata()
    del meta["serialization"]
    store.files.write_text("index.json", json.dumps(meta))
    store.publish("old", {})
    old = laminae.open(index)
    assert old.search("Prices", layer=2, k=1, mode="fts")  # the old index is still searchable
    assert "search_text" not in old.table("subcomponents").schema.names

    moved = refresh_index(index=index)
    assert moved["status"] == "success"
    assert IndexStore(index).metadata()["serialization"] == SERIALIZATION
    new = laminae.open(index)
    assert new.manifest["serialization"] == SERIALIZATION
    rows = new.table("subcomponents").to_arrow().to_pylist()
    by_text = {r["text"]: r["search_text"] for r in rows}
    assert by_text["Loaf: Rye | Price: 4"] == "Bakery ledger | Prices\nLoaf: Rye | Price: 4"
    assert by_text["It is dense."] == "Rye | Baking\nIt is dense."
    for name in ("documents", "components", "subcomponents"):
        assert all(r["search_text"] for r in new.table(name).to_arrow().to_pylist())  # nothing left unserialized
    # the full-text side now finds a row by its page title, which its own text does not hold
    assert "Loaf: Rye | Price: 4" in {hit.text for hit in new.search("ledger", layer=2, k=5, mode="fts")}
    # the unchanged page was parsed again, so its table gained the heading node of serialization 3
    heading = next(r for r in rows if r["kind"] == "header")
    assert (heading["text"], heading["search_text"]) == ("Prices\nLoaf | Price", "Bakery ledger\nPrices\nLoaf | Price")
    assert moved["changes"]["unchanged"] == 0
    # the reader pinned before keeps the old tables
    assert "search_text" not in old.table("subcomponents").schema.names
    again = refresh_index(index=index)
    assert again["embedded"] == 0


def _stored_pages(path, embedder, picture: bytes | None = None):
    """Four pages like PAGE (one title each) written into a new index at ``path``; with ``picture``,
    their images show it and hold two detected objects each."""
    from laminae.tasks.embed.embedders import embed_rows
    from laminae.tasks.storage.index_store import IndexStore
    from laminae.tasks.storage.rawstore import RawStore

    store = IndexStore(path)
    store.prepare(embedder.info.as_metadata())
    docs = []
    for i, title in enumerate((b"1969 NFL Draft", b"1970 NFL Draft", b"Rye bread", b"Baguettes")):
        url = f"http://t.test/{i}"
        fetch = FetchResult(url=url, final_url=url, raw_key="k", content_type="text/html")
        docs.append(build_nodes(parse_html(PAGE.replace(b"1969 NFL Draft", title), url), document_id(url), fetch,
                                ParseConfig()))
        if picture is not None:
            image = next(c for c in docs[-1].components if c["kind"] == "image")
            image.update(image_key=RawStore(path).put(picture), image_mime="image/png")
            found = [("person", 0.9, [1.0 + i, 2.0, 30.0, 40.0]), ("dog", 0.8, [10.0, 12.0, 50.0, 44.0 - i])]
            objects, _ = object_rows(image, found, 64, 48, lambda kind, content: f"o-{content}")
            docs[-1].subcomponents.extend(objects)
    rows = [r for d in docs for r in (d.document, *d.components, *d.subcomponents)]
    if picture is None:
        embed_rows(rows, embedder, {})
    else:
        for row in rows:
            row["vector"] = np.ones(embedder.dim, np.float32) / np.sqrt(embedder.dim)
    store.replace_documents({"documents": [d.document for d in docs],
                             "components": [c for d in docs for c in d.components],
                             "subcomponents": [s for d in docs for s in d.subcomponents],
                             "edges": [e for d in docs for e in d.edges]}, [d.document["id"] for d in docs])
    return store, docs


def test_reembedding_streams_each_table_in_batches_as_whole_documents_serialize(tmp_path):
    from laminae.tasks.embed.embedders import cache_key
    from laminae.tasks.storage.upkeep import reembed_index

    old, new = HashingEmbedder(4), HashingEmbedder(8)
    store, docs = _stored_pages(tmp_path, old)
    names = ("documents", "components", "subcomponents")
    for name in names:
        store.table(name).update(values={"search_text": "stale"})
    orphaned = docs[3].document["id"]  # a document row gone: its nodes keep the search text they have
    store.table("documents").delete(f"id = '{orphaned}'")
    before = {name: store.table(name).to_arrow().drop_columns(["vector"]).to_pylist() for name in names}
    versions = {name: store.table(name).version for name in names}
    # the reference: the whole tables as rows, serialized document by document
    for document in before["documents"]:
        serialize_document(document, [c for c in before["components"] if c["document_id"] == document["id"]],
                           [s for s in before["subcomponents"] if s["document_id"] == document["id"]])
    texts = {name: [embed_text(r) for r in rows] for name, rows in before.items()}
    distinct = {t for rows in texts.values() for t in rows}
    assert len(distinct) < sum(len(rows) for rows in texts.values())  # texts repeat across batches

    assert reembed_index(str(tmp_path), new, batch_rows=3) == len(distinct)
    for name in names:
        tbl = store.table(name)
        assert tbl.version == versions[name] + 1  # one commit per table: a crash leaves the old one whole
        data = tbl.to_arrow()
        assert data.drop_columns(["vector"]).to_pylist() == before[name]
        stale = [r["id"] for r in before[name] if r["search_text"] == "stale"]
        assert bool(stale) == (name != "documents") and all(
            r["document_id"] == orphaned for r in before[name] if r["id"] in stale)
        vectors = np.stack(data.column("vector").to_numpy(zero_copy_only=False))
        assert np.allclose(vectors, new.embed(texts[name]), atol=1e-6)
    cached = store.table("embeddings").to_arrow().column("id").to_pylist()
    assert sorted(cached) == sorted(cache_key(new.model_id, t) for t in distinct)
    assert store.metadata()["embedder"] == new.info.as_metadata()
    # under the same model, everything comes from the cache
    assert reembed_index(str(tmp_path), new, batch_rows=5) == 0
    assert store.table("components").to_arrow().drop_columns(["vector"]).to_pylist() == before["components"]


def test_reembedding_in_batches_embeds_pictures_and_their_objects_from_pixels(tmp_path, tiny_clip):
    import io

    from PIL import Image

    from laminae.schemas.pictures import crop, load_image
    from laminae.tasks.config import EmbedConfig
    from laminae.tasks.embed.embedders import load_embedder, split_by_modality
    from laminae.tasks.storage.rawstore import RawStore
    from laminae.tasks.storage.upkeep import reembed_index

    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(buffer, "PNG")
    picture = buffer.getvalue()
    clip = load_embedder(EmbedConfig(model=tiny_clip, device="cpu", threads=1))
    store, _ = _stored_pages(tmp_path, HashingEmbedder(4), picture)
    names = ("documents", "components", "subcomponents")
    before = {name: store.table(name).to_arrow().drop_columns(["vector"]).to_pylist() for name in names}
    _, pixels = split_by_modality(before["components"] + before["subcomponents"], "pixels")
    assert sorted(r["kind"] for r, _, _ in pixels) == ["image"] * 4 + ["object"] * 8
    raw = RawStore(tmp_path)
    expected = dict(zip([r["id"] for r, _, _ in pixels], clip.embed_images(
        [crop(raw.get(key), bbox) if bbox else load_image(raw.get(key)) for _, key, bbox in pixels]), strict=True))

    reembed_index(str(tmp_path), clip, batch_rows=4)  # objects and their pictures land in other batches
    for name in ("components", "subcomponents"):
        data = store.table(name).to_arrow()
        got = dict(zip(data.column("id").to_pylist(), data.column("vector").to_numpy(zero_copy_only=False),
                       strict=True))
        for row in before[name]:
            want = expected[row["id"]] if row["id"] in expected else clip.embed([embed_text(row)])[0]
            assert np.allclose(got[row["id"]], want, atol=1e-5), (name, row["kind"])


def test_pruning_the_cache_in_batches_keeps_every_key_a_node_was_embedded_under(tmp_path):
    from laminae.tasks.embed.embedders import cache_key, pixel_key, split_by_modality
    from laminae.tasks.storage.upkeep import prune_embedding_cache

    model = "m"
    store, docs = _stored_pages(tmp_path, HashingEmbedder(4), picture=b"not decoded when pruning")
    store.table("components").update(where=f"document_id = '{docs[3].document['id']}' AND kind = 'image'",
                                     values={"image_mime": "image/svg+xml"})  # an SVG: embedded from text
    names = ("documents", "components", "subcomponents")
    rows = {name: store.table(name).to_arrow().drop_columns(["vector"]).to_pylist() for name in names}
    # the reference: every node's text key; pictures and their objects' pixel keys, all rows at once
    live = {cache_key(model, embed_text(r)) for name in names for r in rows[name]}
    _, pixels = split_by_modality([r for name in names[1:] for r in rows[name] if r["kind"] in ("image", "object")],
                                  "pixels")
    assert len(pixels) == 9  # three pictures and their six objects; the SVG and its objects are text
    live |= {pixel_key(model, key, bbox) for _, key, bbox in pixels}
    junk = {cache_key(model, f"a sentence no node holds {i}") for i in range(100)} | {"not a cache key"}
    store.append("embeddings", [{"id": k, "model_id": model, "vector": np.zeros(4, np.float32)}
                                for k in sorted(live | junk)])

    assert prune_embedding_cache(str(tmp_path), model, "text_proxy", slack=10.0) == 0  # under the slack
    assert prune_embedding_cache(str(tmp_path), model, "pixels", slack=0.0, batch_rows=3) == len(junk)
    assert set(store.table("embeddings").to_arrow().column("id").to_pylist()) == live


def test_cache_lookups_find_indexed_and_later_keys(tmp_path):
    from laminae.tasks.embed.embedders import cached_vectors
    from laminae.tasks.storage.index_store import IndexStore

    store = IndexStore(str(tmp_path))
    store.prepare({"model_id": "m", "dim": 4, "image_mode": "text_proxy"})
    rng = np.random.default_rng(0)
    first = {f"v{i:04x}": rng.standard_normal(4).astype(np.float32) for i in range(3000)}
    store.append("embeddings", [{"id": k, "model_id": "m", "vector": v} for k, v in first.items()])
    store.index_embedding_cache()
    assert [i["columns"] for i in store.table("embeddings").list_indices()] == [["id"]]
    later = {f"w{i:04x}": rng.standard_normal(4).astype(np.float32) for i in range(500)}  # added after the index
    store.append("embeddings", [{"id": k, "model_id": "m", "vector": v} for k, v in later.items()])
    store.delete_ids("embeddings", ["v0001", "w0002"])
    wanted = [*first, *later, "v-missing"]
    found = cached_vectors(store.table("embeddings"), wanted)
    assert set(found) == (set(first) | set(later)) - {"v0001", "w0002"}
    assert all(np.array_equal(found[k], v) for k, v in {**first, **later}.items() if k in found)
