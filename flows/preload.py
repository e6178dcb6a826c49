"""What a new index's build starts before its flow runs, here the parse worker processes: light to
import, so the CLI calls it before it imports the flows (about 1.5 s of one core, while the other
would idle).

Reads the index's ``index.json`` (a new index has none) and the build settings; writes nothing.
The models are loaded by ``laminae.flows.build.preload_models``, once the flows are imported.
"""

from __future__ import annotations

from laminae.schemas.storage import IndexFiles
from laminae.tasks.config import BuildSettings
from laminae.tasks.parse.isolated import start_workers, worker_pool
from laminae.tasks.storage.index_store import META_FILE

PARSE_MODULES = ("laminae.tasks.nodes.pages",)  # what a parse worker imports to parse a page


def preloads(index: str, settings: BuildSettings) -> bool:
    """Whether a build starts its workers and loads its models before the flow: only for a new
    index (a run on an existing one may need no model at all) built on this machine (a cluster's
    batches load them on its workers)."""
    return settings.runner.kind == "local" and IndexFiles(index).read_text(META_FILE) is None


def start_parse_workers(index: str, settings: BuildSettings) -> None:
    """Start the parse worker processes of a new index's build (each importing the parser, about
    3 s) on a thread of their own; the first batch's parse waits for them."""
    if preloads(index, settings) and settings.runner.parse_workers:
        start_workers(worker_pool(settings.runner.parse_workers), PARSE_MODULES)
