"""Real-world page corpora the benchmarks share (fetched from package registries, cached).

Writes the unpacked packages into the cache folder it is given; imports nothing heavy.
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path


def fetch_htmlparser_benchmark(cache: Path) -> Path:
    """The 258 pages of the npm package ``htmlparser-benchmark@1.1.3`` (news and blog articles
    saved in 2013), fetched once with ``npm pack`` into ``cache``; returns their folder."""
    target = cache / "htmlparser-benchmark"
    if not (target / "package" / "files").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", "htmlparser-benchmark@1.1.3", "--silent"], cwd=target, check=True)
        with tarfile.open(next(target.glob("htmlparser-benchmark-*.tgz"))) as tar:
            tar.extractall(target, filter="data")
    return target / "package" / "files"
