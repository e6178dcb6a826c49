"""Storage: the index's LanceDB tables, metadata and manifests, and the content-addressed raw store."""
