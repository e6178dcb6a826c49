"""The code's layout: every package is installed under ``laminae``, no module imports itself back
through others and no package another that imports it back (function-level imports included: an
import inside a function is still a dependency, only a later one), every module imports alone, and
no module outgrows the size budget."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.conftest import ROOT

FOLDERS = {"laminae": "laminae", "schemas": "laminae.schemas", "flows": "laminae.flows", "tasks": "laminae.tasks"}
DATA_PACKAGES = {"laminae.site": "examples/site"}  # data only (the sample site `laminae demo` serves)
# the reader's side: these import one another and laminae.schemas, never the builder (laminae.flows,
# laminae.tasks); the MCP server (laminae.mcp) needs only the reader and the mcp SDK (issue 46)
READER_SIDE = ("laminae", "laminae.integrations", "laminae.mcp")
# lines a product module may have; a longer one holds more than one job (issue 46: a newcomer reads
# a module whole before changing it)
SIZE_BUDGET = 500
# the modules still over the budget, each at most as long as here: the list only shrinks (a module
# split below the budget leaves it, and no module joins it), and none of these grows meanwhile
OVER_BUDGET: dict[str, int] = {}


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``path`` imports anywhere in it (``from a import b``: ``a.b`` when that is
    a module, else ``a``)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_imports_itself_back():
    modules = _modules()
    direct = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    # a module that imports one of its own packages (``import laminae`` in the builder) imports what
    # that package's __init__ imports; the package itself is its parent, not a cycle
    graph = {name: {t for m in imports for t in (direct[m] if name.startswith(m + ".") else {m})
                    if t != name and not name.startswith(t + ".")}
             for name, imports in direct.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    assert "laminae.index" in graph["laminae.tasks.storage.versions"]  # the builder saves the reader's view
    common = {m for m in modules if m.startswith("laminae.schemas")}
    assert all(t in common for m in common for t in graph[m]), "schemas imports only schemas"


def _package(name: str, packages: set[str]) -> str:
    """The node of the package graph a module belongs to: its innermost installed package, except
    that each module directly in ``laminae.tasks`` (config, progress, pipeline, batches, refresh) is
    a node of its own, the builder's shared base or its top, and so is each module directly in
    ``laminae.tasks.parse`` (a format's parser, or what they share: document, archive, isolated),
    whose formats may read through one another's (an EPUB's chapters through the HTML package)."""
    package = max((p for p in packages if name == p or name.startswith(p + ".")), key=len)
    return name if package in ("laminae.tasks", "laminae.tasks.parse") and name != package else package


def test_no_loop_between_packages():
    modules = _modules()
    packages = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    graph: dict[str, set[str]] = {}
    into_builder = set()
    for name, path in modules.items():
        source = _package(name, packages)
        for target in _imports(name, path, set(modules)):
            graph.setdefault(source, set())
            if (dest := _package(target, packages)) != source:
                graph[source].add(dest)
                graph.setdefault(dest, set())
                if source in READER_SIDE and not dest.startswith("laminae.schemas") and dest not in READER_SIDE:
                    into_builder.add(f"{name} -> {target}")
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    # the builder imports the reader (it writes the reader's view, the report opens the index); the
    # reader reaches the builder only for the query model, inside load_query_model, and the model
    # layer (laminae.tasks.embed) imports nothing that imports the reader; the integrations and the
    # MCP server reach the builder only through the reader
    assert into_builder == {"laminae.query -> laminae.tasks.embed.embedders"}
    assert "laminae" in graph["laminae.mcp"] and "laminae" in graph["laminae.integrations"]
    assert "laminae" in graph["laminae.tasks.storage"] and "laminae" in graph["laminae.tasks.report"]


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_package_folder_is_installed_under_laminae():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {name for name, path in _modules().items() if path.name == "__init__.py"}
    assert set(config["packages"]) == packages | set(DATA_PACKAGES)
    assert config["package-dir"] == {**{v: k for k, v in FOLDERS.items() if k != "laminae"}, **DATA_PACKAGES}
    assert set(config["package-data"]) >= set(DATA_PACKAGES)


def test_every_module_imports_alone():
    def alone(name: str) -> tuple[str, int, str]:
        proc = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                              cwd=ROOT / "tests", timeout=300)
        return name, proc.returncode, proc.stderr[-800:]

    with ThreadPoolExecutor(2) as pool:
        failed = [r for r in pool.map(alone, sorted(_modules())) if r[1] != 0]
    assert not failed, failed


def test_no_product_module_over_the_size_budget():
    paths = [*_modules().values(), *(p for folder in DATA_PACKAGES.values() for p in (ROOT / folder).rglob("*.py"))]
    sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in paths}
    over = {name: lines for name, lines in sizes.items() if lines > SIZE_BUDGET}
    joined = sorted(f"{name} ({over[name]} lines)" for name in set(over) - set(OVER_BUDGET))
    assert not joined, f"over {SIZE_BUDGET} lines: {joined}; split each by job (as tasks/crawl/fetch.py was), " \
                       "never add it to OVER_BUDGET"
    left = sorted(set(OVER_BUDGET) - set(over))
    assert not left, f"within {SIZE_BUDGET} lines now, or gone: remove {left} from OVER_BUDGET in {__file__}"
    grown = sorted(f"{name} ({over[name]} > {limit} lines)" for name, limit in OVER_BUDGET.items() if over[name] > limit)
    assert not grown, f"a module over the budget may only shrink: {grown}"
    assert len(OVER_BUDGET) <= 3  # issue 46's target; lower this with the list
