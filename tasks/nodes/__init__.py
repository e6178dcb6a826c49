"""Nodes: the graph's rows from parsed pages (components, sentences, table rows, objects, summaries),
built in the parse workers from parsed pages, and the links between documents."""
