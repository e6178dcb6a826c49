"""Scheduling: the serve deployment and the Prefect server deployments file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.serve import DEFAULT_CRON, ScheduleError, refresh_deployment
from tasks.write import IndexStore

ROOT = Path(__file__).resolve().parent.parent


def test_refresh_deployment_has_the_schedule_and_the_index(tmp_path):
    with pytest.raises(ScheduleError, match="laminae build"):
        refresh_deployment(str(tmp_path))
    IndexStore(tmp_path).remember(seeds=[{"url": "http://x.test/", "annotations": {}}], settings={})
    deployment = refresh_deployment(str(tmp_path), "15 2 * * 1")
    assert deployment.parameters == {"index": str(tmp_path.resolve())}
    assert [s.schedule.cron for s in deployment.schedules] == ["15 2 * * 1"]
    assert deployment.name == f"refresh-{tmp_path.name}"
    with pytest.raises(ScheduleError, match="five fields"):
        refresh_deployment(str(tmp_path), "every night")


def test_prefect_yaml_points_at_real_flows_with_the_same_schedule():
    import importlib

    spec = yaml.safe_load((ROOT / "infra" / "prefect.yaml").read_text())
    by_name = {d["name"]: d for d in spec["deployments"]}
    assert by_name["refresh-nightly"]["schedules"][0]["cron"] == DEFAULT_CRON
    for deployment in spec["deployments"]:
        path, _, attribute = deployment["entrypoint"].partition(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        flow = getattr(module, attribute)
        assert set(deployment["parameters"]) <= set(flow.parameters.properties)
