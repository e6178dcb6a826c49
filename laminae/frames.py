"""An index table as a polars ``LazyFrame``, for exploring an index in a notebook.

Reads one table at the version a manifest names (``laminae.pinned_tables``), in batches, only when the
frame is collected; writes nothing. polars is imported here only, when a frame is asked for (the
``frames`` extra).
"""

from __future__ import annotations

from laminae.errors import ReaderArgumentError
from laminae.pinned_tables import PinnedTables
from laminae.ranking import LAYER_NAMES, layer_number
from laminae.schemas.tables import NODE_TABLES

FRAME_BATCH = 65_536  # rows per batch a frame reads


def frame(tables: PinnedTables, layer: int | str = 1, vectors: bool = False, batch_size: int = FRAME_BATCH):
    """A ``LazyFrame`` over layer 0, 1 or 2 (or its name) or ``edges`` (``Index.frame`` says what
    it holds and how it reads)."""
    if layer != "edges":
        layer = NODE_TABLES[_frame_layer(layer)]
    try:
        import polars as pl
        from polars.io.plugins import register_io_source
    except ImportError as exc:
        raise ImportError(f"Index.frame needs polars: pip install 'laminae[frames]' (or polars>=2.1) ({exc})") \
            from None
    tbl = tables.table(layer)
    arrow = tbl.schema
    if not vectors and "vector" in arrow.names:
        arrow = arrow.remove(arrow.get_field_index("vector"))
    schema = pl.from_arrow(arrow.empty_table()).schema

    def scan(with_columns: list[str] | None, predicate, n_rows: int | None, hint: int | None):
        wanted = list(schema) if with_columns is None else with_columns
        needed = [*wanted, *(c for c in _root_names(predicate) if c not in wanted)]
        query = tbl.search().select(needed or list(schema)[:1])
        query = query.limit(n_rows if n_rows is not None and predicate is None else None)
        left = n_rows
        with tables.reading(layer):  # a version cleaned up since the frame was made: IndexOpenError
            for batch in query.to_batches(batch_size):
                data = pl.from_arrow(batch)
                if predicate is not None:
                    data = data.filter(predicate)
                data = data.select(wanted)
                if left is not None:
                    data = data.head(left)
                    left -= data.height
                yield data
                if left == 0:
                    return

    return register_io_source(scan, schema=schema)


def _frame_layer(layer) -> int:
    if not isinstance(layer, int | str) or isinstance(layer, bool) or layer not in (0, 1, 2, *LAYER_NAMES):
        raise ReaderArgumentError(
            f"frame() reads layer 0, 1, 2, documents, components, subcomponents or edges; got {layer!r}")
    return layer_number(layer)


def _root_names(predicate) -> list[str]:
    """The columns a polars expression reads (none for no expression)."""
    return [] if predicate is None else predicate.meta.root_names()
