"""laminae: read a layered component graph index (documents → components → subcomponents).

Imports only pyarrow, lancedb, numpy and ``schemas`` (polars lazily, for ``Index.frame``); never the
builder's heavy stack.
"""

from laminae.errors import IndexOpenError, LaminaeError, QueryModelError, ReaderArgumentError, UnknownIdError
from laminae.index import Index, open_index

open = open_index  # noqa: A001 - ``laminae.open(dir)`` is the public entry point

__all__ = ["Index", "IndexOpenError", "LaminaeError", "QueryModelError", "ReaderArgumentError", "UnknownIdError", "open", "open_index"]
__version__ = "0.1.0"
