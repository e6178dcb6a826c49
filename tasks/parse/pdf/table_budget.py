"""The time pymupdf's ``find_tables`` may take: ``pdf_table_timeout_s`` a page, ``pdf_tables_budget_s``
a document; a page over either keeps its text and loses only the tables ``find_tables`` would
have found, with a warning.

Reads a page and a clip for ``find_tables``; returns its tables and, at the end, the warnings.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager

from laminae.tasks.config import ParseConfig
from laminae.tasks.parse.isolated import in_worker
from laminae.tasks.parse.pdf.blocks import page_list


class _OverBudget(BaseException):  # not Exception: find_tables catches those and returns None
    """Raised by the alarm when find_tables runs past its time on a page."""


@contextmanager
def _alarm(seconds: float, rang: list[bool]):
    """Raise ``_OverBudget`` in the block after ``seconds``, and set ``rang[0]``: only in a worker
    process's main thread (the flow's own process keeps its signals; there the deadline is the
    document's budget alone). The flag outlives the exception, which a C function of pymupdf's
    that the alarm interrupts turns into a ``SystemError`` that ``find_tables`` catches and logs."""
    if not in_worker() or threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum, frame):
        rang[0] = True
        raise _OverBudget

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class TableBudget:
    """The seconds ``find_tables`` may take on a page and in the whole document, and the pages that
    lost their tables to them (their text is kept)."""

    def __init__(self, cfg: ParseConfig) -> None:
        self.page_s, self.left = cfg.pdf_table_timeout_s, cfg.pdf_tables_budget_s
        self.budget_s = cfg.pdf_tables_budget_s
        self.timed_out: list[int] = []
        self.skipped: list[int] = []

    def find(self, page, number: int, area: tuple, **settings) -> list:
        """``find_tables``' tables over ``area``, or none when the page's or the document's time runs out."""
        import pymupdf

        if self.left <= 0:
            self.skipped.append(number)
            return []
        limit = min(self.page_s, self.left)
        start = time.perf_counter()
        rang = [False]
        try:
            with _alarm(limit, rang):
                finder = page.find_tables(clip=pymupdf.Rect(area), use_layout=False, **settings)
        except BaseException:  # the alarm's _OverBudget, or the SystemError pymupdf made of it
            if not rang[0]:
                raise
        finally:
            self.left -= time.perf_counter() - start
        if rang[0]:
            (self.timed_out if limit == self.page_s else self.skipped).append(number)
            return []
        return finder.tables if finder is not None else []  # None: find_tables failed (and logged it)

    def warnings(self) -> list[str]:
        out = []
        if self.timed_out:
            out.append(f"tables_timeout: pages {page_list(self.timed_out)}: finding their tables took longer than "
                       f"{self.page_s:g} s a page (LAMINAE_PARSE__PDF_TABLE_TIMEOUT_S); their text is kept, the "
                       "tables pymupdf's find_tables would have read are not")
        if self.skipped:
            out.append(f"tables_skipped: pages {page_list(self.skipped)}: the PDF's table-finding budget of "
                       f"{self.budget_s:g} s (LAMINAE_PARSE__PDF_TABLES_BUDGET_S) was spent; their text is kept, "
                       "the tables pymupdf's find_tables would have read are not")
        return out
