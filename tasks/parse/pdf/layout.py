"""pymupdf's layout model (pymupdf 2.0, ``pymupdf.layout``): the regions of a PDF page, classed.

Reads a pymupdf page; returns ``(bbox in points, class)`` for each region the model finds: text,
title, section-header, list-item, table, picture, caption, footnote, page-header, page-footer,
formula. Writes nothing. The model is a graph network over the page's text boxes with image
features (ONNX graphs inside the wheel, run by ONNX Runtime on the CPU). pymupdf 2.0 loads it inside
``import pymupdf`` whenever the package is installed: 0.3 s idle, 1-1.3 s on a busy 2-core machine,
and 50 MB more memory in every process that imports pymupdf, HTML parse workers included, though
the rules (``pdf_layout=auto``) never run it. Importing this module before pymupdf defers that:
pymupdf is imported without its model, and ``available()`` loads it on first use, once per process
(a parse worker that reads PDFs with ``pdf_layout=model`` loads it at its first PDF, not per page).
``LayoutClock`` keeps the pages the model read and the seconds it took, for the bench.
"""

from __future__ import annotations

import sys
import time

from laminae.tasks.parse.pdf.blocks import Block

MARGIN_REGIONS = {"page-header", "page-footer"}


class LayoutClock:
    """Pages the model read in this process and the seconds it took."""

    pages = 0
    seconds = 0.0


def _defer() -> None:
    """Import pymupdf without loading its layout model (a ``None`` module makes its
    ``import pymupdf.layout`` fail, which pymupdf takes as "not installed")."""
    if "pymupdf" not in sys.modules and "pymupdf.layout" not in sys.modules:
        sys.modules["pymupdf.layout"] = None  # type: ignore[assignment]
        try:
            import pymupdf  # noqa: F401
        except ImportError:  # no pymupdf in this environment: nothing to defer
            pass
        finally:
            del sys.modules["pymupdf.layout"]


_defer()


def available() -> bool:
    """Whether the layout model can run; loads it the first time (once per process)."""
    import pymupdf

    if getattr(pymupdf, "_get_layout", None) is None:
        try:
            import pymupdf.layout

            pymupdf.layout.activate()
        except ImportError:  # pymupdf without the layout package
            return False
    return callable(getattr(pymupdf, "_get_layout", None))


def page_regions(page) -> list[tuple[tuple[float, float, float, float], str]]:
    """The page's regions and their classes, in the model's order."""
    start = time.perf_counter()
    page.get_layout()
    LayoutClock.pages += 1
    LayoutClock.seconds += time.perf_counter() - start
    out = []
    for x0, y0, x1, y1, name, *_ in page.layout_information or []:
        out.append(((float(x0), float(y0), float(x1), float(y1)), str(name)))
    return out


def _share_inside(inner: tuple, outer: tuple) -> float:
    w = min(inner[2], outer[2]) - max(inner[0], outer[0])
    h = min(inner[3], outer[3]) - max(inner[1], outer[1])
    area = max(inner[2] - inner[0], 0.1) * max(inner[3] - inner[1], 0.1)
    return max(w, 0.0) * max(h, 0.0) / area


def label_blocks(blocks: list[Block], regions: list[tuple[tuple, str]]) -> None:
    """Set each text block's ``region`` to the class of the region that holds most of it."""
    for b in blocks:
        best, share = "", 0.5
        for box, name in regions:
            s = _share_inside(b.bbox, box)
            if s > share:
                best, share = name, s
        b.region = best


def boxes(regions: list[tuple[tuple, str]], name: str) -> list[tuple]:
    return [box for box, n in regions if n == name]
