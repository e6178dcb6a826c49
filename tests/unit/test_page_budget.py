"""A page's budget (issue 44): components, subcomponents and characters of code split into runs of
lines are capped (``ParseConfig.max_components``, ``max_subcomponents``, ``max_code_lines_chars``);
a page over a cap keeps exactly the first nodes in document order and names the cut, with the count
dropped, in its warnings; a page at or under every cap gets the rows it got before."""

from __future__ import annotations

import re

from laminae.schemas import document_id
from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import DocumentNodes, build_nodes
from laminae.tasks.parse.html import parse_html

URL = "http://h.test/budget"
# prose, a table and code blocks of different sizes, each with a link
PAGE = (
    "<html><head><title>Budget</title></head><body><main>"
    "<p>Rye is sown in autumn. It grows under <a href='/snow'>snow</a>. Bakers like it.</p>"
    "<table><caption>Grains</caption><tr><th>Grain</th><th>Use</th></tr><tr><td>Rye</td><td>bread</td></tr>"
    "<tr><td><a href='/oats'>Oats</a></td><td>porridge</td></tr><tr><td>Barley</td><td>beer</td></tr></table>"
    "<pre>" + "\n".join(f"sow --field {i} --grain rye" for i in range(60)) + "</pre>"
    "<p>Between the listings. Two sentences here.</p>"
    "<pre>" + "\n".join(f"reap --field {i} --grain <a href='/oats'>oats</a>" for i in range(80)) + "</pre>"
    "<pre>mill --grain barley</pre>"
    "<p>The closing paragraph of the page.</p>"
    "</main></body></html>"
).encode()


def _build(cfg: ParseConfig) -> DocumentNodes:
    fetch = FetchResult(url=URL, final_url=URL, raw_key="k", content_type="text/html")
    return build_nodes(parse_html(PAGE, URL, cfg), document_id(URL), fetch, cfg)


def _warning(nodes: DocumentNodes, reason: str) -> str:
    found = [w for w in nodes.document["warnings"] if w.startswith(reason + ": ")]
    assert len(found) == 1, nodes.document["warnings"]
    return found[0]


def _node_ids(nodes: DocumentNodes) -> set[str]:
    return {n["id"] for n in nodes.components + nodes.subcomponents} | {nodes.document["id"]}


def _edges_are_whole(nodes: DocumentNodes) -> None:
    """Every edge starts at a node of the page, every contains edge ends at one, and each node
    but the document is contained once."""
    ids = _node_ids(nodes)
    assert all(e["src_id"] in ids for e in nodes.edges)
    contains = [e["dst_id"] for e in nodes.edges if e["kind"] == "contains"]
    assert sorted(contains) == sorted(ids - {nodes.document["id"]})


def test_a_page_at_or_under_every_cap_is_built_as_without_caps():
    free = _build(ParseConfig(max_components=10**9, max_subcomponents=10**9, max_code_lines_chars=10**9))
    lines = sum(len(c["text"]) for c in free.components if c["kind"] == "code")
    exact = _build(ParseConfig(max_components=len(free.components), max_subcomponents=len(free.subcomponents),
                               max_code_lines_chars=lines))
    default = _build(ParseConfig())
    for nodes in (exact, default):
        assert nodes.document == free.document and not nodes.document["warnings"]
        assert nodes.components == free.components and nodes.subcomponents == free.subcomponents
        assert nodes.edges == free.edges
    assert {s["kind"] for s in free.subcomponents} == {"sentence", "header", "row", "lines"}


def test_components_past_the_cap_are_dropped_in_document_order():
    free = _build(ParseConfig())
    cap = 4
    assert len(free.components) > cap + 2
    nodes = _build(ParseConfig(max_components=cap))
    assert nodes.components == free.components[:cap]
    kept = {c["id"] for c in nodes.components}
    assert nodes.subcomponents == [s for s in free.subcomponents if s["parent_id"] in kept]
    assert nodes.document["n_components"] == cap
    warning = _warning(nodes, "too_many_components")
    dropped = len(free.components) - cap
    assert f"{dropped} of the page's {len(free.components)} components were dropped" in warning
    assert "LAMINAE_PARSE__MAX_COMPONENTS" in warning and f"the first {cap} are kept" in warning
    _edges_are_whole(nodes)


