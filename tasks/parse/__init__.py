"""Parse: fetched HTML and PDF pages into documents of components, in-process or in crash-isolated workers."""
