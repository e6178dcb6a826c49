"""Calls spread over models that each run one call at a time (ONNX sessions, OCR engines)."""

from __future__ import annotations

import threading
import time

import pytest

from laminae.tasks.model_runtime import on_free_models


def test_each_call_holds_a_model_no_other_running_call_holds():
    held: set[str] = set()
    lock = threading.Lock()
    most = [0]

    def run(item: int, model: str) -> tuple[int, str]:
        with lock:
            assert model not in held
            held.add(model)
            most[0] = max(most[0], len(held))
        time.sleep(0.01)
        with lock:
            held.discard(model)
        if item == 5:
            raise ValueError("picture 5 is broken")
        return item * 10, model

    done = on_free_models(["a", "b", "c"], run, list(range(12)), "test")
    assert all(d.done() for d in done)
    assert [d.result()[0] for i, d in enumerate(done) if i != 5] == [i * 10 for i in range(12) if i != 5]
    with pytest.raises(ValueError, match="picture 5"):
        done[5].result()
    assert most[0] == 3
    assert [d.result()[1] for d in on_free_models(["only"], run, [1, 2], "test")] == ["only", "only"]
    assert on_free_models(["a"], run, [], "test") == []