def test_subcomponents_past_the_cap_are_dropped_and_their_components_kept():
    free = _build(ParseConfig())
    for cap in (0, 5, len(free.subcomponents) - 1):  # none, within the table, the last one
        nodes = _build(ParseConfig(max_subcomponents=cap))
        assert nodes.components == free.components
        assert nodes.subcomponents == free.subcomponents[:cap]
        assert nodes.document["n_subcomponents"] == cap
        warning = _warning(nodes, "too_many_subcomponents")
        dropped = len(free.subcomponents) - cap
        assert f"{dropped} of the page's {len(free.subcomponents)} subcomponents" in warning
        assert "LAMINAE_PARSE__MAX_SUBCOMPONENTS" in warning
        _edges_are_whole(nodes)
        # the links of what was kept are all there: a component's, and a kept sentence's or row's
        kept = _node_ids(nodes)
        assert [e for e in nodes.edges if e["kind"] == "links_to"] == \
            [e for e in free.edges if e["kind"] == "links_to" and e["src_id"] in kept]


def test_code_past_the_lines_cap_is_kept_whole_without_runs_of_lines():
    free = _build(ParseConfig())
    code = [c for c in free.components if c["kind"] == "code"]
    assert len(code) == 3 and len(code[1]["text"]) > len(code[2]["text"])
    runs = {c["id"]: sum(s["parent_id"] == c["id"] for s in free.subcomponents) for c in code}
    assert all(runs.values()) and runs[code[1]["id"]] > 1
    # room for the first block and the small third one, not the second: the third is past it all the same
    cap = len(code[0]["text"]) + len(code[2]["text"])
    nodes = _build(ParseConfig(max_code_lines_chars=cap))
    assert nodes.components == free.components
    cut = {code[1]["id"], code[2]["id"]}
    assert nodes.subcomponents == [s for s in free.subcomponents if s["parent_id"] not in cut]
    warning = _warning(nodes, "code_lines_cut")
    chars = len(code[1]["text"]) + len(code[2]["text"])
    assert warning.startswith(f"code_lines_cut: 2 of the page's 3 code components ({chars} characters) ")
    assert f"({runs[code[1]['id']] + runs[code[2]['id']]} runs not made)" in warning
    assert f"cap of {cap} characters" in warning and "LAMINAE_PARSE__MAX_CODE_LINES_CHARS" in warning
    _edges_are_whole(nodes)
    assert not [w for w in nodes.document["warnings"] if w.startswith("too_many")]


def test_each_cut_is_counted_after_the_one_before():
    """Components first, then code lines, then subcomponents: each warning counts what reached it."""
    free = _build(ParseConfig())
    comps = 5  # the prose, the table, the first code block, the prose between and the second block
    lines_cap = len(free.components[2]["text"])
    nodes = _build(ParseConfig(max_components=comps, max_code_lines_chars=lines_cap, max_subcomponents=6))
    assert [c["id"] for c in nodes.components] == [c["id"] for c in free.components[:comps]]
    assert [c["kind"] for c in nodes.components] == ["paragraph", "table", "code", "paragraph", "code"]
    reachable = [s for s in free.subcomponents
                 if s["parent_id"] in {c["id"] for c in free.components[:comps]}
                 and s["parent_id"] != free.components[4]["id"]]
    assert nodes.subcomponents == reachable[:6]
    counted = {re.match(r"(\w+): (\d+) of", w).groups() for w in nodes.document["warnings"]}
    assert counted == {("too_many_components", str(len(free.components) - comps)),
                       ("code_lines_cut", "1"), ("too_many_subcomponents", str(len(reachable) - 6))}
