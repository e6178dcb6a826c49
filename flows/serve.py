"""Scheduled refreshes: ``laminae serve --index DIR --cron EXPR`` runs ``refresh_index`` on a schedule.

At most one refresh of the deployment runs at a time (its concurrency limit, and ``serve``'s
``limit``); a scheduled run that finds another writer of the index (``laminae refresh`` by hand)
waits up to ``SCHEDULED_WAIT_S`` for its writer lease.

Reads the index directory (which remembers its seeds and settings); writes through the refresh
flow. Uses Prefect's ``serve`` on this machine (schedules need a running Prefect API: the
ephemeral one ``serve`` starts, or ``PREFECT_API_URL``). For a Prefect server with work pools, see
``infra/prefect.yaml``.
"""

from __future__ import annotations

from pathlib import Path

from laminae.schemas.errors import LaminaeError

DEFAULT_CRON = "0 3 * * *"
# a scheduled refresh that finds another writer (say a refresh run by hand) waits this long for it
SCHEDULED_WAIT_S = 6 * 3600.0


class ScheduleError(LaminaeError, ValueError):
    """The schedule cannot be used; the message says how to write it."""

    exit_code = 2


def refresh_deployment(index: str, cron: str = DEFAULT_CRON, name: str | None = None):
    """A Prefect deployment of ``refresh_index`` for ``index`` on the ``cron`` schedule (UTC)."""
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    from laminae.flows.build import refresh_index
    from laminae.schemas.storage import is_remote
    from laminae.tasks.storage.index_store import IndexStore

    try:
        CronSchedule(cron=cron)
    except ValidationError:
        raise ScheduleError(f"invalid cron expression {cron!r}; write five fields, e.g. {DEFAULT_CRON!r}") from None
    root = index.rstrip("/") if is_remote(index) else str(Path(index).resolve())
    if "seeds" not in (IndexStore(root).metadata() or {}):
        raise ScheduleError(f"{root} is not a built laminae index: run `laminae build --seeds FILE --index {index}` first")
    return refresh_index.to_deployment(
        name=name or f"refresh-{root.rsplit('/', 1)[-1]}", cron=cron,
        parameters={"index": root, "wait_for_lease": SCHEDULED_WAIT_S},
        description=f"Refresh the laminae index at {root}",
        concurrency_limit=1,  # a run that comes due while one is running waits in Prefect's queue
    )


def serve(index: str, cron: str = DEFAULT_CRON, name: str | None = None) -> None:
    """Serve the refresh deployment until interrupted (Ctrl-C)."""
    from prefect import serve as prefect_serve

    prefect_serve(refresh_deployment(index, cron, name), limit=1)
