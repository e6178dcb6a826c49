"""Shared fixtures: HTTP servers on 127.0.0.1, Prefect's test harness, the sample site."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from laminae import flows  # noqa: F401 - Prefect's offline defaults before anything imports prefect

ROOT = Path(__file__).resolve().parent.parent  # the repository
GOLDEN = ROOT / "tests" / "golden"


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the body is sent
    content_type: str | None = "text/html; charset=utf-8"
    fail_times: int = 0  # answer 503 this many times first
    calls: int = 0


class RouteServer:
    """A threaded HTTP server on 127.0.0.1 answering from a mutable path → Route table."""

    def __init__(self) -> None:
        self.routes: dict[str, Route | Callable[[BaseHTTPRequestHandler], None]] = {}
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                server.requests.append(self.path)
                route = server.routes.get(self.path.split("?")[0])
                if route is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "9")
                    self.end_headers()
                    self.wfile.write(b"not found")
                    return
                if callable(route):
                    route(self)
                    return
                route.calls += 1
                if route.calls <= route.fail_times:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if route.delay:
                    time.sleep(route.delay)
                self.send_response(route.status)
                if route.content_type:
                    self.send_header("Content-Type", route.content_type)
                for key, value in route.headers.items():
                    self.send_header(key, value)
                if "Content-Length" not in route.headers:
                    self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(route.body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[RouteServer]:
    srv = RouteServer()
    yield srv
    srv.close()


@pytest.fixture(scope="session")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


def page(title: str, body: str, head: str = "") -> bytes:
    return (f"<!doctype html><html lang='en'><head><title>{title}</title>{head}</head>"
            f"<body><main>{body}</main></body></html>").encode()


def _byte_symbols() -> list[str]:
    # GPT-2/CLIP byte-level alphabet: printable bytes map to themselves, the rest above U+0100
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = [], 0
    for b in range(256):
        if b in keep:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    path = tmp_path_factory.mktemp("tiny-clip")
    symbols = _byte_symbols()
    vocab = {s: i for i, s in enumerate(symbols + [s + "</w>" for s in symbols])}
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(path / "vocab.json"), str(path / "merges.txt"))
    images = CLIPImageProcessor(size={"shortest_edge": 30}, crop_size={"height": 30, "width": 30})
    torch.manual_seed(0)
    config = CLIPConfig(
        text_config={"vocab_size": len(vocab), "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4,
                     "num_hidden_layers": 2, "max_position_embeddings": 64,
                     "bos_token_id": vocab["<|startoftext|>"], "eos_token_id": vocab["<|endoftext|>"]},
        vision_config={"hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4, "num_hidden_layers": 2,
                       "image_size": 30, "patch_size": 6},
        projection_dim=16,
    )
    CLIPModel(config).save_pretrained(path)
    CLIPProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(path)
    return str(path)


def golden_text(path: Path, text: str) -> str:
    """The expected text stored in ``path``. With ``LAMINAE_UPDATE_GOLDEN=1`` the file is rewritten
    from ``text`` and the test fails, so that a run with the flag can never pass: review the diff,
    then run again without it."""
    if os.environ.get("LAMINAE_UPDATE_GOLDEN"):
        before = path.read_text() if path.exists() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        pytest.fail(f"{path} {'unchanged' if before == text else 'rewritten'} (LAMINAE_UPDATE_GOLDEN is set): "
                    "review the diff and run again without the flag", pytrace=False)
    return path.read_text()


def pytest_collection_modifyitems(config, items) -> None:
    """The end-to-end tier (tests/e2e: whole Prefect flows) is the slow one: ``-m "not slow"`` skips it."""
    e2e = Path(__file__).resolve().parent / "e2e"
    for item in items:
        if e2e in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.slow)
