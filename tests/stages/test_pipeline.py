"""The batch pipeline is a list of stages: run in order, timed by name, the run-ahead prefix
decided by which stages read the index."""

from __future__ import annotations

from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.fetch import FetchResult
from laminae.tasks.pipeline import STAGES, Stage, ahead_stages, parse_batch, process_batch
from laminae.tasks.storage.index_store import IndexStore
from laminae.tasks.storage.rawstore import RawStore
from tests.conftest import page


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

    stages = (STAGES[0], Stage("census", census, reads=("components.kind",), writes=("components.ordinal_tag",)),
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
    reader = Stage("peek", census, reads=("embeddings",), writes=(), reads_index=True)
    assert ahead_stages((STAGES[0], reader, *STAGES[1:])) == 1 and ahead_stages(STAGES) == 2
