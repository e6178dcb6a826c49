"""The bundled sample site served over HTTP on 127.0.0.1, for ``laminae demo`` and the tests.

Reads the sample site (pages, ``seeds.txt``): ``examples/site/`` in a checkout, installed as package
data ``laminae/site/`` by a wheel, and, for photographs, the ``assets`` folder of the
installed ultralytics package; writes nothing. Unknown paths answer 404.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

log = logging.getLogger("laminae.demo")
DEMO_PORT = 8765  # fixed, so that re-running the demo addresses the same URLs (same document ids)
_ABOVE = Path(__file__).resolve().parent.parent  # the installed laminae package, or the repository
SITE_DIR = next((p for p in (_ABOVE / "site", _ABOVE / "examples" / "site") if (p / "seeds.txt").is_file()),
                _ABOVE / "site")


def photo_dirs() -> list[Path]:
    """Folders of package-shipped photographs the site may reference under ``/photos/``."""
    spec = importlib.util.find_spec("ultralytics")
    if spec is None or not spec.submodule_search_locations:
        return []
    assets = Path(spec.submodule_search_locations[0]) / "assets"
    return [assets] if assets.is_dir() else []


class _SiteHandler(SimpleHTTPRequestHandler):
    photos: list[Path] = []

    def translate_path(self, path: str) -> str:
        clean = path.split("?", 1)[0].split("#", 1)[0]
        if clean.startswith("/photos/"):
            name = os.path.basename(clean)
            for folder in self.photos:
                if (folder / name).is_file():
                    return str(folder / name)
        return super().translate_path(path)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the stdlib's signature
        pass


class SiteServer:
    """Serve a folder on 127.0.0.1 on a free port in a background thread; a context manager."""

    def __init__(self, directory: Path = SITE_DIR, port: int = 0) -> None:
        handler = partial(type("Handler", (_SiteHandler,), {"photos": photo_dirs()}), directory=str(directory))
        try:
            self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError:
            if not port:
                raise
            log.warning("port %d is busy; serving on a free port (the index gets other document ids)", port)
            self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.directory = directory
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def seeds(self) -> list[str]:
        """The site's seed URLs (``seeds.txt`` holds paths relative to the site root)."""
        lines = (self.directory / "seeds.txt").read_text().splitlines()
        return [self.base_url + line.strip().lstrip("/") for line in lines if line.strip() and not line.startswith("#")]

    def __enter__(self) -> SiteServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
