"""Full-text (BM25) queries of an index's node tables at one manifest's versions.

Reads the full-text indexes of the ``documents``, ``components`` and ``subcomponents`` tables
(over ``search_text``, or ``text`` in indexes built before it) through ``laminae.pinned_tables``; writes
nothing. Answers are (``id``, ``_score``) Arrow tables, best first; ``laminae.ranking`` turns them
into rows of the in-memory view.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pyarrow as pa

from laminae.pinned_tables import LOOP, PinnedTables
from laminae.query import bounded_query
from laminae.schemas.sql import sql_list
from laminae.schemas.tables import NODE_TABLES

OLD_INDEX = "full-text search needs the index built by laminae >= 0.1"


class FullText:
    """BM25 queries of the pinned ``tables``."""

    def __init__(self, tables: PinnedTables) -> None:
        self.tables = tables
        self._columns: dict[int, str] = {}

    def column(self, layer: int) -> str:
        """The column layer ``layer``'s full-text index covers."""
        column = self._columns.get(layer)
        if column is None:  # the schema is a round trip to LanceDB: asked once
            names = self.tables.table(NODE_TABLES[layer]).schema.names
            column = self._columns[layer] = "search_text" if "search_text" in names else "text"
        return column

    def search(self, text: str, layer: int, k: int, kinds: Sequence[str] | None,
               documents: Sequence[str] | None) -> pa.Table:
        """The ``k`` best matches of ``text`` in one layer, of these ``kinds`` and ``documents``
        (None: any); a text of more than ``MAX_QUERY_TERMS`` terms is searched for those
        ``query_terms`` keeps."""
        name = NODE_TABLES[layer]
        tbl = self.tables.table(name)
        query = tbl.search(bounded_query(text), query_type="fts", fts_columns=self.column(layer))
        query = query.select(["id", "_score"]).limit(k)
        clauses = []
        if kinds is not None:
            clauses.append(f"kind IN ({sql_list(kinds)})")
        if documents is not None:
            column = "id" if layer == 0 else "document_id"
            clauses.append(f"{column} IN ({sql_list(documents)})")
        if clauses:
            query = query.where(" AND ".join(clauses), prefilter=True)
        with self.tables.reading(name):
            try:
                return query.to_arrow()
            except (ValueError, RuntimeError) as exc:
                raise RuntimeError(f"{OLD_INDEX} ({exc})") from None

    def send_each(self, terms: Sequence[str], layer: int, k: int) -> Callable[[], list[pa.Table]]:
        """Send ``search`` of each term alone (no filter), all at once, through LanceDB's async API
        on the reader's event loop (``laminae.pinned_tables.LOOP``: through the synchronous API each
        query waits for its own round trips, 1.8 ms a term on the demo index against 0.9 ms this
        way); returns the function that waits for their answers, so that the caller can work
        meanwhile (``retrieve`` embeds the query)."""
        if not terms:
            return list
        name = NODE_TABLES[layer]
        column = self.column(layer)
        tbl = self.tables.async_table(name)

        async def every() -> list[pa.Table]:
            return await asyncio.gather(*(tbl.query().nearest_to_text(term, columns=column)
                                          .select(["id", "_score"]).limit(k).to_arrow() for term in terms))

        sent = LOOP.submit(every())

        def answers() -> list[pa.Table]:
            with self.tables.reading(name):
                try:
                    return sent.result()
                except (ValueError, RuntimeError) as exc:
                    raise RuntimeError(f"{OLD_INDEX} ({exc})") from None

        return answers
