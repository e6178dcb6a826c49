"""The ``laminae`` command ends without the interpreter's last garbage-collector pass over every
object its imports made."""

from __future__ import annotations

import gc
from importlib.metadata import entry_points

import pytest

import laminae.flows.cli as cli


def test_the_laminae_command_freezes_the_heap_before_it_exits(monkeypatch):
    (command,) = [e for e in entry_points(group="console_scripts") if e.name == "laminae"]
    assert command.value == "laminae.flows.cli:run"
    monkeypatch.setattr(cli, "main", lambda: 3)
    before = gc.get_freeze_count()
    try:
        with pytest.raises(SystemExit) as ended:
            cli.run()
        assert ended.value.code == 3
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
