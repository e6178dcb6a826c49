"""The same build on the local runner (the next batch parsed while this one embeds), with its stages
one after another, with parse worker processes, on a local Dask cluster and on a local Ray instance:
same tables."""

from __future__ import annotations

import numpy as np
import pytest

import laminae
from laminae.flows.demo import SiteServer

pytestmark = pytest.mark.slow
TABLES = ("documents", "components", "subcomponents", "edges")


def _rows(index, name: str) -> list[dict]:
    return laminae.open(str(index)).table(name).to_arrow().sort_by("id").to_pylist()


def _same_tables(a, b) -> None:
    for name in TABLES:
        left, right = _rows(a, name), _rows(b, name)
        assert [r["id"] for r in left] == [r["id"] for r in right], name
        for x, y in zip(left, right, strict=True):
            vx, vy = x.pop("vector", None), y.pop("vector", None)
            assert x == y, (name, x["id"])
            if name != "edges":  # embedded in another process by the same model
                assert np.allclose(vx, vy, atol=1e-5), (name, x["id"])


@pytest.fixture(scope="module")
def builds(tmp_path_factory, prefect_harness):
    from laminae.flows.build import build_index

    tmp = tmp_path_factory.mktemp("runners")
    out = {}
    with SiteServer(port=0) as site:
        seeds = tmp / "seeds.txt"
        seeds.write_text("\n".join(site.seeds()) + "\n")
        for kind in ("local", "sequential", "dask", "ray", "parse-workers"):
            runner = {"parse-workers": {"kind": "local", "parse_workers": 2},
                      "sequential": {"kind": "local", "overlap": False}}.get(kind, {"kind": kind, "workers": 2})
            settings = {"embed": {"device": "cpu", "threads": 1}, "batch_documents": 4, "runner": runner}
            summary = build_index(seeds=str(seeds), index=str(tmp / kind), settings=settings)
            out[kind] = (tmp / kind, summary)
    return out


@pytest.mark.parametrize("kind", ["sequential", "dask", "ray", "parse-workers"])
def test_cluster_runner_builds_the_same_tables(builds, kind):
    local_index, local = builds["local"]
    index, summary = builds[kind]
    assert summary["status"] == local["status"] == "success"
    if kind == "sequential":  # one process, one cache: the overlap changes nothing but the timing
        assert (summary["embedded"], summary["reused_vectors"]) == (local["embedded"], local["reused_vectors"])
    # the tables and their counts match; "embedded"/"reused" may not: parallel batches cannot reuse
    # each other's vectors from the cache, so a text shared by two batches is embedded twice
    assert summary["counts"] == local["counts"] and summary["documents_indexed"] == 14
    _same_tables(local_index, index)


def test_a_missing_runner_package_or_bad_kind_fails_with_the_fix(monkeypatch):
    import builtins

    from laminae.flows.runners import RunnerConfigError, make_task_runner
    from laminae.tasks.config import RunnerConfig

    assert make_task_runner(RunnerConfig()) is None
    real_import = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.startswith("prefect_dask"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(RunnerConfigError, match=r"pip install .*scale"):
        make_task_runner(RunnerConfig(kind="dask"))
    with pytest.raises(ValueError, match="local"):
        RunnerConfig(kind="spark")


def test_cli_runner_options_become_runner_settings():
    import argparse

    from laminae.flows.cli import _runner
    from laminae.tasks.config import BuildSettings

    args = argparse.Namespace(runner="ray", runner_address="ray://head:10001", workers=3, gpus_per_batch=1.0,
                              parse_workers=4)
    runner = _runner(args)
    assert runner == {"kind": "ray", "address": "ray://head:10001", "workers": 3, "gpus": 1.0, "parse_workers": 4}
    assert BuildSettings(runner=runner).runner.gpus == 1.0
    assert _runner(argparse.Namespace(runner=None, runner_address=None, workers=None, gpus_per_batch=None,
                                      parse_workers=None)) == {}


def test_ray_batches_request_the_configured_gpus():
    from prefect_ray.context import RemoteOptionsContext

    from laminae.flows.runners import resources
    from laminae.tasks.config import RunnerConfig

    with resources(RunnerConfig(kind="ray", gpus=1)):
        assert RemoteOptionsContext.get().current_remote_options == {"num_gpus": 1}  # what RayTaskRunner.submit reads
    with resources(RunnerConfig(kind="ray")):
        assert not RemoteOptionsContext.get().current_remote_options
    with resources(RunnerConfig(kind="dask", gpus=1)):  # Dask has no GPU requests: nothing is set
        assert not RemoteOptionsContext.get().current_remote_options
