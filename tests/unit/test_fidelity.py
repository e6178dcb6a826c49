"""bench/fidelity_score.py and bench/fidelity.py: each measure of the fidelity bench moves when, and only
when, what it measures is lost; the reference's tables, headings and pictures are read as GFM writes them."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from bench import fidelity
from bench.fidelity_real import docbook_markdown
from bench.fidelity_score import (
    Score,
    lcs_length,
    measures_of,
    normal,
    reference_headings,
    reference_images,
    reference_tables,
    reference_text,
    restrict,
    score,
    split_row,
    words,
)
from laminae.tasks.parse.document import Component, ParsedPage, linearize_table

FIRST = "The pump station draws water from the lower basin and lifts it to the treatment hall."
SECOND = "Operators check the intake screens every morning and note the pressure on each gauge."
THIRD = "Sand filters remove the silt that the spring floods carry down from the hills."
HEADER = ["Quay", "Ships", "Tonnage"]
ROWS = [["North", "14", "2,300"], ["South", "9", "1,150"], ["West | East", "3", "410"]]
REFERENCE = f"""# Harbour report

{FIRST}

## Traffic

{SECOND}

| Quay | Ships | Tonnage |
|:-----|------:|:-------:|
| North | 14 | 2,300 |
| South | 9 | 1,150 |
| West \\| East | 3 | 410 |

## Works

{THIRD}

