"""Arrow schemas of every laminae table, declared once: the contract between builder and reader.

Reads and writes nothing. Node tables (documents, components, subcomponents) share ``id``,
``kind``, ``text`` and ``vector``; child rows add ``document_id`` and ``parent_id``. Vectors are
``fixed_size_list<float32>[dim]`` where ``dim`` is the embedder's dimension. The rows of the
``errors`` table (problems and warnings of every stage) are built here, beside its schema
(``error_row``).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from laminae.schemas.ids import digest

SCHEMA_VERSION = 1

NODE_TABLES = ("documents", "components", "subcomponents")
TABLES = (*NODE_TABLES, "edges", "fetches", "errors", "runs", "embeddings")
LAYERS = {"documents": 0, "components": 1, "subcomponents": 2}

DOCUMENT_KINDS = ("html", "pdf", "video", "markdown", "text", "csv", "docx", "pptx", "xlsx", "epub")
# video: a video on a page (or a video document's own); its keyframes are image components with
# time_s, its captions transcript components with time_start/time_end (their sentences keep theirs)
# code: a code block (a <pre>), its lines kept
COMPONENT_KINDS = ("paragraph", "table", "image", "video", "transcript", "code")
# header: a table's column labels, one per table; text: a line read in a picture (OCR); lines: a run
# of a code block's lines (blank lines first, about 600 characters)
SUBCOMPONENT_KINDS = ("sentence", "row", "object", "header", "text", "lines")
EDGE_KINDS = ("contains", "links_to")


def vector_type(dim: int) -> pa.DataType:
    if dim <= 0:
        raise ValueError(f"vector dimension must be positive, got {dim}")
    return pa.list_(pa.field("item", pa.float32()), dim)


def documents_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),  # DOCUMENT_KINDS: the format it was parsed as
            pa.field("url", pa.string(), nullable=False),  # the seed or link URL it was fetched by
            pa.field("final_url", pa.string()),  # after redirects
            pa.field("canonical_url", pa.string()),  # <link rel=canonical>, else final_url
            pa.field("title", pa.string()),
            pa.field("summary", pa.string()),
            pa.field("text", pa.string()),  # what layer 0 embeds: title + summary (or lead text)
            pa.field("search_text", pa.string()),  # what full-text search reads (laminae.schemas.search_text)
            pa.field("annotations", pa.string()),  # JSON object from the seeds file
            pa.field("content_type", pa.string()),
            pa.field("content_hash", pa.string()),  # sha256 of the raw body
            pa.field("raw_key", pa.string()),  # key of the raw body in the index's raw store
            pa.field("n_components", pa.int32()),
            pa.field("n_subcomponents", pa.int32()),
            pa.field("warnings", pa.list_(pa.string())),
            pa.field("vector", vector_type(dim)),
        ]
    )


def components_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("document_id", pa.string(), nullable=False),
            pa.field("parent_id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),  # paragraph | table | image | video | transcript
            pa.field("ordinal", pa.int32(), nullable=False),  # position in the document
            pa.field("section_path", pa.list_(pa.string())),  # heading hierarchy above it
            pa.field("text", pa.string()),  # paragraph text; linearized table; image text proxy
            pa.field("search_text", pa.string()),  # title | section, then text (laminae.schemas.search_text)
            pa.field("content_hash", pa.string()),  # of what was embedded
            # words full-text search also finds the node by (the unsplit forms of words OCR's spacing
            # repair split in a picture's text); null in indexes built before it
            pa.field("search_terms", pa.list_(pa.string())),
            # tables
            pa.field("caption", pa.string()),  # table caption or image caption
            pa.field("table_kind", pa.string()),  # data | infobox
            pa.field("table_header", pa.list_(pa.string())),  # one label per column
            pa.field("table_rows", pa.list_(pa.list_(pa.string()))),
            # images
            pa.field("image_url", pa.string()),
            pa.field("image_alt", pa.string()),
            pa.field("image_key", pa.string()),  # raw-store key of the image bytes, null if not fetched
            pa.field("image_mime", pa.string()),
            pa.field("image_width", pa.int32()),
            pa.field("image_height", pa.int32()),
            pa.field("detected", pa.bool_()),  # the object detector has run on these image bytes
            # videos (image_width, image_height: the video's frame size), their keyframes and transcripts
            pa.field("video_url", pa.string()),  # the video's URL (on a keyframe or transcript: its video's)
            pa.field("video_key", pa.string()),  # raw-store key of the video bytes, null if not fetched
            pa.field("captions_url", pa.string()),  # the WebVTT/SRT file the transcripts were read from
            pa.field("duration_s", pa.float64()),
            pa.field("time_s", pa.float64()),  # keyframes: seconds into the video
            pa.field("time_start", pa.float64()),  # transcripts: the span of their cues, seconds
            pa.field("time_end", pa.float64()),
            # provenance (PDF)
            pa.field("page", pa.int32()),
            pa.field("bbox", pa.list_(pa.float32())),
            pa.field("vector", vector_type(dim)),
        ]
    )


def subcomponents_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("document_id", pa.string(), nullable=False),
            pa.field("parent_id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),  # sentence | row | object
            pa.field("ordinal", pa.int32(), nullable=False),  # position within the parent
            pa.field("text", pa.string()),  # sentence; "header: cell | header: cell"; object proxy
            pa.field("search_text", pa.string()),  # title | section | caption, then text (laminae.schemas.search_text)
            pa.field("content_hash", pa.string()),
            pa.field("search_terms", pa.list_(pa.string())),  # as for components (OCR: a text line's unsplit words)
            # sentences: [char_start, char_end) into the parent's text
            pa.field("char_start", pa.int32()),
            pa.field("char_end", pa.int32()),
            # rows: the header labels and this row's cells, aligned
            pa.field("header", pa.list_(pa.string())),
            pa.field("cells", pa.list_(pa.string())),
            # objects
            pa.field("label", pa.string()),
            pa.field("score", pa.float32()),
            pa.field("bbox", pa.list_(pa.float32())),  # x0, y0, x1, y1 in pixels
            pa.field("bbox_norm", pa.list_(pa.float32())),  # the same, divided by width/height
            # sentences of a transcript: the span of the cues they were said in, seconds
            pa.field("time_start", pa.float64()),
            pa.field("time_end", pa.float64()),
            pa.field("vector", vector_type(dim)),
        ]
    )


EDGES = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # contains | links_to
        pa.field("src_id", pa.string(), nullable=False),
        pa.field("src_layer", pa.int8(), nullable=False),
        pa.field("dst_id", pa.string(), nullable=False),  # for links: the target document's id
        pa.field("document_id", pa.string(), nullable=False),  # the owner, for scoped deletes
        pa.field("anchor_text", pa.string()),
        pa.field("target_url", pa.string()),  # raw (absolute) link target
        pa.field("target_id", pa.string()),  # document id of target_url itself, before resolution
        pa.field("resolved", pa.bool_()),  # dst_id is a document of this index
        # links: how many anchors of the source point at the target (one row per source and target);
        # null in indexes built before it, where each anchor had its own row
        pa.field("anchors", pa.int32()),
    ]
)

FETCHES = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # digest of the normalized requested URL
        pa.field("url", pa.string(), nullable=False),
        pa.field("final_url", pa.string()),
        pa.field("redirects", pa.list_(pa.string())),
        pa.field("status", pa.int32()),
        pa.field("content_type", pa.string()),
        pa.field("etag", pa.string()),
        pa.field("last_modified", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("raw_key", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("fetched_at", pa.timestamp("us", tz="UTC")),
        pa.field("run_id", pa.string()),
        pa.field("error", pa.string()),
    ]
)

ERRORS = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("url", pa.string()),  # the input that failed
        pa.field("document_id", pa.string()),
        pa.field("stage", pa.string(), nullable=False),  # crawl | parse | image | embed | write ...
        pa.field("severity", pa.string(), nullable=False),  # error | warning
        pa.field("reason", pa.string(), nullable=False),  # short machine-readable cause
        pa.field("message", pa.string()),
        pa.field("created_at", pa.timestamp("us", tz="UTC")),
    ]
)


def error_row(run_id: str, url: str | None, stage: str, reason: str, message: str,
              *, severity: str = "error", document: str | None = None) -> dict:
    """An ``errors`` row: what failed (``url``, ``document``), in which ``stage``, why."""
    return {
        "id": "x" + digest(run_id, url or "", stage, reason, message),
        "run_id": run_id,
        "url": url,
        "document_id": document,
        "stage": stage,
        "severity": severity,
        "reason": reason,
        "message": message,
        "created_at": datetime.now(UTC),
    }


def duplicate_row(run_id: str, url: str, doc_id: str) -> dict:
    """The warning of a page whose document another URL of this run already indexed."""
    return error_row(run_id, url, "parse", "duplicate_document",
                     f"same canonical URL as a page already indexed in this run ({doc_id})",
                     severity="warning", document=doc_id)


def timeout_row(run_id: str, url: str, stage: str, seconds: float, pdf: bool = False,
                document: str | None = None) -> dict:
    """The ``parse_timeout`` error row of a document (or caption file) whose worker was killed at its deadline."""
    setting = ("LAMINAE_PARSE__TIMEOUT_S + PDF_PAGE_TIMEOUT_S x pages" if pdf else "LAMINAE_PARSE__TIMEOUT_S")
    return error_row(run_id, url, stage, "parse_timeout",
                     f"parsing ran past its deadline of {seconds:g} s ({setting}); its worker process was killed "
                     "and the document skipped", document=document)


RUNS = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("flow", pa.string(), nullable=False),  # build | refresh
        pa.field("status", pa.string(), nullable=False),  # success | partial | failure
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
        pa.field("finished_at", pa.timestamp("us", tz="UTC")),
        pa.field("config_hash", pa.string()),
        pa.field("manifest_version", pa.int64()),
        pa.field("summary", pa.string()),  # JSON: counts, errors by stage, seconds by stage
    ]
)


def embeddings_schema(dim: int) -> pa.Schema:
    """The embedding cache: one vector per (model, exact embedded content)."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),  # digest(model_id, content hash)
            pa.field("model_id", pa.string(), nullable=False),
            pa.field("vector", vector_type(dim)),
        ]
    )


def table_schemas(dim: int) -> dict[str, pa.Schema]:
    """Every table's schema for an index whose vectors have ``dim`` dimensions."""
    return {
        "documents": documents_schema(dim),
        "components": components_schema(dim),
        "subcomponents": subcomponents_schema(dim),
        "edges": EDGES,
        "fetches": FETCHES,
        "errors": ERRORS,
        "runs": RUNS,
        "embeddings": embeddings_schema(dim),
    }
