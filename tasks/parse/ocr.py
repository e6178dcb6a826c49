"""OCR: pixels → lines of text with boxes and confidences (rapidocr: PP-OCR models on ONNX Runtime).

Reads a decoded picture (PIL) or a rendered PDF page; returns ``TextLine``s in reading order.
Writes nothing. The models ship inside the ``rapidocr-onnxruntime`` wheel (nothing is
downloaded); one recognizer is loaded per process through ``loaded_once``. The recognizer
sometimes reads English without its spaces ("recordlevels"): ``repair_spacing`` splits such runs of
letters into dictionary words (symspellpy's bundled English frequency list) when every part is a
word and the run itself is not, nor a name the caller knows (``names``: the page's own names, say);
``spacing_repair`` also gives the unsplit forms of what it split, so that a name the dictionary
lacks but splits ("Marbleheadbasin" → "Marble head basin") can still be searched for.
"""

from __future__ import annotations

import importlib.resources
import logging
import re
from collections.abc import Set
from dataclasses import dataclass

from laminae.schemas.errors import LaminaeError
from laminae.tasks.config import OcrConfig
from laminae.tasks.model_runtime import loaded_once
from laminae.tasks.parse.ocr_int8 import REC_HEIGHT

log = logging.getLogger("laminae.ocr")

ENGINE = "rapidocr-onnxruntime/PP-OCRv4"  # the fp32 engine; ``engine_name`` gives a configuration's
LETTERS = re.compile(r"[A-Za-z]{10,}")  # shorter runs are words or names, unless the line lost its spaces
MIDDLE_LETTERS = re.compile(r"(?<![A-Za-z])[A-Za-z]{6,9}(?![A-Za-z])")
ALNUM = re.compile(r"[^\W_]")
PUNCT_THEN_WORD = re.compile(r"(?<=[A-Za-z][,;:])(?=[A-Za-z])")  # "Annex:a", "Ashford,so"
SHORT_WORDS = frozenset({"a", "an", "of", "in", "to", "on", "at", "by", "or", "as", "is"})
WORD_THEN_NUMBER = re.compile(r"(?<![A-Za-z])([A-Za-z]{3,})(?=\d)")  # "rainfall2019"
NUMBER_THEN_WORD = re.compile(r"(?<=\d)([A-Za-z]{2,})(?![A-Za-z])")  # "1,204mm", "1923harvest"
NAME = re.compile(r"(?<![A-Za-z])[A-Z][A-Za-z]{3,}")  # a capitalised word of a page: "Marblehead"
UNITS = frozenset({"mm", "cm", "km", "kg", "mg", "ml", "ha", "ft", "lb", "oz", "kb", "mb", "gb", "tb", "px", "pt",
                   "am", "pm", "ms", "hz", "khz", "mhz", "ghz", "kw", "kwh", "mw", "gw"})


class OcrUnavailable(LaminaeError, RuntimeError):
    """The recognizer cannot be loaded (the ml extra is missing); the message says what to install."""


@dataclass(frozen=True)
class TextLine:
    """One line of text read from a picture: its words, confidence and box (x0, y0, x1, y1) in pixels."""

    text: str
    confidence: float
    bbox: tuple[float, float, float, float]
    read: str | None = None  # the line as the recognizer read it, when the spacing repair changed it


@dataclass(frozen=True)
class Spacing:
    """A line after the spacing repair, and the unsplit forms of the runs it split: each run whole
    and each two or three neighbouring parts joined ("Marbleheadbasin", "Marblehead", "headbasin")."""

    text: str
    unsplit: tuple[str, ...] = ()


def engine_name(cfg: OcrConfig) -> str:
    """What reads the pictures, as recorded with cached readings: another engine reads again."""
    return ENGINE + ("#int8" if cfg.precision == "int8" else "")