![the new crane](crane.png)
"""


def page(*, first: str = FIRST, second: str = SECOND, third: str = THIRD, rows: list[list[str]] | None = None,
         works: str = "Works", swap: bool = False, images: int = 1) -> ParsedPage:
    """What a perfect parse of REFERENCE gives, with the changes asked for."""
    rows = ROWS if rows is None else rows
    top = ["Harbour report"]
    if swap:
        first, second = second, first
    comps = [Component("paragraph", first, top), Component("paragraph", second, [*top, "Traffic"]),
             Component("table", linearize_table(None, HEADER, rows), [*top, "Traffic"], header=HEADER, rows=rows),
             Component("paragraph", third, [*top, works] if works else top)]
    comps += [Component("image", "Image: the new crane. In: Harbour report > Works.", [*top, works],
                        alt="the new crane") for _ in range(images)]
    return ParsedPage("file:///r.pdf", "Harbour report", None, "en", comps)


def shares(p: ParsedPage | None) -> dict[str, float | None]:
    return score(p, REFERENCE).shares()


def changed(p: ParsedPage) -> set[str]:
    return {m for m, v in shares(p).items() if v != 1.0}


def test_a_perfect_parse_scores_one_on_every_measure():
    s = score(page(), REFERENCE)
    assert s.shares() == dict.fromkeys(s.shares(), 1.0)
    assert (s.ref_tables, s.tables, s.ref_headings, s.ref_images, s.images) == (1, 1, 3, 1, 1)
    assert s.ref_cells == 12 and s.ref_words == len(words(reference_text(REFERENCE)))


def test_dropped_words_lower_words_found_and_only_it():
    p = page(second="Operators check the screens.")
    assert changed(p) == {"words"}
    s = score(p, REFERENCE)
    lost = len(words(SECOND)) - len(words("Operators check the screens."))
    assert s.ref_words - s.found == lost
    assert set(s.missed) == {"the", "and", "intake", "every", "morning", "note", "pressure", "on", "each", "gauge"}


def test_swapped_paragraphs_lower_in_order_and_only_it():
    p = page(swap=True)
    assert changed(p) == {"in_order"}
    assert shares(p)["in_order"] < 0.9


def test_a_missing_table_row_lowers_table_cells_and_only_it():
    p = page(rows=ROWS[:2])
    # the row's words are gone too: drop them from the reference's count by keeping them in the text
    p.components.insert(3, Component("paragraph", "West | East 3 410", ["Harbour report", "Traffic"]))
    assert changed(p) == {"cells"}
    assert shares(p)["cells"] == pytest.approx(9 / 12)


def test_a_missing_heading_lowers_headings_and_only_it():
    p = page(works="", third="Works. " + THIRD)
    assert changed(p) == {"headings"}
    assert score(p, REFERENCE).missed_headings == ["works"]


def test_a_heading_with_nothing_under_it_is_found_as_its_own_paragraph():
    reference = "# Handbook\n\n## Moorings\n\n## Pilotage\n"
    p = ParsedPage("file:///h.html", "Handbook", None, "en",
                   [Component("paragraph", "Moorings", ["Handbook"]), Component("paragraph", "Pilotage", ["Handbook"])])
    assert score(p, reference).shares() == {"words": 1.0, "in_order": 1.0, "precision": 1.0, "cells": None,
                                            "headers": None, "headings": 1.0}
    p.components[1].text = "Pilotage dues are set by the board"
    assert score(p, reference).missed_headings == ["pilotage"]


def test_words_laminae_adds_lower_precision_and_only_it():
    p = page(third=THIRD + " Page 3 of 12. Confidential draft.")
    assert changed(p) == {"precision"}


def test_a_different_header_row_lowers_headers_agreeing_and_only_it():
    p = page()
    table = p.components[2]
    table.header, table.rows = None, [HEADER, *ROWS]
    assert changed(p) == {"headers"}


def test_pictures_are_counted_against_the_references_figures():
    s = score(page(images=2), REFERENCE)
    assert (s.images, s.ref_images) == (2, 1) and s.shares()["words"] == 1.0


def test_a_failed_parse_scores_zero():
    s = score(None, REFERENCE)
    assert s.shares() == {"words": 0.0, "in_order": 0.0, "precision": 0.0, "cells": 0.0, "headers": 0.0,
                          "headings": 0.0}


def test_the_table_parser_reads_escaped_pipes_alignment_rows_ragged_rows_and_html_tables():
    md = ("Text | with a pipe but no table\n\n"
          "Name | Value\n:---: | ---:\n`a \\| b` | **1**\nc\n| d | 2 | extra |\n\n"
          "```\n| x | y |\n|---|---|\n| 1 | 2 |\n```\n")
    tables = reference_tables(md)
    assert len(tables) == 1
    assert tables[0].header == ["Name", "Value"]
    assert tables[0].rows == [["`a | b`", "**1**"], ["c", ""], ["d", "2"]]
    assert split_row("| a \\| b | c |") == ["a | b", "c"]
    assert reference_tables("| a | b |\n|---|\n| 1 | 2 |") == []  # a delimiter row of another width
    html = ("| a | b |\n|---|---|\n| 1 | 2 |\n\n<table>\n<tr><th>Flag</th><th>Meaning</th></tr>\n"
            "<tr><td><code>F_OK</code></td><td>The file\n is visible.</td></tr>\n</table>\n\n"
            "<table><tr><td>x</td><td>y</td></tr></table>\n")
    assert [(t.header, t.rows) for t in reference_tables(html)] == [
        (["a", "b"], [["1", "2"]]), (["Flag", "Meaning"], [["F_OK", "The file is visible."]]), ([], [["x", "y"]])]


def test_headings_and_images_outside_code_fences_only():
    md = "# One ##\n\n~~~md\n# not a heading\n![not](a.png)\n~~~\n\n###### [Six](x.html)\n\n#no\n\n![a](b.png) ![c](d.png)"
    assert reference_headings(md) == ["one", "six"]
    assert reference_images(md) == 2


def test_words_fold_ligatures_case_line_end_hyphens_and_markdown_syntax():
    assert words("The ﬁle\u00ad's conﬁg-\nuration, Straße_2") == ["the", "file", "s", "configuration", "strasse", "2"]
    assert words(reference_text("```python\nx = 1\n```\nSee [the guide](http://example.org/guide) "
                                "<b>now</b> &amp; ![a map](map.png)\n\n[ref]: http://example.org/ref\n\n"
                                "1. one\n2) two\n- three\n> 4. four")) \
        == ["x", "1", "see", "the", "guide", "now", "a", "map", "one", "two", "three", "four"]
    assert normal("  **Tonnage** (t) ") == "tonnage t"


def test_lcs_is_exact():
    rng = random.Random(7)

    def table_lcs(a: list[int], b: list[int]) -> int:
        prev = [0] * (len(b) + 1)
        for x in a:
            cur = [0]
            for j, y in enumerate(b):
                cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
            prev = cur
        return prev[-1]

    for _ in range(300):
        a = [rng.randrange(6) for _ in range(rng.randrange(40))]
        b = [rng.randrange(6) for _ in range(rng.randrange(40))]
        assert lcs_length(a, b) == table_lcs(a, b)


def test_scores_add_up_counts_over_files():
    total = score(page(), REFERENCE) + score(None, REFERENCE)
    assert isinstance(total, Score) and total.shares()["words"] == 0.5


def test_the_bench_scores_a_folder_and_a_file_that_fails_to_parse_scores_zero(tmp_path: Path, capsys):
    html = (f"<html><head><title>Harbour report</title></head><body><h1>Harbour report</h1><p>{FIRST}</p>"
            "</body></html>")
    (tmp_path / "good.html").write_text(html)
    (tmp_path / "good.html.ref.md").write_text(f"# Harbour report\n\n{FIRST}\n")
    (tmp_path / "empty.html").write_bytes(b"")
    (tmp_path / "empty.html.ref.md").write_text(f"# Harbour report\n\n{FIRST}\n")
    (tmp_path / "no_reference.html").write_text(html)
    out = tmp_path / "out.json"
    assert fidelity.main([str(tmp_path), "--json", str(out)]) == 0
    records = {r["name"]: r for r in json.loads(out.read_text())["files"]}
    assert set(records) == {"good.html", "empty.html"}
    assert records["good.html"]["shares"]["words"] == 1.0 and records["good.html"]["error"] is None
    assert records["empty.html"]["shares"]["words"] == 0.0 and records["empty.html"]["error"]
    printed = capsys.readouterr().out
    assert "## failed (scored 0)" in printed and "empty.html" in printed


def test_code_spans_bind_before_links_and_laminae_text_is_read_as_plain_text():
    md = "## `f([a][, b])`\n\nSee [`g()`][`h()`] and `x[y](z)`, not [the guide](http://example.org), `Buffer`s.\n"
    assert words(reference_text(md)) == ["f", "a", "b", "see", "g", "and", "x", "y", "z", "not", "the", "guide",
                                         "buffers"]
    p = ParsedPage("file:///a.md", "", None, None,
                   [Component("paragraph", "See g() and x[y](z), not the guide, Buffers.", ["f([a][, b])"])])
    assert score(p, md).shares() == {"words": 1.0, "in_order": 1.0, "precision": 1.0, "cells": None,
                                     "headers": None, "headings": 1.0}


def test_a_reference_of_facts_scores_only_the_measures_it_names():
    facts = "<!-- measures: headings -->\n\n# Introduction\n\n## 2.1. Directory layout\n"
    assert measures_of(facts) == {"headings"} and measures_of(REFERENCE) is None
    p = ParsedPage("file:///m.pdf", "", None, None,
                   [Component("paragraph", "Many programs use the MIME system.", ["1 Introduction", "Layout"])])
    s = restrict(score(p, facts), {"headings"})
    assert s.shares() == {"words": None, "in_order": None, "precision": None, "cells": None, "headers": None,
                          "headings": 0.5}
    assert s.missed_headings == ["directory layout"]
    with pytest.raises(ValueError, match="unknown measures"):
        restrict(s, {"heading"})


def test_docbook_source_becomes_a_markdown_reference(tmp_path: Path):
    source = tmp_path / "spec.xml.gz"
    source.write_bytes(gzip.compress(b"""<?xml version="1.0"?>
