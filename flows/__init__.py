"""Prefect flows of the index builder, and the ``laminae`` command line.

Importing this package sets quiet, offline Prefect defaults (each only if not already set):
a ``PREFECT_HOME`` inside laminae's cache, no telemetry, a generous ephemeral-server start-up
timeout, and laminae's loggers forwarded into Prefect's run logs (printed only, outside a run).
"""

import os
from pathlib import Path

from laminae.tasks.config import cache_dir

for _key, _value in {
    "PREFECT_HOME": str(cache_dir() / "prefect"),
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_EXTRA_LOGGERS": "laminae",
    # laminae's loggers also speak outside a flow run (the models preloaded while Prefect starts):
    # printed, not sent to the API, and no warning that they could not be
    "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_key, _value)
# Prefect's ephemeral server cannot create its SQLite file in a folder that does not exist.
Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
