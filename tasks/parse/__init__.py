"""Parse: fetched HTML and PDF pages into documents of components, in worker processes killed at a deadline.

``PARSER_VERSION`` is recorded in an index's metadata by every run that publishes: a refresh of an
index parsed by another version parses every page again, changed or not (texts that did not change
come from the embedding cache), so an upgrade's parser reaches pages that never change.
"""

# 1: laminae before the version was recorded; 2: documentation generators parsed whole (issue 34),
# no silent truncation (deep trees, huge text nodes and attributes; issue 29)
PARSER_VERSION = 2