def recognizer(cfg: OcrConfig, slot: int = 0, threads: int | None = None):
    """The process's rapidocr engine number ``slot`` for these settings (each loaded once), run by
    ``threads`` ONNX Runtime threads (default ``cfg.threads``; 0: its default). An engine reads one
    picture at a time: threads reading at once take one slot each."""
    threads = cfg.threads if threads is None else threads

    def load():
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as exc:
            raise OcrUnavailable(f"rapidocr-onnxruntime cannot be imported ({exc}); install the ml extra "
                                 "or set LAMINAE_OCR__ENABLED=false") from None
        logging.getLogger("RapidOCR").setLevel(logging.WARNING)
        options: dict = {"intra_op_num_threads": threads} if threads else {}
        if cfg.precision == "int8":
            from laminae.tasks.parse.ocr_int8 import int8_recognizer

            options["rec_model_path"] = str(int8_recognizer())
        # one line per recognizer call: a batch pads its lines to the widest, and the thumbnails of
        # wtq-dev read 15-22 % faster unbatched with as many words right (bench/ocr.py: 0.991 vs 0.989).
        # rapidocr pads each line to at least 320 px wide (48 high); a short line run at its own width
        # is read 1.35x as fast, as right (wtq-dev's cards: 0.888 of the characters either way)
        return RapidOCR(det_limit_type="max", det_limit_side_len=cfg.detect_side, rec_batch_num=1,
                        rec_img_shape=[3, REC_HEIGHT, REC_HEIGHT], **options)

    return loaded_once(("rapidocr", engine_name(cfg), "cpu", threads, cfg.detect_side, slot), load)


def read_lines(picture, cfg: OcrConfig, engine=None) -> list[TextLine]:
    """The lines of text in a PIL picture, in reading order, at least ``cfg.min_confidence`` sure
    (read by ``engine``, default the process's first ``recognizer``)."""
    engine = engine or recognizer(cfg)
    found, _ = engine(picture.convert("RGB"), use_cls=cfg.upside_down)
    lines = []
    for box, text, score in found or []:
        text = " ".join(str(text).split())
        if float(score) < cfg.min_confidence or not ALNUM.search(text):  # "···" read in noise or a texture
            continue
        xs, ys = [p[0] for p in box], [p[1] for p in box]
        read = text
        if cfg.repair_spacing:
            text = repair_spacing(text)
        lines.append(TextLine(text, round(float(score), 4),
                              (round(min(xs), 1), round(min(ys), 1), round(max(xs), 1), round(max(ys), 1)),
                              read if read != text else None))
    return reading_order(lines)


