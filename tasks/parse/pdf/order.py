"""Reading order of a PDF page's blocks: columns found wherever their gutter lies.

Reads ``Block``s of one page; returns them in reading order. Writes nothing. A gutter is a vertical
strip of white between the right edge of some blocks and the left edge of others, at any x (not
only the page centre: a handbook's left column may end at 53 % of the width), with blocks on both
sides that stand side by side, one of them a real paragraph (two lines or more), and text of
substance on both sides (bullets beside their items, a form's labels beside their values are not
columns). Candidate gutters are the local minima of the blocks' x-coverage, so a page of any number
of blocks costs a few passes. Blocks that cross the gutter (a title, a full-width
paragraph or figure) cut the page into bands; in each band the left side is read before the right
side, and each side is ordered the same way again (three columns, a column split further down).
Without a gutter blocks read top to bottom, then left to right.
"""

from __future__ import annotations

from laminae.tasks.parse.pdf.blocks import Block

MIN_GUTTER = 6.0  # points of white between two columns, at least
TOLERANCE = 2.0
MAX_DEPTH = 4


def _top_down(blocks: list[Block]) -> list[Block]:
    return sorted(blocks, key=lambda b: (round(b.bbox[1]), b.bbox[0]))


def _overlap(a: Block, b: Block) -> bool:
    return a.bbox[1] < b.bbox[3] - 1 and b.bbox[1] < a.bbox[3] - 1


def _tall(b: Block) -> bool:
    return len(b.lines) >= 2 or (b.kind != "text" and b.bbox[3] - b.bbox[1] > 30)


def _side_by_side(left: list[Block], right: list[Block]) -> bool:
    """Whether a block on the left and one on the right share a height, one of them a paragraph."""
    events = sorted([(b.bbox[1], 0, b) for b in left] + [(b.bbox[1], 1, b) for b in right],
                    key=lambda e: (e[0], e[1]))
    open_: tuple[list[Block], list[Block]] = ([], [])
    for y, side, b in events:
        for s in (0, 1):
            open_[s][:] = [o for o in open_[s] if o.bbox[3] - 1 > y]
        if any(_overlap(b, o) and (_tall(b) or _tall(o)) for o in open_[1 - side]):
            return True
        open_[side].append(b)
    return False


def _gaps(blocks: list[Block]) -> list[tuple[float, float]]:
    """The candidate gutters: strips at least ``MIN_GUTTER`` wide that fewer blocks cover than the
    strips on either side of them (a local minimum of the blocks' x-coverage: the blocks that cross a
    gutter, a title say, still cover it, the columns beside it do not)."""
    events: dict[float, int] = {}
    for b in blocks:
        events[b.bbox[0]] = events.get(b.bbox[0], 0) + 1
        events[b.bbox[2]] = events.get(b.bbox[2], 0) - 1
    runs: list[list[float]] = []  # [start, end, coverage], neighbours of equal coverage merged
    cover = 0
    xs = sorted(events)
    for x, nxt in zip(xs, xs[1:], strict=False):
        cover += events[x]
        if runs and runs[-1][2] == cover:
            runs[-1][1] = nxt
        else:
            runs.append([x, nxt, cover])
    return [(r[0], r[1]) for i, r in enumerate(runs[1:-1], start=1)
            if r[1] - r[0] >= MIN_GUTTER and r[2] < runs[i - 1][2] and r[2] < runs[i + 1][2]]


def _substance(side: list[Block]) -> bool:
    return any(_tall(b) or len(b.text) >= 40 for b in side)


def _split(blocks: list[Block]) -> tuple[list[Block], list[Block], list[Block]] | None:
    """(left, right, crossing) at the best gutter, None where there is none."""
    best, best_score = None, 0.0
    for lo, hi in _gaps(blocks):
        left = [b for b in blocks if b.bbox[2] <= lo + TOLERANCE]
        right = [b for b in blocks if b.bbox[0] >= hi - TOLERANCE and b.bbox[2] > lo + TOLERANCE]
        if not _substance(left) or not _substance(right):
            continue  # bullets beside their items, labels beside values: not columns
        sided = {id(b) for b in left} | {id(b) for b in right}
        crossing = [b for b in blocks if id(b) not in sided]
        blocked = sum(1 for c in crossing if any(_overlap(c, b) for b in left + right))
        score = len(left) + len(right) - 3 * blocked + (hi - lo) / 100
        if score > best_score and _side_by_side(left, right):
            best, best_score = (left, right, crossing), score
    return best


def _below_columns(left: list[Block], right: list[Block],
                   crossing: list[Block]) -> tuple[list[Block], list[Block], list[Block]]:
    """A block on one side that spans several of its columns and starts below everything on the
    other side (a paragraph under the first two of three columns) cuts the page like a block that
    crosses the gutter: it is read after both sides, not between them."""
    moved: set[int] = set()
    for side, other in ((left, right), (right, left)):
        widths = sorted(b.bbox[2] - b.bbox[0] for b in side if _tall(b))
        if not widths or not other:
            continue
        column, bottom = widths[len(widths) // 2], max(b.bbox[3] for b in other)
        moved |= {id(b) for b in side if b.bbox[2] - b.bbox[0] > 1.5 * column and b.bbox[1] >= bottom - 1}
    if not moved:
        return left, right, crossing
    wide = [b for b in left + right if id(b) in moved]
    return [b for b in left if id(b) not in moved], [b for b in right if id(b) not in moved], crossing + wide


def reading_order(blocks: list[Block], depth: int = 0) -> list[Block]:
    """Blocks in reading order: columns left to right within bands cut by blocks that span them."""
    if len(blocks) < 2 or depth >= MAX_DEPTH:
        return _top_down(blocks)
    split = _split(blocks)
    if split is None:
        return _top_down(blocks)
    left, right, crossing = _below_columns(*split)
    out: list[Block] = []
    top = float("-inf")
    for cut in [*sorted(crossing, key=lambda b: b.bbox[1]), None]:
        bottom = cut.bbox[1] if cut else float("inf")
        for side in (left, right):
            out.extend(reading_order([b for b in side if top <= b.bbox[1] < bottom], depth + 1))
        if cut:
            out.append(cut)
            top = cut.bbox[1]
    return out
