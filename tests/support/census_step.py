"""A step of our own for ``tests/stages/test_run.py``: one module, its settings section and its
entry of ``RUN``. Reads the documents written by the batches; writes one ``errors`` row (a
warning) counting them, through the ``Output`` it returns."""

from __future__ import annotations

from pydantic import BaseModel, Field

from laminae.schemas.tables import error_row
from laminae.tasks.config import BuildSettings
from laminae.tasks.run_record import Output, Run, Step


class CensusConfig(BaseModel):
    """How the census reports."""

    reason: str = Field("census", description="The reason its row gives.")


class CensusSettings(BuildSettings):
    census: CensusConfig = Field(default_factory=CensusConfig)


def take_census(run: Run) -> Output:
    documents = run.store.table("documents").count_rows()
    row = error_row(run.run_id, run.index, "census", run.cfg.census.reason, f"{documents} documents",
                    severity="warning")
    return Output(rows={"errors": [row]})


CENSUS = Step("census", take_census, reads=("store", "run_id", "index", "cfg"), writes=(), task="take-census",
              seconds="census")
