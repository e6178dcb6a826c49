"""A query as the moves use it: its terms for full-text search and its unit vector.

Reads the index's embedder record (``model_id``, ``dim``) and, on the first string query, loads
that model through the builder's ``laminae.tasks.embed.embedders.query_embedder`` (needs the
``ml`` extra; imported there, not at module level) unless an ``embed=`` callable was given.
Writes nothing.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import numpy as np

from laminae.errors import QueryModelError, ReaderArgumentError

TERM = re.compile(r"\w+")
MAX_QUERY_TERMS = 32  # distinct terms of a query the full-text part searches (query_terms)
# characters of a query string that are embedded: the longest benchmark question has 311, and a
# 2,000-character query embedded whole (256 tokens) cost 8-13x a question's embedding, so that it
# alone took a search to 4x a question's time; the rest of a longer query still reaches the
# full-text part (bounded by MAX_QUERY_TERMS)
MAX_EMBEDDED_QUERY_CHARS = 400
# The English stop words the full-text index drops (LanceDB's tokenizer, as
# IndexStore.build_text_indexes configures it): a query for one of them finds nothing, so it is
# never sent. tests/unit/test_damaged_index.py checks each against a real index.
_STOP_WORDS = """
a about after again against ain all am an and are aren as at be been being below between both but by can
couldn d did didn do doesn doing don down each few for from further had hadn has hasn have haven having he
her here hers herself him himself his how i if in into is isn it its itself just ll m ma me mightn more
most mustn my myself needn no nor not now o of off on or other our ours out over own re s same shan she
should shouldn so some such t than that the their theirs them then there these they this those through to
too under until up ve was wasn we were weren what when where which while who whom will with won wouldn y
you your yours yourself
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
MAX_TERM_CHARS = 39  # the full-text index drops longer tokens (its max_token_length, 40, is exclusive)


def _distinct_terms(text: str) -> list[str]:
    return [t for t in dict.fromkeys(TERM.findall(text.lower())) if t not in STOP_WORDS]


def query_terms(text: str, limit: int | None = None) -> list[str]:
    """The terms of a query that its full-text part searches: lower-cased words (``TERM``), each
    once, in the order they come, without the ``STOP_WORDS`` the full-text index drops; of more
    than ``limit`` (default ``MAX_QUERY_TERMS``), the ``limit`` longest (ties: the first), still in
    query order. Longer words are rarer on the whole, so they stand in for the rarest: how rare a
    term is in the index would cost the full-text query per term that the bound saves. Words
    longer than the index keeps (``MAX_TERM_CHARS``) come last. A question has fewer (the
    development sets' longest has 26): the bound is for pasted passages, 2,000 characters at most
    through the MCP server."""
    limit = MAX_QUERY_TERMS if limit is None else limit
    terms = _distinct_terms(text)
    if len(terms) <= limit:
        return terms
    ranked = sorted(range(len(terms)), key=lambda i: (len(terms[i]) > MAX_TERM_CHARS, -len(terms[i]), i))
    return [terms[i] for i in sorted(ranked[:limit])]


def bounded_query(text: str, limit: int | None = None) -> str:
    """``text`` itself when it has at most ``limit`` distinct terms (``query_terms``), else the terms
    kept, joined by spaces: the text a full-text query searches for."""
    limit = MAX_QUERY_TERMS if limit is None else limit
    terms = _distinct_terms(text)
    return text if len(terms) <= limit else " ".join(query_terms(text, limit))


def embedded_part(text: str, limit: int = MAX_EMBEDDED_QUERY_CHARS) -> str:
    """The part of a query string that is embedded: all of it up to ``limit`` characters, else its
    first ``limit`` characters cut back to the last whole word."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = head.rfind(" ")
    return head[:cut] if cut > limit // 2 else head


def load_query_model(embedder: dict) -> Callable[[str], np.ndarray]:
    """The query-embedding function of the model the index records (``embedder``: its manifest's
    ``model_id`` and ``dim``), loaded by the builder; ``QueryModelError`` with the fix where the
    builder's packages are not installed."""
    try:
        from laminae.tasks.embed.embedders import query_embedder

        return query_embedder(embedder["model_id"])
    except ImportError as exc:
        raise QueryModelError(
            f"string queries need the index's embedder ({embedder['model_id']}): install laminae with the ml and "
            "build extras (pip install -e '.[build,ml]'), pass embed=callable to laminae.open, or "
            f"pass a query vector of {embedder['dim']} floats ({exc})"
        ) from None


class QueryEncoder:
    """Query strings and vectors as unit vectors of an index's dimension, through the index's own
    model (``load_query_model``, on the first string) or an ``embed`` callable.

    One thread at a time embeds: a Hugging Face fast tokenizer shared by threads fails ("Already
    borrowed"), and an ``embed=`` callable need not be thread-safe either."""

    def __init__(self, embedder: dict, embed: Callable[[str], np.ndarray] | None = None) -> None:
        self.embedder = embedder
        self._embed = embed
        self._lock = threading.Lock()

    def embed(self, text: str) -> np.ndarray:
        """The model's vector of the query's first ``MAX_EMBEDDED_QUERY_CHARS`` (``embedded_part``)."""
        text = embedded_part(text)
        with self._lock:
            if self._embed is None:
                self._embed = load_query_model(self.embedder)
            return np.asarray(self._embed(text), dtype=np.float32)

    def vector(self, query) -> np.ndarray:
        """A query string embedded, or a query vector checked, as a unit vector."""
        vector = self.embed(query) if isinstance(query, str) else np.asarray(query, dtype=np.float32)
        dim = int(self.embedder["dim"])
        if vector.shape != (dim,):
            raise ReaderArgumentError(
                f"query vector has shape {vector.shape}; this index holds {dim}-d vectors of "
                f"{self.embedder['model_id']}: embed the query with that model"
            )
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector
