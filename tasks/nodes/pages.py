"""Parse: fetched pages → node rows, in worker processes killed at each page's deadline.

Reads each page's bytes from the index's raw store and adds the images a PDF embeds to it (those
its page keeps under ``max_images``); returns ``DocumentNodes`` and error rows and writes no
table. Imports no model and no LanceDB, so worker processes start light.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from urllib.parse import unquote, urlsplit

from laminae.schemas.ids import canonical_url, document_id
from laminae.schemas.tables import duplicate_row, error_row, timeout_row
from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.formats import PAGE_TYPES, PDF_TYPE, VIDEO_TYPES, format_of
from laminae.tasks.crawl.pictures import check_image
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import DocumentNodes, build_nodes, cap_components
from laminae.tasks.parse import parse
from laminae.tasks.parse.document import Component, ParsedPage, ParseError
from laminae.tasks.parse.html import image_text_proxy
from laminae.tasks.parse.isolated import WorkerCrash, WorkerTimeout, worker_pool
from laminae.tasks.storage.rawstore import RawStore

# imported by a worker before a page's deadline starts (the parsers import them lazily; a second
# of imports on a loaded machine would otherwise come out of the first PDF's or paragraph's time).
# pdf_layout imports pymupdf without the layout model pymupdf 2.0 loads on import (0.3-1.3 s, 50 MB
# a worker), which the default pdf_layout=auto never runs
WORKER_IMPORTS = ("laminae.tasks.parse.pdf.layout", "pysbd")

log = logging.getLogger("laminae.parse")


def document_id_for(res: FetchResult, canonical: str | None) -> tuple[str, str | None]:
    """The document id of a fetched page; a canonical URL on another host is not trusted. A page
    fetched ``same_as`` an earlier one (its bytes under another spelling of that URL) is that page."""
    final = res.same_as or res.final_url or res.url
    if canonical and _host(canonical) == _host(final):
        return document_id(canonical), None
    warning = f"canonical_ignored: {canonical} is on another host than {final}" if canonical else None
    return document_id(final), warning


def _host(url: str) -> str | None:
    target = canonical_url(url)
    return urlsplit(target).hostname if target else None


def store_pdf_images(page, raw: RawStore) -> None:
    """Put the images a PDF embeds into the raw store; their components keep the key."""
    for comp in page.components:
        if comp.image_data is None:
            continue
        check = check_image(comp.image_data, comp.image_mime)
        if check.error:
            page.warnings.append(f"{check.error}: image on page {comp.page}: {check.message}")
        else:
            comp.image_key = raw.put(comp.image_data)
            comp.image_mime, comp.width, comp.height = check.mime, check.width, check.height
        comp.image_data = None


def parse_documents(results: list[FetchResult], index_dir: str, settings: BuildSettings,
                    run_id: str) -> tuple[list[DocumentNodes], list[dict]]:
    """Parse the batch's pages into node rows; a page that fails becomes an error row. A second page
    with the same document id in the batch is skipped (``write_batch`` does the same across batches).

    The pages are parsed in ``runner.parse_workers`` worker processes, each page within
    ``parse.timeout_s`` (a PDF's grows with its pages): a page past its deadline has its worker
    killed and becomes a ``parse_timeout`` error row, one that kills its worker twice a
    ``parser_crashed`` error row. ``parse_workers=0`` parses in this process, unbounded."""
    pages = [r for r in results if r.ok and r.content_type in PAGE_TYPES]
    calls = [(res, index_dir, settings, run_id) for res in pages]
    if settings.runner.parse_workers and pages:
        outcomes = worker_pool(settings.runner.parse_workers).map(parse_page, calls, settings.parse.timeout_s)
    else:
        outcomes = [parse_page(*call) for call in calls]
    docs: list[DocumentNodes] = []
    errors: list[dict] = []
    seen: set[str] = set()
    for res, outcome in zip(pages, outcomes, strict=True):
        if isinstance(outcome, WorkerCrash):
            errors.append(error_row(run_id, res.url, "parse", "parser_crashed",
                                    f"the parser's process died on this page twice: {outcome.reason}; skipped"))
            continue
        if isinstance(outcome, WorkerTimeout):
            errors.append(timeout_row(run_id, res.url, "parse", outcome.seconds, res.content_type == PDF_TYPE))
            continue
        nodes, problems, warnings = outcome
        errors.extend(problems)
        if nodes is None:
            continue
        doc_id = nodes.document["id"]
        if doc_id in seen:
            errors.append(duplicate_row(run_id, res.url, doc_id))
            continue
        seen.add(doc_id)
        errors.extend(warnings)
        docs.append(nodes)
    return docs, errors


def video_page(res: FetchResult) -> ParsedPage:
    """A video fetched as a page: a document of one video component (its keyframes and captions
    are added by the video stage), titled by its file name."""
    url = res.final_url or res.url
    title = unquote(urlsplit(url).path.rstrip("/").rpartition("/")[2]) or url
    video = Component("video", "", [], video_url=url, video_key=res.raw_key)
    video.text = image_text_proxy(video, title)
    return ParsedPage(url, title, None, None, [video], kind="video")


@lru_cache(maxsize=8)
def _raw_store(index_dir: str) -> RawStore:
    """One raw store per index and process (opening object storage costs a round trip)."""
    return RawStore(index_dir)


def parse_page(res: FetchResult, index_dir: str, settings: BuildSettings,
               run_id: str) -> tuple[DocumentNodes | None, list[dict], list[dict]]:
    """One fetched page: its nodes (None when it cannot be indexed), error rows and warning rows.

    Reads the page's bytes from the index's raw store and adds the images found in a PDF to it."""
    raw = _raw_store(index_dir)
    pdf = res.content_type == PDF_TYPE
    try:
        if res.content_type in VIDEO_TYPES:
            page = video_page(res)
        else:
            page = parse(raw.get(res.raw_key), res.final_url or res.url, res.content_type, cfg=settings.parse,
                         ocr=settings.ocr, charset=res.charset)
    except ParseError as exc:
        return None, [error_row(run_id, res.url, "parse", exc.reason, str(exc))], []
    except Exception as exc:  # a parser bug must not sink the batch: record it with the page
        log.exception("parse of %s failed", res.url)
        return None, [error_row(run_id, res.url, "parse", "parser_exception", f"{type(exc).__name__}: {exc}")], []
    if not page.components and any(w.startswith("navigation_only") for w in page.warnings):
        reason, _, message = next(w for w in page.warnings if w.startswith("navigation_only")).partition(": ")
        return None, [error_row(run_id, res.url, "parse", reason, message, severity="warning")], []
    if not page.components:  # often a script-rendered page; keep what an earlier build indexed
        what = "a text layer or images in the PDF" if pdf else \
            f"paragraphs, tables or images in the {(format_of(res.content_type) or 'document').upper()}"
        reason = "no_text_layer" if pdf and any(w.startswith("no_text_layer") for w in page.warnings) \
            else "no_content"
        return None, [error_row(run_id, res.url, "parse", reason, f"found no {what}; document skipped")], []
    cap_components(page, settings.parse)  # before storing: a PDF's images past max_images are not kept
    store_pdf_images(page, raw)
    doc_id, warning = document_id_for(res, page.canonical_url)
    if warning:
        page.warnings.append(warning)
        page.canonical_url = None
    nodes = build_nodes(page, doc_id, res, settings.parse)
    warnings = []
    for warning in page.warnings:
        reason, _, message = warning.partition(": ")
        warnings.append(error_row(run_id, res.url, "parse", reason, message or reason,
                                  severity="warning", document=doc_id))
    return nodes, [], warnings