def reading_order(lines: list[TextLine]) -> list[TextLine]:
    """Top to bottom, and left to right within a line: boxes whose vertical centres lie within half
    a line height of each other are one line."""
    if not lines:
        return []
    heights = sorted(line.bbox[3] - line.bbox[1] for line in lines)
    band = max(heights[len(heights) // 2] / 2, 1.0)
    by_top = sorted(lines, key=lambda line: (line.bbox[1] + line.bbox[3]) / 2)
    rows: list[list[TextLine]] = []
    for line in by_top:
        centre = (line.bbox[1] + line.bbox[3]) / 2
        if rows and abs(centre - (rows[-1][0].bbox[1] + rows[-1][0].bbox[3]) / 2) <= band:
            rows[-1].append(line)
        else:
            rows.append([line])
    return [line for row in rows for line in sorted(row, key=lambda item: item.bbox[0])]


def spelling_dictionary():
    """symspellpy's English word list, loaded once per process (2 s: the build loads it beside its
    models, before the first picture is read)."""

    def load():
        from symspellpy import SymSpell

        speller = SymSpell(max_dictionary_edit_distance=0, prefix_length=7)
        path = importlib.resources.files("symspellpy") / "frequency_dictionary_en_82_765.txt"
        if not speller.load_dictionary(str(path), term_index=0, count_index=1):
            raise OcrUnavailable(f"symspellpy's English dictionary is missing at {path}; reinstall symspellpy "
                                 "or set LAMINAE_OCR__REPAIR_SPACING=false")
        return speller

    return loaded_once(("symspellpy", "frequency_dictionary_en_82_765"), load)


def page_names(texts) -> frozenset[str]:
    """The capitalised words of four letters or more in ``texts`` (a page's text, captions, alt
    texts), lower-cased: the names ``repair_spacing`` keeps whole."""
    return frozenset(word.lower() for text in texts if text for word in NAME.findall(text))


def _join_names(parts: list[str], names: Set[str]) -> list[str]:
    """``parts`` with each longest stretch of neighbouring parts that spells a name joined again
    ("Marble", "head", "basin" → "Marblehead", "basin" when "marblehead" is a name)."""
    out, i = [], 0
    while i < len(parts):
        end = next((j for j in range(len(parts), i + 1, -1) if "".join(parts[i:j]).lower() in names), i + 1)
        out.append("".join(parts[i:end]))
        i = end
    return out


def _split_run(run: str, speller, names: Set[str] = frozenset()) -> list[str]:
    """``run`` split into dictionary words when it is neither a word nor a known name (``names``,
    lower-cased, so that its capitalised form counts) and every part is a word (each of three
    letters or more, or a short function word, one of five or more), parts that spell a known name
    joined again; else ``[run]``."""
    if run.lower() in speller.words or run.lower() in names:
        return [run]
    parts = speller.word_segmentation(run, max_edit_distance=0).segmented_string.split()
    if len(parts) < 2 or "".join(parts) != run:
        return [run]
    words = all(p.lower() in speller.words and (len(p) > 2 or p.lower() in SHORT_WORDS) for p in parts)
    # a name the dictionary lacks splits into short words ("Ken sing ton"); run-together words of a
    # sentence hold a longer one
    if not (words and max(map(len, parts)) >= 5):
        return [run]
    return _join_names(parts, names) if names else parts


def repair_spacing(text: str, names: Set[str] = frozenset()) -> str:
    """``text`` with runs of letters the recognizer read without their spaces split into words
    ("Wheatharvestreached" → "Wheat harvest reached"): every run of ten or more letters, and, in a
    line where such a run was split (the recognizer dropped spaces there), runs of six to nine
    ("ryebushel"); shorter runs and runs that are words or known names (``names``, lower-cased:
    ``page_names``) are left as they are, and a name inside a run stays whole ("Marbleheadbasin"
    → "Marblehead basin" when "marblehead" is one). A word or unit run into a number is parted
    from it ("rainfall2019" → "rainfall 2019", "1,204mm" → "1,204 mm"), and a word from the comma,
    colon or semicolon after the word before it ("Annex:a" → "Annex: a")."""
    return spacing_repair(text, names).text


def spacing_repair(text: str, names: Set[str] = frozenset()) -> Spacing:
    """``repair_spacing`` of ``text``, with the unsplit forms of the runs it split (each run whole
    and each two or three neighbouring parts joined, first seen first): what a full-text index
    should still find the line by when a name the dictionary lacks was split into words."""
    text = PUNCT_THEN_WORD.sub(" ", text)
    if not (LETTERS.search(text) or WORD_THEN_NUMBER.search(text) or NUMBER_THEN_WORD.search(text)):
        return Spacing(text)
    speller = spelling_dictionary()
    unsplit: dict[str, None] = {}

    def split(match: re.Match) -> str:
        parts = _split_run(match.group(0), speller, names)
        if len(parts) > 1:
            unsplit[match.group(0)] = None
            for size in (2, 3):  # a name of two or three dictionary words: "Marble head", "Ken sing ton"
                unsplit.update(dict.fromkeys("".join(parts[i:i + size]) for i in range(len(parts) - size + 1)))
        return " ".join(parts)

    repaired = LETTERS.sub(split, text)
    if repaired != text:
        repaired = MIDDLE_LETTERS.sub(split, repaired)
    words = speller.words
    repaired = WORD_THEN_NUMBER.sub(lambda m: m.group(1) + " " if m.group(1).lower() in words else m.group(1),
                                    repaired)
    repaired = NUMBER_THEN_WORD.sub(
        lambda m: " " + m.group(1) if m.group(1).lower() in UNITS or (len(m.group(1)) > 2 and m.group(1).lower()
                                                                      in words) else m.group(1), repaired)
    return Spacing(repaired, tuple(unsplit))
