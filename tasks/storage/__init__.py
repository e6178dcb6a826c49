"""Storage: the index's LanceDB tables, metadata and manifests, the content-addressed raw store, the writer lease and whole-index upkeep
(``upkeep``: pruning the embedding cache, re-embedding every node)."""
