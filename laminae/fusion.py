"""Learned score fusion: the ranking ``retrieve`` (and the hybrid component hops at granularity 2) return.

Reads the evidence ``Index._fused_components`` gathers for one text question over a set of
candidate components (dense similarities per kind, BM25 over their subcomponents, term coverage,
each component's own vector) and writes nothing: ``features`` turns that evidence into one row of
numbers per candidate and ``scores`` weighs them with a linear model. Reciprocal rank fusion keeps
only ranks, so a component far ahead in one list and one barely ahead count the same; the linear
model also sees the scores' margins (a similarity against the best of its kind, a BM25 score
against the best, the share of the question's vocabulary covered) and a prior per component kind.

The weights are fitted by ``bench/fusion_fit.py`` (logistic regression, evidence components as
positives, over both development sets: table questions and multi-hop passage questions, so that
neither kind of evidence is sacrificed to the other); ``WEIGHTS_VERSION`` names the fit. The
scores are the model's probability that a candidate is evidence. The kind priors apply to questions only
(``is_question``): the fit saw only questions, and a keyword query says nothing about wanting a table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

QUESTION = re.compile(r"\?\s*$|\b(?:who|whom|whose|what|when|where|which|why|how)\b|"
                      r"^\s*(?:is|are|was|were|do|does|did|can|could|has|have|had|name|list|give|tell|find|identify)\b",
                      re.IGNORECASE)
RANK_K = 60  # 1 / (RANK_K + rank), as in reciprocal rank fusion
ABSENT_RANK = 1000  # the rank a candidate missing from a list is given

FEATURES = (
    "similarity",  # best similarity of the component's subcomponents (its own vector when it has none)
    "similarity_below_kind_best",  # similarity minus the best similarity among candidates of its kind
    "similarity_below_best",  # similarity minus the best similarity among all candidates
    "dense_rank",  # 1 / (RANK_K + rank) in its kind's dense ranking
    "bm25",  # best BM25 of its subcomponents + half the second, over the best component's
    "bm25_rank",  # 1 / (RANK_K + rank) in the BM25 ranking
    "coverage",  # idf of the question's terms it holds, over the idf of all terms found anywhere
    "coverage_rank",  # 1 / (RANK_K + rank) in the coverage ranking
    "own_similarity",  # similarity of the component's own vector
)
# Kinds with a learned prior; any other kind gets none. Only tables: a question's words spread over
# a table's caption, header and one row, so each of its parts sits further from the question than
# a sentence that states the same fact; priors for paragraphs and images as well added nothing on
# held-out pages and pushed pictures down with no picture questions to fit them on.
KINDS: tuple[str, ...] = ("table",)

# Fitted by bench/fusion_fit.py (see its output for the cross-validated quality of this fit).
WEIGHTS_VERSION = "2026-11-24"
WEIGHTS = np.array([-0.769088, 5.90308, -0.941243, 168.329, 1.28658, 72.2832, -0.421994, 256.177, 1.2045])
KIND_PRIOR = {'table': 1.49698}
INTERCEPT = -10.424


@dataclass
class Evidence:
    """What one question found for candidate components (arrays aligned with ``rows``)."""

    rows: np.ndarray  # candidate component rows
    kinds: np.ndarray  # their kinds
    similarity: np.ndarray  # dense: best subcomponent similarity
    own_similarity: np.ndarray  # dense: the component's own vector
    dense_rank: np.ndarray  # rank in its kind's dense list (from 1), ABSENT_RANK if not there
    bm25: np.ndarray  # component BM25 (0 when no subcomponent matched)
    bm25_rank: np.ndarray
    coverage: np.ndarray  # summed idf of the question's terms the component holds
    coverage_rank: np.ndarray
    coverage_total: float  # summed idf of the question's terms found in any component


def features(ev: Evidence) -> np.ndarray:
    """One row of ``FEATURES`` per candidate."""
    n = len(ev.rows)
    if n == 0:
        return np.zeros((0, len(FEATURES)))
    kind_best = np.empty(n)
    for kind in set(ev.kinds.tolist()):
        mask = ev.kinds == kind
        kind_best[mask] = ev.similarity[mask].max()
    best_bm25 = ev.bm25.max()
    return np.column_stack([
        ev.similarity,
        ev.similarity - kind_best,
        ev.similarity - ev.similarity.max(),
        1.0 / (RANK_K + ev.dense_rank),
        ev.bm25 / best_bm25 if best_bm25 > 0 else np.zeros(n),
        1.0 / (RANK_K + ev.bm25_rank),
        ev.coverage / ev.coverage_total if ev.coverage_total > 0 else np.zeros(n),
        1.0 / (RANK_K + ev.coverage_rank),
        ev.own_similarity,
    ]).astype(np.float64)


def is_question(text: str) -> bool:
    """A question or request (a question word, a leading auxiliary verb or request verb such as
    "name" or "list", or a final question mark) rather than a keyword query: the weights were
    fitted on questions, so only questions get the kind priors."""
    return bool(QUESTION.search(text))


def kind_prior(kinds: Sequence[str] | np.ndarray, prior: dict[str, float] | None = None) -> np.ndarray:
    prior = KIND_PRIOR if prior is None else prior
    return np.array([prior.get(k, 0.0) for k in np.asarray(kinds).tolist()], dtype=np.float64)


def scores(x: np.ndarray, kinds: Sequence[str] | np.ndarray, weights: np.ndarray | None = None,
           prior: dict[str, float] | None = None, intercept: float | None = None,
           question: bool = True) -> np.ndarray:
    """Probability of being evidence, per candidate: the logistic of the weighted features plus
    the kind's prior (for a ``question`` only; see ``is_question``)."""
    w = WEIGHTS if weights is None else weights
    b = INTERCEPT if intercept is None else intercept
    z = x @ w + b
    if question:
        z = z + kind_prior(kinds, prior)
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic, without overflow


def ranks(rankings: Sequence[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Rank (from 1) of each of ``rows`` in the one of ``rankings`` (each best first, none sharing
    a row, as the per-kind dense rankings) that holds it; ABSENT_RANK where none does."""
    where: dict[int, int] = {}
    for ranking in rankings:
        where.update((int(r), i + 1) for i, r in enumerate(np.asarray(ranking).tolist()))
    return np.array([where.get(int(r), ABSENT_RANK) for r in rows.tolist()], dtype=np.float64)
