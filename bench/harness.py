"""The benchmarks' common parts: the options they share, a timer of named durations, the table they print.

Reads nothing; ``table`` returns text that the scripts print. A bench script builds its command
line with ``arguments`` (the shared options it asks for, then its own), times its runs with
``Timer`` and prints its results with ``table``: markdown rows, numbers right-aligned, and a ratio
column against a reference row where the script compares with one.

Run as a file (``.venv/bin/python bench/x.py``), Python puts only ``bench/`` on ``sys.path``, so a
script that imports ``bench`` or ``tests.support`` first adds the repository, and only then:

    if not __package__:  # run as a file: the repository's bench and tests packages
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

# the shared options: (type, help) of each; the default is the script's own
SHARED = {
    "repeats": (int, "runs of each measurement; the best counts"),
    "threads": (int, "CPU threads for the model (0: all the cores this process may run on)"),
    "device": (str, "cpu or cuda"),
    "seed": (int, "seed of the generated data"),
    "limit": (int, "use only the first N items (0: all)"),
}


def arguments(doc: str, **defaults: int | str) -> argparse.ArgumentParser:
    """A parser described by the first line of ``doc`` with the shared options named in
    ``defaults`` (``repeats=3`` adds ``--repeats``, default 3); the script adds its own."""
    unknown = set(defaults) - set(SHARED)
    if unknown:
        raise ValueError(f"unknown shared options {sorted(unknown)}: the harness has {sorted(SHARED)}")
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    for name, default in defaults.items():
        kind, text = SHARED[name]
        parser.add_argument(f"--{name}", type=kind, default=default, help=f"{text} (default: {default})")
    return parser


@dataclass
class Lap:
    """One timed run: its seconds are set when its ``with`` block ends."""

    name: str
    seconds: float = 0.0


class Timer:
    """Named durations: every ``with timer("parse"):`` adds one run to ``runs["parse"]``.

    A block that raises records nothing (a failed run is no measurement).
    """

    def __init__(self) -> None:
        self.runs: dict[str, list[float]] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[Lap]:
        lap = Lap(name)
        start = time.perf_counter()
        yield lap
        lap.seconds = time.perf_counter() - start
        self.runs.setdefault(name, []).append(lap.seconds)

    def best(self, name: str) -> float:
        return min(self.runs[name])

    def last(self, name: str) -> float:
        return self.runs[name][-1]

    def total(self, name: str) -> float:
        return sum(self.runs[name])

    def seconds(self) -> dict[str, float]:
        """Each name's last run, in the order the names were first timed."""
        return {name: runs[-1] for name, runs in self.runs.items()}


def table(header: Sequence[str], rows: Sequence[Sequence[object]], *, formats: Mapping[str, str] | None = None,
          ratio_of: str | None = None, reference: int = 0, ratio_title: str = "ratio",
          ratio_format: str = ".3f") -> str:
    """Markdown rows under ``header``, padded to line up; numbers right-aligned.

    ``formats`` maps a column's title to a format spec (floats default to ``.2f``). With
    ``ratio_of``, a column right after that one gives each row's value there over the
    ``reference`` row's ("-" where either is missing or the reference is 0).
    """
    formats = dict(formats or {})
    header = list(header)
    body = [list(row) for row in rows]
    if any(len(row) != len(header) for row in body):
        raise ValueError(f"every row needs {len(header)} cells ({', '.join(header)})")
    if ratio_of is not None:
        column = header.index(ratio_of)
        base = body[reference][column]
        for row in body:
            row.insert(column + 1, row[column] / base if base and row[column] is not None else None)
        header.insert(column + 1, ratio_title)
        formats[ratio_title] = ratio_format
    numeric = [all(isinstance(row[i], int | float) or row[i] is None for row in body) and bool(body)
               for i in range(len(header))]
    cells = [[_cell(value, formats.get(title)) for title, value in zip(header, row, strict=True)] for row in body]
    widths = [max(3, len(title), *(len(row[i]) for row in cells)) for i, title in enumerate(header)]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.rjust(w) if num else v.ljust(w)
                                 for v, w, num in zip(values, widths, numeric, strict=True)) + " |"

    rule = "| " + " | ".join("-" * (w - 1) + ":" if num else "-" * w
                             for w, num in zip(widths, numeric, strict=True)) + " |"
    return "\n".join([line(header), rule, *(line(row) for row in cells)])


def _cell(value: object, spec: str | None) -> str:
    if value is None:
        return "-"
    if spec is not None:
        return format(value, spec)
    if isinstance(value, float):
        return format(value, ".2f")
    return str(value)

