"""An index built before a table gained columns (the videos' times) gets them, all null, on its next
build or refresh; its rows stay as they were."""

from __future__ import annotations

import lancedb
import pyarrow as pa

from laminae.schemas.tables import table_schemas
from laminae.tasks.storage.index_store import IndexStore

EMBEDDER = {"model_id": "m", "dim": 4, "image_mode": "text"}
NEW = {"components": ("video_url", "video_key", "captions_url", "duration_s", "time_s", "time_start", "time_end"),
       "subcomponents": ("time_start", "time_end")}


def test_prepare_adds_the_missing_nullable_columns(tmp_path):
    store = IndexStore(str(tmp_path))
    store.prepare(EMBEDDER)
    db = lancedb.connect(str(tmp_path))
    for name, columns in NEW.items():  # as an index built before videos has them
        old = pa.schema([f for f in table_schemas(4)[name] if f.name not in columns])
        db.create_table(name, schema=old, mode="overwrite")
    row = {"id": "c1", "document_id": "d", "parent_id": "d", "kind": "paragraph", "ordinal": 0, "text": "Rye.",
           "vector": [0.5, 0.5, 0.5, 0.5]}
    db.open_table("components").add(pa.Table.from_pylist([row], schema=db.open_table("components").schema))
    assert IndexStore(str(tmp_path)).prepare(EMBEDDER) is False
    for name, columns in NEW.items():
        assert set(columns) <= set(db.open_table(name).schema.names)
    kept = db.open_table("components").to_arrow().to_pylist()
    assert [(r["id"], r["text"], r["time_s"], r["video_url"]) for r in kept] == [("c1", "Rye.", None, None)]
