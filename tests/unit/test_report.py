"""The HTML report's aggregations (documents by kind, the largest documents, link degrees, the
last run's errors) against the same counts made row by row in Python, on a small real index."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import laminae
from tests.support.synthetic import make_synthetic_index

BUCKETS = [(0, 0), (1, 1), (2, 3), (4, 7), (8, 15), (16, 31), (32, 63), (64, None)]


def _histogram(values: list[int]) -> list[float]:
    counts = [float(sum(1 for v in values if v >= low and (high is None or v <= high))) for low, high in BUCKETS]
    while counts and counts[-1] == 0:
        counts.pop()
    return counts


def test_report_aggregates_match_row_by_row_counts(tmp_path):
    from laminae.tasks.report.run_report import _link_degrees, gather, render
    from laminae.tasks.storage.index_store import IndexStore

    index = str(tmp_path)
    make_synthetic_index(index, documents=30, components_per_document=2, subcomponents_per_component=2, dim=8,
                         links_per_document=4, seed=5)
    store = IndexStore(index)
    store.table("edges").update(where="id IN ('e0-0', 'e0-1', 'e0-2')", values={"resolved": False})
    store.table("documents").update(where="id < 'd4'", values={"kind": "pdf"})
    now = datetime.now(UTC)
    store.append("runs", [{"id": "r1", "flow": "build", "status": "partial", "started_at": now, "finished_at": now,
                           "manifest_version": 2, "summary": json.dumps({"seconds_by_stage": {"total": 1.0}})}])
    problems = [("parse", "bad_html", "error")] * 3 + [("crawl", "http_404", "error")] * 3 + \
        [("image", "too_small", "warning")] * 2 + [("crawl", "timeout", "error")]
    store.append("errors", [{"id": f"x{i}", "run_id": "r1", "stage": st, "reason": rs, "severity": sev,
                             "created_at": now} for i, (st, rs, sev) in enumerate(problems)]
                 + [{"id": "old", "run_id": "r0", "stage": "crawl", "reason": "timeout", "severity": "error",
                     "created_at": now}])
    store.publish("test", {})

    data = gather(index)
    opened = laminae.open(index)
    docs = opened.table("documents").to_arrow().to_pylist()
    edges = opened.table("edges").to_arrow().to_pylist()
    assert data["documents_by_kind"] == dict(Counter(d["kind"] for d in docs))
    assert set(data["documents_by_kind"]) == {"html", "pdf"}
    largest = sorted(docs, key=lambda d: (-d["n_subcomponents"] if d["n_subcomponents"] is not None else 1, d["id"]))
    assert [d["id"] for d in data["largest"]] == [d["id"] for d in largest[:10]]
    pairs = {(e["document_id"], e["dst_id"]) for e in edges if e["kind"] == "links_to" and e["resolved"]}
    links = [(e["document_id"], e["dst_id"]) for e in edges if e["kind"] == "links_to"]
    assert any(s == d for s, d in pairs) and len(set(links)) < len(links)  # self-links and repeats to drop
    out_deg = Counter(s for s, d in pairs if s != d)
    in_deg = Counter(d for s, d in pairs if s != d)
    out_degree, in_degree = _link_degrees(opened)
    assert sorted(out_degree.to_list()) == sorted(out_deg.get(d["id"], 0) for d in docs)
    assert sorted(in_degree.to_list()) == sorted(in_deg.get(d["id"], 0) for d in docs)
    assert [n for _, n in data["out_degree"]] == _histogram([out_deg.get(d["id"], 0) for d in docs])
    assert [n for _, n in data["in_degree"]] == _histogram([in_deg.get(d["id"], 0) for d in docs])
    assert sum(n for _, n in data["in_degree"]) == len(docs)
    assert data["errors"] == [(("error", "crawl", "http_404"), 3), (("error", "parse", "bad_html"), 3),
                              (("error", "crawl", "timeout"), 1), (("warning", "image", "too_small"), 2)]
    page = render(data)
    for heading in ("Out-degree", "In-degree", "Errors by stage and reason", "crawl: http_404"):
        assert heading in page
