"""Whether ONNX Runtime's threads spin between calls: as configured, or decided once per process
from how busy the machine is when the first model loads."""

from __future__ import annotations

import os

from laminae.tasks import model_runtime as runtime


def test_spin_as_configured_or_from_the_load_once(monkeypatch):
    assert runtime.spins("on") and not runtime.spins("off")
    cores = runtime.usable_cores()
    runtime._idle_at_start.cache_clear()
    monkeypatch.setattr(os, "getloadavg", lambda: (cores / 2 + 0.5, 0.0, 0.0))  # another build running
    assert not runtime.spins("auto")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.0, 0.0))
    assert not runtime.spins("auto")  # decided once: the models already loaded keep their keys
    runtime._idle_at_start.cache_clear()
    assert runtime.spins("auto")
    runtime._idle_at_start.cache_clear()
