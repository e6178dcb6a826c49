"""A small FiF-style agent loop over a laminae index.

Reads an index (default: the demo index ``laminae demo`` writes) and a question; writes nothing.
Step 0 is the reader's default move, ``retrieve`` (dense and full-text evidence fused; the best
strategy of ``bench/quality.py``). The loop then keeps a set of visited documents and climbs an
escalation ladder when a step finds no new evidence: a local hop from the documents already
visited before a global one, and coarse granularity (g=1, components) before fine (g=2,
sentences and rows). Each step retrieves documents, then their best components; ``judge`` is
where an LLM call would decide whether the evidence answers the question (here: a threshold on
the evidence's dense similarity, so the example runs offline).

    .venv/bin/python examples/agent_loop.py "Which bread bakes for a whole day?" [--index DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import laminae  # noqa: E402

LADDER = [  # (scope, granularity) in the order FiF escalates after a failed step
    ("local", 1),
    ("local", 2),
    ("global", 1),
    ("global", 2),
]


def similarity(hit: laminae.index.Hit) -> float:
    """The dense similarity of a hit (fused moves score by rank; they keep it in ``extra``)."""
    return hit.extra.get("similarity", hit.score)


def judge(question: str, evidence: list[laminae.index.Hit], threshold: float) -> bool:
    """Does the evidence answer the question? An LLM call goes here; offline: a similarity threshold."""
    return bool(evidence) and similarity(evidence[0]) >= threshold


def run(index: laminae.Index, question: str, max_steps: int = 6, threshold: float = 0.5) -> list[laminae.index.Hit]:
    visited: list[str] = []
    # step 0: the default move, the best components of the whole index
    evidence = index.retrieve(question, k=3)
    print(f"step 0  retrieve → {[h.extra.get('title', h.id) for h in evidence]}")
    visited.extend(dict.fromkeys(h.document_id for h in evidence))
    if judge(question, evidence, threshold):
        return evidence
    rung = 0
    for step in range(1, max_steps):
        scope, granularity = LADDER[min(rung, len(LADDER) - 1)]
        anchors = visited if scope == "local" else None
        found = index.documents(question, k=3, granularity=granularity, scope=scope, anchors=anchors)
        new = [h for h in found if h.id not in visited]
        print(f"step {step}  {scope} g={granularity} → {[h.extra.get('title', h.id) for h in new] or 'nothing new'}")
        if not new:
            rung += 1  # failure is feedback: escalate
            continue
        visited.extend(h.id for h in new)
        candidates = index.components(question, [h.id for h in new], k=3, granularity=2)
        evidence = sorted({h.id: h for h in evidence + candidates}.values(), key=lambda h: -similarity(h))[:3]
        if judge(question, evidence, threshold):
            break
        rung += 1
    return evidence


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question", nargs="?", default="Which bread bakes for a whole day at low heat?")
    parser.add_argument("--index", default=str(Path(tempfile.gettempdir()) / "laminae-demo-index"))
    parser.add_argument("--threshold", type=float, default=0.5)
    args = parser.parse_args()
    try:
        index = laminae.open(args.index)
    except laminae.IndexOpenError as exc:
        print(f"{exc}\n(run `make demo` first to build the demo index)", file=sys.stderr)
        return 2
    evidence = run(index, args.question, threshold=args.threshold)
    print("\nevidence:")
    for hit in evidence:
        print(f"  {similarity(hit):.3f}  [{hit.kind}] {hit.text[:100]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
