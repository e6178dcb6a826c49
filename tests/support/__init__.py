"""What the tests, the benchmarks and the sample site's generators share: data made to order.

Each module writes only what it returns or the folder it is given, deterministically for a seed:
``synthetic`` (an index of unit vectors in the real schemas, streamed), ``synthetic_pdf`` (PDFs
with known headings, columns, tables, images and links), ``scans`` (pictures and scanned PDFs with
known text), ``clips`` (videos with known scenes, caption files with known cues), ``embedders``
(a deterministic text embedder that needs no model). Imported as ``tests.support``: by pytest,
which puts the repository on ``sys.path`` (``tests`` is a package), and by ``bench/`` scripts.
"""
