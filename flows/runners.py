"""Prefect task runners for the batch stages: none (local), Dask or Ray, from ``RunnerConfig``.

Reads the runner settings; starts nothing itself (the runner starts a local cluster, or joins the
given address, when the flow enters it). Imports prefect-dask / prefect-ray only when asked for.
"""

from __future__ import annotations

from contextlib import nullcontext

from laminae.schemas.errors import LaminaeError
from laminae.tasks.config import RunnerConfig


class RunnerConfigError(LaminaeError, ValueError):
    """The requested runner cannot be used (its package is missing); the message says what to do."""

    exit_code = 2


def make_task_runner(cfg: RunnerConfig):
    """The task runner for ``cfg.kind``, or None for local (batches run in the flow's process)."""
    if cfg.kind == "local":
        return None
    if cfg.kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise RunnerConfigError("runner 'dask' needs prefect-dask: pip install -c constraints.txt "
                                    "-e '.[scale]'") from None
        if cfg.address:
            return DaskTaskRunner(address=cfg.address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": cfg.workers, "threads_per_worker": 1,
                                              "processes": True, "dashboard_address": None})
    try:
        from prefect_ray import RayTaskRunner
    except ImportError:
        raise RunnerConfigError("runner 'ray' needs prefect-ray: pip install -c constraints.txt -e '.[scale]'") from None
    init = {"include_dashboard": False, "log_to_driver": False}
    if not cfg.address:
        init["num_cpus"] = cfg.workers
    return RayTaskRunner(address=cfg.address, init_kwargs=init)


def resources(cfg: RunnerConfig):
    """A context in which submitted tasks request ``cfg.gpus`` GPUs (Ray only)."""
    if cfg.kind == "ray" and cfg.gpus:
        from prefect_ray.context import remote_options

        return remote_options(num_gpus=cfg.gpus)
    return nullcontext()
