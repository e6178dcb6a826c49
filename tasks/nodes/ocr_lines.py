"""Image text: image components → ``text`` subcomponents (the lines OCR reads in the picture).

Reads picture bytes from the raw store and earlier readings from the index's OCR cache
(``ocr/<engine>/<image_key>.json``: a picture is read once, whatever page shows it and however
often the page is refreshed); writes subcomponent rows of kind ``text`` (text, ``score`` = the
recognizer's confidence, ``bbox`` in pixels and normalized; the reader cuts their crops like an
object's), their ``contains`` edges, the picture's text appended to its image component's text
(so its text proxy and full-text entry carry what the picture says), new cache files, and
problems (stage ``ocr``). A line the recognizer read without its spaces is repaired knowing the
names of its page (the capitalised words of the page's text, captions and alt texts: a page about
Marblehead reads "Marbleheadbasin" as "Marblehead basin"), and the unsplit forms of what the
repair split go into the ``search_terms`` of the line and of its image component, so that
full-text search still finds them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from laminae.schemas.ids import content_hash, digest
from laminae.schemas.pictures import load_image, raster_picture
from laminae.schemas.storage import IndexFiles
from laminae.schemas.tables import error_row
from laminae.tasks.config import OcrConfig
from laminae.tasks.model_runtime import on_free_models, usable_cores
from laminae.tasks.nodes.document_nodes import edge_row, subcomponent_row
from laminae.tasks.parse.ocr import (
    OcrUnavailable,
    TextLine,
    engine_name,
    page_names,
    read_lines,
    recognizer,
    spacing_repair,
)
from laminae.tasks.storage.rawstore import RawStore

log = logging.getLogger("laminae.ocr")
CACHE_DIR = "ocr"
TEXT_MARK = " Text in the picture: "  # joins a picture's text to its image component's text


@dataclass
class ImageText:
    """What the stage made of one batch's pictures."""

    rows: list[dict] = field(default_factory=list)
    edges: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)
    read: int = 0  # distinct pictures run through the recognizer
    cached: int = 0  # distinct pictures whose reading came from the cache
    skipped: int = 0  # image components not read: too small, or over a document's max_pictures


def cache_path(image_key: str, cfg: OcrConfig) -> str:
    return f"{CACHE_DIR}/{digest(engine_name(cfg), size=4)}/{image_key}.json"


def readable(image: dict, cfg: OcrConfig) -> bool:
    """A fetched raster picture at least ``min_width`` x ``min_height`` (as its row records it)."""
    return (raster_picture(image) and (image.get("image_width") or 0) >= cfg.min_width
            and (image.get("image_height") or 0) >= cfg.min_height)


def _chosen(components: list[dict], cfg: OcrConfig) -> tuple[list[dict], int]:
    """The image components to read: per document the ``max_pictures`` largest readable ones."""
    by_doc: dict[str, list[dict]] = {}
    images = [c for c in components if c["kind"] == "image"]
    for image in images:
        if readable(image, cfg):
            by_doc.setdefault(image["document_id"], []).append(image)
    chosen = []
    for group in by_doc.values():
        group.sort(key=lambda c: -(c["image_width"] or 0) * (c["image_height"] or 0))
        chosen.extend(group[:cfg.max_pictures])
    return chosen, len(images) - len(chosen)


def read_image_text(components: list[dict], raw: RawStore, files: IndexFiles, cfg: OcrConfig, run_id: str,
                    make_id: Callable[[str], Callable[[str, str], str]]) -> ImageText:
    """Read the batch's pictures (each distinct picture once, from the cache when it was read
    before) and turn their lines into ``text`` subcomponents of every image component showing them.
    ``make_id(document_id)`` gives the id maker of a document's new nodes."""
    out = ImageText()
    if not cfg.enabled:
        return out
    chosen, out.skipped = _chosen(components, cfg)
    same_picture: dict[str, list[dict]] = {}
    for image in chosen:
        same_picture.setdefault(image["image_key"], []).append(image)
    names = _names(components, {image["document_id"] for image in chosen})
    readings = _readings(same_picture, raw, files, cfg, run_id, out)
    for key, group in same_picture.items():
        lines = readings[key]
        for image in group:
            if lines:
                _attach(image, _repaired(lines, names.get(image["document_id"], frozenset()), cfg),
                        make_id(image["document_id"]), out)
    if same_picture:
        log.info("ocr: %d pictures read, %d from the cache, %d image components skipped", out.read, out.cached,
                 out.skipped)
    return out


def workers(cfg: OcrConfig) -> int:
    """Pictures read at once: ``cfg.workers``, or the cores this process may run on."""
    return cfg.workers or usable_cores()


