"""Progress bars for the long stages of a run (fetch, parse, embed, write) on standard error.

Reads ``LAMINAE_PROGRESS`` (``auto``: bars only when standard error is a terminal; ``on``;
``off``); writes nothing but the bars. Stages deep in the pipeline report through
``progress.advance(stage, n)`` on the run's reporter, so no stage needs a handle passed in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

STAGES = {"fetch": "pages", "parse": "documents", "embed": "items", "write": "documents"}
MODES = ("auto", "on", "off")


def enabled(mode: str | None = None) -> bool:
    """Whether bars are drawn for this mode (default: ``LAMINAE_PROGRESS``, else auto)."""
    mode = (mode or os.environ.get("LAMINAE_PROGRESS") or "auto").lower()
    if mode not in MODES:
        raise ValueError(f"LAMINAE_PROGRESS={mode!r}: use one of {', '.join(MODES)}")
    return mode == "on" or (mode == "auto" and sys.stderr.isatty())


class Progress:
    """One bar per stage, created on first use; totals may grow as work is discovered."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.bars: dict = {}
        self.counts: dict[str, int] = {}

    def _bar(self, stage: str):
        if stage not in self.bars:
            from tqdm import tqdm

            self.bars[stage] = tqdm(total=0, desc=f"{stage:<6}", unit=f" {STAGES.get(stage, 'items')}",
                                    position=list(STAGES).index(stage) if stage in STAGES else len(self.bars), leave=True, dynamic_ncols=True, file=sys.stderr)
        return self.bars[stage]

    def expect(self, stage: str, n: int) -> None:
        """Add ``n`` to the work a stage is known to have."""
        if self.on and n:
            bar = self._bar(stage)
            bar.total += n
            bar.refresh()

    def advance(self, stage: str, n: int = 1) -> None:
        self.counts[stage] = self.counts.get(stage, 0) + n
        if self.on and n:
            self._bar(stage).update(n)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


_current = Progress(False)


def current() -> Progress:
    """The reporter of the run in progress (a silent one outside a run)."""
    return _current


@contextmanager
def reporting(mode: str | None = None) -> Iterator[Progress]:
    """Make a fresh reporter current for the duration of one run."""
    global _current
    before, _current = _current, Progress(enabled(mode))
    try:
        yield _current
    finally:
        _current.close()
        _current = before
