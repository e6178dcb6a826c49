"""bench/peers.py on the demo site (``--smoke``), so that the comparison with LlamaIndex and
LangChain cannot rot: every row of the table is printed, with counts above zero, scores in [0, 1],
and each peer's chunks mapped back to the right pages; ``--sweep`` runs each tuned peer at two
chunk sizes. Needs the ``peers`` extra (``make install`` has it); scored by the shared hybridqa-dev
scorer where ../shared is, else at page level (``bench.peers.page_scores``; the second test checks
that scoring without ../shared)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

ROWS = ["laminae retrieve(q)", "laminae local hop", "LlamaIndex out of the box", "LlamaIndex tuned",
        "LangChain out of the box", "LangChain tuned"]

pytestmark = pytest.mark.slow


def run(tmp_path, *args: str, env: dict | None = None) -> tuple[str, dict]:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "peers.py"), "--smoke", "--out", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=540, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, json.loads((tmp_path / "results.json").read_text())


def test_smoke_prints_every_row_with_sane_numbers(tmp_path):
    out, results = run(tmp_path)
    smoke = results["smoke"]
    assert smoke["questions"] == 4 and smoke["pages"] == 13
    labels = [row["label"] for row in smoke["rows"]]
    assert len(labels) == len(ROWS) and all(label.startswith(row) for label, row in zip(labels, ROWS, strict=True)), labels
    table = out[out.index("\nsmoke: 4 questions"):]
    for row in smoke["rows"]:
        assert row["label"] in table
        for metric in ("R@10", "MRR@10", "All@10_2hop", "DocR@10"):
            assert 0.0 <= row[metric] <= 1.0, (row["label"], metric, row[metric])
        assert row["DocR@10"] > 0, f"{row['label']}: no result on a gold page (urls mapped wrong?)"
        assert row["p50_ms"] > 0
        if row["label"] != "laminae local hop":  # the hop reads the index retrieve's row built
            assert row["build_s"] > 0 and row["embedded"] > 0 and row["index_bytes"] > 0, row
            assert row["pages"] >= 13, row
    laminae = smoke["rows"][0]
    assert laminae["R@10"] >= 0.5 and laminae["embedded"] > max(r["embedded"] or 0 for r in smoke["rows"][2:])
    assert set(smoke["ratios"]) == {"R@10", "MRR@10", "2-hop All@10"}
    assert "laminae / best tuned peer:" in table and "wall " in out


def test_smoke_sweep_tries_two_sizes_per_tuned_peer(tmp_path):
    # without the shared bench sets (as in CI): the smoke set is scored at page level
    nowhere = tmp_path / "no-shared"
    out, results = run(tmp_path / "out", "--sweep", env={**os.environ, "LAMINAE_BENCH_SHARED": str(nowhere)})
    assert "scored at page level" in out and "page level, " in out
    sweep = results["smoke"]["sweep"]
    assert set(sweep) == {"LlamaIndex tuned", "LangChain tuned"}
    for label, chosen in sweep.items():
        sizes = [row["label"] for row in chosen["rows"]]
        assert len(sizes) == 2 and f"{label} ({chosen['size']})" in sizes, (label, chosen)
        assert all(row["embedded"] > 0 and 0.0 <= row["R@10"] <= 1.0 for row in chosen["rows"])
        assert f"smoke: {label}: best chunk size {chosen['size']}" in out
