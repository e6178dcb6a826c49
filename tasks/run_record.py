"""The run as data: one build or refresh's record (``Run``), what a step of it returns (``Output``),
a step (``Step``: its entry point and the record fields it reads and writes) and the runner
(``run_steps``) that calls, times and applies each. The steps and their order, ``RUN``, are in
``laminae.tasks.run``.

Reads nothing itself; ``apply`` writes a step's ``Output`` to the index (rows appended, rows
upserted by id, documents deleted) and adds its errors to the record. Prefect-free: a step that
should show as its own task elsewhere is run through ``Run.call`` (here a plain call; in
``laminae.flows.build`` a Prefect task of the step's name), and the batches go through
``Run.schedule`` (here one after another in this process; in ``laminae.flows.runners`` with the
next parsed on a thread, or on a Dask/Ray cluster).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from laminae.tasks.batches import ProcessedBatch
from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.crawl.seeds import Seed
from laminae.tasks.pipeline import process_batch, timed
from laminae.tasks.refresh import RefreshPlan
from laminae.tasks.storage.index_store import IndexStore
from laminae.tasks.storage.lease import WriterLease


def plain_call(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``Run.call`` outside Prefect: the step ``name`` is just called."""
    return fn(*args)


def in_process(run: Run, batches: list[list[FetchResult]], seed_hosts: set[str]) -> Iterator[ProcessedBatch]:
    """``Run.schedule`` outside Prefect: every stage of each batch, in order, in this process."""
    for batch in batches:
        yield process_batch(batch, run.index, run.cfg, run.run_id, seed_hosts)


Schedule = Callable[["Run", list[list[FetchResult]], set[str]], Iterable[ProcessedBatch]]


@dataclass
class Run:
    """One build or refresh: what it was asked (the fields up to ``schedule``), then what its steps
    found, in the order of ``RUN``. Each step's ``reads`` and ``writes`` name these fields."""

    seeds: list[Seed]
    index: str
    cfg: BuildSettings
    flow_name: str  # "build" or "refresh"
    run_id: str
    lease: WriterLease | None = None  # checked before publishing; None where no lease is held (tests)
    reembed: bool = False
    allow_mass_delete: bool = False
    call: Callable[..., Any] = plain_call  # how a named step runs (a Prefect task under flows/)
    schedule: Schedule = in_process  # how the batches run (a task runner under flows/)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    t0: float = field(default_factory=time.perf_counter)
    seconds: Counter[str] = field(default_factory=Counter)  # the summary's seconds_by_stage
    rebuild_nodes: bool = False
    embedder: dict = field(default_factory=dict)
    previous: dict[str, dict] | None = None  # the last run's fetches, on a refresh
    results: list[FetchResult] = field(default_factory=list)
    fetched: list[FetchResult] = field(default_factory=list)
    failed_fetches: list[FetchResult] = field(default_factory=list)
    pages: list[FetchResult] = field(default_factory=list)  # to parse
    by_url: dict[str, str] = field(default_factory=dict)  # the documents before a refresh
    plan: RefreshPlan | None = None  # on a refresh: what goes (deleted at the end, all at once)
    gone_errors: list[dict] = field(default_factory=list)  # their rows say whether the page's document went
    errors: list[dict] = field(default_factory=list)  # every error row of the run so far
    changes: Counter[str] = field(default_factory=Counter)
    totals: Counter[str] = field(default_factory=Counter)  # indexed, embedded, reused
    resolved: dict[str, str] = field(default_factory=dict)  # page URL → its document id now
    pruned: int = 0
    links: dict = field(default_factory=dict)
    changed: bool = True  # whether the tables changed (a refresh may change nothing)
    summary: dict = field(default_factory=dict)

    @property
    def refresh(self) -> bool:
        return self.flow_name == "refresh"

    @cached_property
    def store(self) -> IndexStore:
        return IndexStore(self.index)


@dataclass(frozen=True)
class Output:
    """What a step leaves for the runner to write: ``rows`` appended to their tables (``errors``
    rows also join the run's), ``upserts`` written by id (fetch rows), ``deleted`` documents
    removed with their nodes and edges (counted as the run's ``removed``)."""

    rows: Mapping[str, Sequence[dict]] = field(default_factory=dict)
    upserts: Mapping[str, Sequence[dict]] = field(default_factory=dict)
    deleted: Sequence[str] = ()


def apply(run: Run, output: Output | None) -> None:
    """Write ``output`` to the run's index (upserts, then appends, then deletions) and record it."""
    if output is None:
        return
    for table, rows in output.upserts.items():
        run.store.upsert(table, list(rows))
    for table, rows in output.rows.items():
        run.store.append(table, list(rows))
        if table == "errors":
            run.errors.extend(rows)
    run.store.delete_documents(list(output.deleted))
    run.changes["removed"] += len(output.deleted)


@dataclass(frozen=True)
class Step:
    """One step of a run: its entry point and the ``Run`` fields it reads and writes, which
    ``tests/stages/test_run.py`` checks against its code. ``task``: the name it runs under through
    ``Run.call`` (a Prefect task's name), None where it runs in the flow itself (it calls tasks of
    its own). ``seconds``: where its time is reported in ``seconds_by_stage``, if anywhere.
    ``when``: the ``Run`` field that must be true for it to run (``refresh``, ``changed``)."""

    name: str
    run: Callable[[Run], Output | None]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    task: str | None = None
    seconds: str | None = None
    when: str | None = None


def run_steps(run: Run, steps: Sequence[Step]) -> Run:
    """Run ``steps`` in order on ``run``: each (when its ``when`` holds) called, timed and its
    output applied."""
    for step in steps:
        if step.when is not None and not getattr(run, step.when):
            continue
        with timed(run.seconds, step.seconds) if step.seconds else nullcontext():
            output = run.call(step.task, step.run, run) if step.task else step.run(run)
            apply(run, output)
    return run