<!DOCTYPE article [<!ENTITY version "0.21">]>
<article><articleinfo><title>Spec</title><date>2 October 2018</date></articleinfo>
<sect1><title>Files</title><para>Version &version; of <filename>&lt;MIME&gt;/globs</filename><citation>RFC</citation>:
<itemizedlist><listitem><para>first</para></listitem></itemizedlist>and after.</para>
<informaltable><tgroup cols="2"><thead><row><entry>Part</entry><entry>Meaning</entry></row></thead>
<tbody><row><entry>a|b</entry><entry>c</entry></row></tbody></tgroup></informaltable>
<sect2><title>Listing</title><programlisting><![CDATA[<x a="1"/>]]></programlisting></sect2></sect1></article>"""))
    md = docbook_markdown(source)
    assert reference_headings(md) == ["spec", "files", "listing"]
    assert words(reference_text(md)) == ["spec", "2", "october", "2018", "files", "version", "0", "21", "of", "mime",
                                         "globs", "rfc", "first", "and", "after", "part", "meaning", "a", "b", "c",
                                         "listing", "x", "a", "1"]
    assert [(t.header, t.rows) for t in reference_tables(md)] == [(["Part", "Meaning"], [["a|b", "c"]])]
    assert "2018" not in docbook_markdown(source, ("date",)) and "Part" not in docbook_markdown(source, ("informaltable",))


def test_another_checkout_is_imported_from_its_own_folders(tmp_path: Path):
    repo = Path(__file__).resolve().parents[2]
    for name in ("laminae", "tasks", "flows", "schemas"):
        (tmp_path / name).symlink_to(repo / name, target_is_directory=True)
    code = ("import sys; from pathlib import Path; from bench import fidelity; "
            f"fidelity.use_checkout(Path({str(tmp_path)!r})); import laminae.tasks.parse.document as d; "
            "print(d.__file__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "tasks" / "parse" / "document.py")
