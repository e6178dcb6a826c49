"""Pictures as both halves of laminae handle them: the decoding limit, decoding, object crops.

Reads image bytes (from the raw store, or a page being parsed); writes nothing. Pillow is imported
only when a picture is decoded, so the reader needs it only to crop objects.
"""

from __future__ import annotations

import io
from collections.abc import Mapping

MAX_PIXELS = 89_478_485  # Pillow's own decompression-bomb threshold: larger pictures are refused, not decoded


def raster_picture(row: Mapping) -> bool:
    """Whether a node row is an image component with a picture in the raw store that decodes to
    pixels (SVG is drawn, not decoded): what is detected, read and embedded from pixels."""
    return row.get("kind") == "image" and bool(row.get("image_key")) and row.get("image_mime") != "image/svg+xml"


def load_image(data: bytes):
    """An RGB PIL image from bytes."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return img.convert("RGB")


def crop(data: bytes, box: list[float]):
    """The crop of ``box`` (pixels: x0, y0, x1, y1) from image bytes, a PIL image."""
    return load_image(data).crop(tuple(int(round(v)) for v in box))


def crop_png(data: bytes, box: list[float]) -> bytes:
    """``crop`` encoded as PNG bytes."""
    out = io.BytesIO()
    crop(data, box).save(out, "PNG")
    return out.getvalue()
