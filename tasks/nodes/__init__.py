"""Nodes: the graph's rows from parsed pages (components, sentences, table rows, objects, summaries),
their search text, and the links between documents."""
