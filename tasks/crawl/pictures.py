"""Images: fetch the pictures image components point at, check them, record size and type.

Reads image components (their ``image_url``); writes image bytes to the raw store and sets
``image_key``, ``image_mime``, ``image_width`` and ``image_height`` on the rows. A broken,
truncated, zero-size or decompression-bomb image gets an error and no bytes; its component stays
(embedded through its text proxy).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

from laminae.schemas.pictures import MAX_PIXELS
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.fetch import fetch_images
from laminae.tasks.crawl.files import is_file_url
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.storage.rawstore import RawStore


@dataclass
class ImageCheck:
    mime: str | None
    width: int | None
    height: int | None
    error: str | None = None
    message: str | None = None


def check_image(data: bytes, sniffed: str | None) -> ImageCheck:
    """Decode an image's header and pixels enough to know it is usable."""
    if sniffed == "image/svg+xml":
        return ImageCheck("image/svg+xml", None, None)
    if not data:
        return ImageCheck(None, None, None, "empty_image", "the image has zero bytes")
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                width, height = img.size
                if width * height > MAX_PIXELS:
                    return ImageCheck(None, width, height, "decompression_bomb",
                                      f"{width}x{height} pixels exceeds {MAX_PIXELS}")
                mime = Image.MIME.get(img.format or "", sniffed)
                img.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return ImageCheck(None, None, None, "decompression_bomb", str(exc))
    except (OSError, SyntaxError, ValueError) as exc:
        return ImageCheck(None, None, None, "undecodable_image", f"{type(exc).__name__}: {exc}")
    if width == 0 or height == 0:
        return ImageCheck(None, width, height, "empty_image", "the image has zero width or height")
    return ImageCheck(mime, width, height)


def attach_images(
    components: list[dict], cfg: CrawlConfig, raw: RawStore, seed_hosts: set[str]
) -> tuple[list[FetchResult], list[tuple[dict, str, str, str]]]:
    """Fetch and check every image component's picture in place.

    Returns the fetch results of in-scope images and ``(component, url, reason, message)`` for
    each image that could not be used (a file outside the seed folders among them, one on a
    refused private address; an image on another host is simply not fetched) and for each
    robots.txt first read here that could not be read whole (with the first image of its host).
    """
    images = [c for c in components if c["kind"] == "image" and c.get("image_url")]
    if not images or not cfg.fetch_images:
        return [], []
    robots: list[FetchResult] = []
    fetched = fetch_images([c["image_url"] for c in images], cfg, raw, seed_hosts, problems=robots)
    problems = []
    for res in robots:
        origin = res.url.removesuffix("robots.txt")
        first = next((c for c in images if c["image_url"].startswith(origin)), images[0])
        problems.append((first, res.url, res.error or "robots_unreadable", res.message or ""))
    for comp in images:
        res = fetched[comp["image_url"]]
        if res.error == "out_of_scope" and not is_file_url(res.url):
            continue  # images on other hosts are not fetched; the URL stays on the row
        if not res.ok:
            problems.append((comp, comp["image_url"], res.error, res.message or ""))
            continue
        check = check_image(raw.get(res.raw_key), res.content_type)
        if check.error:
            problems.append((comp, comp["image_url"], check.error, check.message or ""))
            continue
        comp["image_key"] = res.raw_key
        comp["image_mime"] = check.mime
        comp["image_width"] = check.width if check.width is not None else comp["image_width"]
        comp["image_height"] = check.height if check.height is not None else comp["image_height"]
    return [r for r in fetched.values() if r.error != "out_of_scope"], problems
