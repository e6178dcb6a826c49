"""The run is a list of steps (``laminae.tasks.run.RUN``) over one record: each declares the record
fields it reads and writes, and a step of our own is one module, one list entry and one settings
section."""

from __future__ import annotations

from laminae.tasks.crawl.seeds import Seed
from laminae.tasks.publish import summarize_run
from laminae.tasks.run import RUN, run_build
from laminae.tasks.run_record import Run
from laminae.tasks.storage.index_store import IndexStore
from tests.conftest import page
from tests.support.census_step import CENSUS, CensusSettings
from tests.support.declared_fields import check_declared, touched

# written through the rows they hold or the store they stand for, which the code cannot show
IN_PLACE = {"store", "gone_errors"}


def _helper(fn, name: str):
    helper = fn.__globals__[name]
    assert helper.__module__.startswith("laminae.tasks"), f"{name} is handed the run"
    return helper


def _touched(fn) -> tuple[set[str], set[str]]:
    """The ``Run`` fields ``fn`` (and the functions of ``laminae.tasks`` it hands the record to) uses,
    and those among them it assigns, extends or sets an item of."""
    return touched(fn, _helper)


def test_each_step_declares_the_run_fields_its_code_reads_and_writes():
    fields = check_declared((*RUN, CENSUS), Run, IN_PLACE, _touched)
    assert all(step.when is None or step.when in fields for step in (*RUN, CENSUS))


def test_the_checker_sees_assignments_items_extensions_and_helpers():
    def step(run) -> None:
        run.pages = []
        run.seconds["x"] += 1
        run.errors.extend([])
        summarize_run(run)

    used, written = _touched(step)
    assert written == {"pages", "seconds", "errors"}
    assert {"totals", "changes", "t0", "fetched"} <= used


def test_the_steps_keep_their_prefect_task_names():
    assert [s.name for s in RUN] == ["prepare", "crawl", "plan", "batches", "superseded", "embedding-cache", "links",
                                     "compaction", "text-indexes", "publish", "report"]
    assert {s.name: s.task for s in RUN if s.task} == {
        "prepare": "prepare-index", "crawl": "crawl-pages", "embedding-cache": "prune-embedding-cache",
        "links": "resolve-links", "compaction": "compact-tables", "text-indexes": "build-search-indexes",
        "report": "publish-run-report"}


def test_adding_a_step_is_one_module_one_entry_and_one_settings_section(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "rye.html").write_bytes(page("Rye", "<p>Rye bread is dense. It keeps for days.</p>"))
    (site / "oat.html").write_bytes(page("Oat", "<p>Oat bread is soft. See <a href='rye.html'>rye</a>.</p>"))
    index = str(tmp_path / "index")
    settings = CensusSettings(detect={"enabled": False}, census={"reason": "counted"},
                              embed={"backend": "sentence-transformers", "device": "cpu", "threads": 1})
    calls: list[str] = []

    def call(name, fn, *args):  # as flows/ runs a named step (a Prefect task), recorded
        calls.append(name)
        return fn(*args)

    steps = (*RUN[:4], CENSUS, *RUN[4:])  # after the batches
    run = Run([Seed(site.as_uri() + "/")], index, settings, "build", "run-1", call=call)
    summary = run_build(run, steps)

    assert summary["status"] == "success" and summary["documents_indexed"] == 2
    assert summary["warnings_by_stage"] == {"census:counted": 1} and "census" in summary["seconds_by_stage"]
    assert calls == ["prepare-index", "crawl-pages", "write-batch", "take-census", "prune-embedding-cache",
                     "resolve-links", "compact-tables", "build-search-indexes", "write-reader-snapshot",
                     "clean-up-versions", "publish-run-report"]
    store = IndexStore(index)
    (row,) = store.table("errors").search().where("stage = 'census'").to_arrow().to_pylist()
    assert row["message"] == "2 documents" and row["run_id"] == "run-1"
    assert store.latest_manifest_version() == 1
