"""The text of one line of a PDF page, from pymupdf's spans: spaces kept, word gaps inferred,
ligatures expanded, symbol glyphs set aside and characters without a Unicode map recognised.

Reads the spans of pymupdf's ``dict`` text; returns a ``Line``. Writes nothing. TeX stores many
spaces as spans of their own (kept as one space); where a PDF has no space character between two
spans, a gap wider than ``WORD_GAP`` of the type size is a word break. Ligature glyphs (ﬁ ﬂ ﬀ ﬃ ﬄ
ﬅ ﬆ) and Arabic presentation forms become the letters they stand for (NFKC on those code points
only), so that "conﬁguration" is searched and embedded as "configuration"; so do the control
codes that TeX's OT1 encoding uses for ligatures (a font without a Unicode map: "\\x0c" is "fi"). Spans in a dingbat
font (ZapfDingbats, Wingdings, Webdings) and private-use code points are check boxes, bullets
and arrows: dropped from the text, and the line is marked so that it never becomes a heading. A
span whose characters are implausible as text (control characters, U+FFFD, private-use code points,
a high share of rare Latin-1 symbols: what a font without a Unicode map yields) marks its line
``garbled``; the caller reads such lines by OCR or drops them with a warning.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

WORD_GAP = 0.15  # a gap between spans wider than this share of the type size separates words
DINGBAT_FONT = re.compile(r"dingbat|wingding|webding|zapf|marlett|fontawesome|symbolps", re.IGNORECASE)
WEIGHT = (  # font-name parts and the weight they mean: 2 bold, 1 medium
    (re.compile(r"semibold|demibold|demi|medium|[-,]sb$|[-,]md$", re.IGNORECASE), 1),
    (re.compile(r"bold|black|heavy", re.IGNORECASE), 2),
)
ITALIC_FONT = re.compile(r"italic|oblique|[-,]it$", re.IGNORECASE)
EXPAND = re.compile("[\ufb00-\ufb06\ufb50-\ufdff\ufe70-\ufefe]")  # Latin ligatures, Arabic presentation forms
PRIVATE = re.compile("[\ue000-\uf8ff]")
BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd\ue000-\uf8ff]")
RARE_LATIN1 = re.compile("[\u00a1-\u00bf\u00c0-\u00ff]")
OT1 = str.maketrans({"\x0b": "ff", "\x0c": "fi", "\x0d": "fl", "\x0e": "ffi", "\x0f": "ffl"})


@dataclass
class Line:
    """One line's text and style."""

    text: str
    bbox: tuple[float, float, float, float]
    size: float
    weight: int = 0  # 0 regular, 1 medium / semibold, 2 bold
    italic: bool = False
    symbols: bool = False  # it held dingbats or private-use glyphs (check boxes, bullets)
    garbled: bool = False  # its characters have no plausible Unicode map
    font: str = ""


def expand(text: str) -> str:
    """Ligatures and presentation forms as the letters they stand for."""
    return EXPAND.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)


def ot1(text: str) -> str:
    """TeX's OT1 ligature codes (a Type 1 font without a Unicode map) as the letters they stand for."""
    return text.translate(OT1) if min(text, default=" ") < " " else text


def garbled(text: str) -> bool:
    """Whether characters look like a font's glyph ids rather than text (no Unicode map)."""
    if text.isascii() and text.isprintable():
        return False  # most text: nothing to count
    chars = len(text) - text.count(" ")
    if chars < 4:
        return False
    bad = len(BAD.findall(text))
    if bad >= max(2, 0.05 * chars):
        return True
    rare = len(RARE_LATIN1.findall(text))  # "]üìÆüéê •ìê": French or German text has up to a third
    return chars >= 8 and rare >= 0.45 * chars


@lru_cache(maxsize=1024)
def font_style(font: str) -> tuple[bool, int, bool]:
    """(a dingbat font, the weight its name says, italic by its name) of a font name."""
    name = font.split("+", 1)[-1]
    weight = next((w for pattern, w in WEIGHT if pattern.search(name)), 0)
    return bool(DINGBAT_FONT.search(name)), weight, bool(ITALIC_FONT.search(name))


def weight_of(span: dict) -> int:
    return 2 if span["flags"] & 16 else font_style(span["font"])[1]


def _gap(previous: dict, span: dict) -> float:
    a, b = previous["bbox"], span["bbox"]
    return max(b[0] - a[2], a[0] - b[2])  # right-to-left lines run the other way


def read_line(line: dict) -> Line | None:
    """The line's text, None when it has none (only spaces or only symbols are kept as symbols)."""
    parts: list[str] = []
    sizes: list[tuple[float, int]] = []
    weights, italics = [], []
    symbols = bad = False
    previous = None
    font = ""
    for span in line["spans"]:
        text = ot1(span["text"])
        if not text:
            continue
        if text.isspace():
            if parts and not parts[-1].endswith(" "):
                parts.append(" ")
            previous = span
            continue
        dingbat, _, italic_name = font_style(span["font"])
        if dingbat:
            symbols = True
            parts.append(" ")
            previous = span
            continue
        if previous is not None and parts and not parts[-1].endswith(" ") and not text[0].isspace() \
                and _gap(previous, span) > WORD_GAP * span["size"]:
            parts.append(" ")
        if not text.isascii():
            if garbled(PRIVATE.sub("", text)):
                bad = True
            if PRIVATE.search(text):
                symbols = True
                text = PRIVATE.sub(" ", text)
        elif not text.isprintable():
            bad = bad or garbled(text)
        parts.append(text)
        letters = len(text.strip())
        sizes.append((span["size"], letters))
        weights.append((weight_of(span), letters))
        italics.append((bool(span["flags"] & 2) or italic_name, letters))
        font = font or span["font"]
        previous = span
    joined = "".join(parts)
    text = " ".join((joined if joined.isascii() else expand(joined)).split())
    if not sizes or not text:
        if symbols:
            return Line("", tuple(line["bbox"]), 0.0, symbols=True)
        return None
    letters = sum(n for _, n in sizes) or 1
    size = round(sum(s * n for s, n in sizes) / letters, 1)
    weight = min(w for w, n in weights if n) if any(n for _, n in weights) else 0
    italic = all(i for i, n in italics if n)
    return Line(text, tuple(line["bbox"]), size, weight, italic, symbols, bad, font)
