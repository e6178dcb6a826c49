"""The front door and the manual stay true: README.md short, docs/settings.md generated from the code.

Reads README.md, docs/settings.md, docs/*.md, mkdocs.yml and the fields of BuildSettings (through
docs/gen_settings.py); writes nothing. `make test` also builds the site with `mkdocs build --strict`.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from laminae.tasks.config import BuildSettings

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250


def _generator():
    spec = importlib.util.spec_from_file_location("gen_settings", ROOT / "docs" / "gen_settings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, more than {README_MAX_LINES}: move the detail into a page of docs/"
    )


def test_settings_page_is_generated_from_build_settings():
    gen = _generator()
    page = (ROOT / "docs" / "settings.md").read_text()
    assert page == gen.render(), f"docs/settings.md is stale: run `{gen.COMMAND}`"


def test_settings_page_names_every_setting():
    """Every leaf field of BuildSettings has its LAMINAE_ variable on the page, with its description."""
    page = (ROOT / "docs" / "settings.md").read_text()
    for name, info in BuildSettings.model_fields.items():
        nested = getattr(info.annotation, "model_fields", None)
        leaves = {f"{name.upper()}__{k.upper()}": v for k, v in nested.items()} if nested else {name.upper(): info}
        for var, leaf in leaves.items():
            row = re.search(rf"^\| `LAMINAE_{var}` \|.*$", page, re.M)
            assert row, f"LAMINAE_{var} is missing from docs/settings.md"
            first_word = (leaf.description or "").split(" ")[0].replace("<", "&lt;").replace(">", "&gt;")
            assert first_word in row.group(0)


def test_every_page_is_in_the_nav():
    """A page left out of mkdocs.yml's nav would be built but never reached from the menu."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    listed = set(re.findall(r"^  - [^:]+: (\S+\.md)$", nav, re.M))
    assert pages == listed, f"pages not in mkdocs.yml's nav: {sorted(pages - listed)}; gone: {sorted(listed - pages)}"
