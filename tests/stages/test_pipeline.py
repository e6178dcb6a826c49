"""The batch pipeline is a list of stages: run in order, timed by name, the run-ahead prefix
decided by which stages read the index."""

from __future__ import annotations

import inspect

from laminae.tasks import pipeline
from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.pipeline import (
    STAGES,
    BatchWork,
    Stage,
    StageOutput,
    ahead_stages,
    parse_batch,
    process_batch,
)
from laminae.tasks.storage.index_store import IndexStore
from laminae.tasks.storage.rawstore import RawStore
from tests.conftest import page
from tests.support.declared_fields import check_declared, touched


def test_adding_a_stage_is_one_list_entry(tmp_path):
    from laminae.tasks.embed.embedders import load_embedder

    index = str(tmp_path / "index")
    settings = BuildSettings(detect={"enabled": False},
                             embed={"backend": "sentence-transformers", "device": "cpu", "threads": 1})
    IndexStore(index).prepare(load_embedder(settings.embed).info.as_metadata())
    key = RawStore(index).put(page("Rye", "<p>Rye bread is dense. It keeps for days.</p>"
                                          "<table><tr><th>Loaf</th><th>Grams</th></tr><tr><td>Rye</td><td>800</td></tr></table>"))
    fetched = FetchResult(url="http://t.test/rye", final_url="http://t.test/rye", raw_key=key, content_type="text/html")
    kinds_seen: list[list[str]] = []

    def census(work) -> None:  # a stage of our own, after parse: sees parsed components, marks them
        kinds_seen.append(sorted(c["kind"] for c in work.components))
        for c in work.components:
            c["ordinal_tag"] = f"{c['kind']}-{c['ordinal']}"
        return StageOutput()  # nothing new: the rows it marked are the batch's already

    stages = (STAGES[0], Stage("census", census, reads=("components",), writes=("components",)),
              *STAGES[1:])
    assert ahead_stages(stages) == 3  # parse, census, images read no index table
    parsed = parse_batch([fetched], index, settings, "run", {"t.test"}, stages)
    assert parsed.stages_run == ["parse", "census", "images"] and kinds_seen == [["paragraph", "table"]]
    processed = process_batch([fetched], index, settings, "run", {"t.test"}, parsed, stages)
    assert parsed.stages_run == ["parse", "census", "images", "video", "detect", "ocr", "embed", "summarize", "embed"]
    assert set(processed.seconds) == {"parse", "census", "images", "video", "detect", "ocr", "embed", "summarize"}
    (doc,) = processed.docs
    assert all(c["ordinal_tag"] == f"{c['kind']}-{c['ordinal']}" for c in doc.components)
    nodes = [doc.document, *doc.components, *doc.subcomponents]
    assert all(n["vector"].shape == (384,) for n in nodes) and doc.document["summary"]
    assert processed.embedded == len(processed.new_vectors) > 0 and processed.reused == len(nodes) - processed.embedded
    # a stage that reads the index ends the prefix that may run ahead
    reader = Stage("peek", census, reads=("store", "components"), writes=())
    assert ahead_stages((STAGES[0], reader, *STAGES[1:])) == 1 and ahead_stages(STAGES) == 2


# the BatchWork fields ``absorb`` adds each field of a stage's output to
ABSORBED = {"docs": {"docs"}, "rows": {"docs"}, "edges": {"docs"}, "errors": {"errors"},
            "fetches": {"image_fetches"}, "vectors": {"new_vectors"}, "known": {"known"},
            "embedded": {"rows_embedded"}}
# written through the rows they hold or the stores they stand for, which the code cannot show
IN_PLACE = {"docs", "components", "subcomponents", "raw", "store"}


def _helper(fn, name: str):
    helper = getattr(pipeline, name)
    assert inspect.getmodule(helper) is pipeline, f"{name} is handed the batch"
    return helper


def _touched(fn) -> tuple[set[str], set[str]]:
    """The ``BatchWork`` fields ``fn`` and the pipeline helpers it hands the batch to use, and those
    among them it assigns, extends or returns in a ``StageOutput`` (see ``ABSORBED``)."""
    return touched(fn, _helper, ("StageOutput", ABSORBED))


def test_each_stage_declares_the_batch_fields_its_code_reads_and_writes():
    check_declared(STAGES, BatchWork, IN_PLACE, _touched)


def test_the_checker_sees_assignments_extensions_outputs_and_helpers():
    _embedder, StageOutput = pipeline._embedder, pipeline.StageOutput  # as the adapters call them

    def stage(work):
        work.errors.extend([])
        work.rows_embedded += 1
        _embedder(work)
        return StageOutput(rows=[], fetches=[])

    assert _touched(stage) == ({"errors", "rows_embedded", "embedder", "settings", "store", "docs", "image_fetches"},
                               {"errors", "rows_embedded", "embedder", "docs", "image_fetches"})