def recognizer_slots(cfg: OcrConfig, n: int) -> list[tuple[int, int]]:
    """``(slot, ONNX Runtime threads)`` of the recognizers that read ``n`` pictures at once: one
    thread each where pictures are read at once (``workers``), also for a batch with one picture
    to read (a second thread reads one picture only 1.05-1.12x as fast: not worth another model)."""
    threads = cfg.threads or (1 if workers(cfg) > 1 else 0)
    return [(slot, threads) for slot in range(n)]


def _readings(same_picture: dict[str, list[dict]], raw: RawStore, files: IndexFiles, cfg: OcrConfig,
              run_id: str, out: ImageText) -> dict[str, list[TextLine] | None]:
    """The lines of each picture: cached, or read now (``workers(cfg)`` at once) and cached; None
    after a recorded problem."""
    readings: dict[str, list[TextLine] | None] = {}
    todo = []
    for key in same_picture:
        cached = files.read_text(cache_path(key, cfg))
        if cached is None:
            todo.append(key)
            continue
        out.cached += 1
        # a reading cached before lines kept what the recognizer read has three fields
        readings[key] = [TextLine(t, c, tuple(b), *rest) for t, c, b, *rest in json.loads(cached)["lines"]]
    if not todo:
        return readings
    slots = recognizer_slots(cfg, min(workers(cfg), len(todo)))
    engines = [recognizer(cfg, slot, threads) for slot, threads in slots]  # a missing extra raises here

    def read(key: str, engine) -> list[TextLine]:
        return read_lines(load_image(raw.get(key)), cfg, engine)

    for key, done in zip(todo, on_free_models(engines, read, todo, "ocr"), strict=True):
        try:
            lines = done.result()
        except OcrUnavailable:
            raise
        except Exception as exc:  # one unreadable picture must not stop the batch
            out.problems.extend(error_row(run_id, image["image_url"], "ocr", "ocr_failed",
                                          f"{type(exc).__name__}: {exc}", document=image["document_id"])
                                for image in same_picture[key])
            readings[key] = None
            continue
        out.read += 1
        files.write_text(cache_path(key, cfg), json.dumps({"engine": engine_name(cfg), "lines": [
            [line.text, line.confidence, list(line.bbox), line.read] for line in lines]}))
        readings[key] = lines
    return readings


def _names(components: list[dict], documents: set[str]) -> dict[str, frozenset[str]]:
    """The names of these documents: ``page_names`` of their components' text, captions, alt texts
    and section headings, as parsed (read before any picture's text is added to its component)."""
    texts: dict[str, list[str | None]] = {}
    for comp in components:
        if comp["document_id"] in documents:
            texts.setdefault(comp["document_id"], []).extend(
                [comp.get("text"), comp.get("caption"), comp.get("image_alt"), *(comp.get("section_path") or [])])
    return {doc: page_names(found) for doc, found in texts.items()}


def _repaired(lines: list[TextLine], names: frozenset[str], cfg: OcrConfig) -> list[tuple[TextLine, tuple[str, ...]]]:
    """Each line with the unsplit forms of the words its spacing repair split; a line read without
    its spaces is repaired again knowing the names of the page that shows it."""
    out = []
    for line in lines:
        if line.read is None or not cfg.repair_spacing:
            out.append((line, ()))
            continue
        spacing = spacing_repair(line.read, names)
        out.append((TextLine(spacing.text, line.confidence, line.bbox, line.read), spacing.unsplit))
    return out


def _attach(image: dict, lines: list[tuple[TextLine, tuple[str, ...]]], make_id: Callable[[str, str], str],
            out: ImageText) -> None:
    width, height = image["image_width"], image["image_height"]
    terms: dict[str, None] = dict.fromkeys(image.get("search_terms") or [])
    for ordinal, (line, unsplit) in enumerate(lines):
        sid = make_id("text", f"{image['id']}|{line.text}|{list(line.bbox)}")
        x0, y0, x1, y1 = line.bbox
        out.rows.append(subcomponent_row(
            sid, image["document_id"], image["id"], "text", ordinal, line.text, score=line.confidence,
            bbox=list(line.bbox), bbox_norm=[round(x0 / width, 5), round(y0 / height, 5), round(x1 / width, 5),
                                             round(y1 / height, 5)], search_terms=list(unsplit) or None))
        out.edges.append(edge_row("contains", image["id"], 1, sid, image["document_id"]))
        terms.update(dict.fromkeys(unsplit))
    image["text"] = f"{image['text']}{TEXT_MARK}{' '.join(line.text for line, _ in lines)}"
    image["content_hash"] = content_hash(image["text"])
    image["search_terms"] = list(terms) or None
