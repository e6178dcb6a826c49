"""HTML pages of the shapes the HTML parser has missed, each with its reference Markdown.

``DOCUMENTS`` maps a file name to a function returning (the page's UTF-8 bytes, its reference):
a page of headings alone; a table whose ``<tr>`` holds only a ``<th rowspan=3>`` group label above
its body rows; a table nested in another's cell; an ordinary article (headings, a paragraph with a
link, a bulleted and a numbered list, a table with a ``<thead>``, a figure with its caption, a
footer that is not content). Used by bench/fidelity.py; writes nothing.

References: a heading as ``#``, a table as a GFM pipe table with its header row, a picture as
``![alt](src)`` beside its caption's text. A row-spanning label is repeated in each body row it
spans (how a reader takes the table). A nested table is a table of its own, after the table that
holds it, whose cell is left empty in the reference (an empty reference cell is not scored): the
inner table's words count once either way, its cells only where it is read as a table.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

STYLE = "<style>body { font-family: serif; } nav a { margin: 0 1em; }</style>"
NAV = '<nav><a href="/">Home</a> <a href="/about.html">About us</a> <a href="/contact.html">Contact</a></nav>'
FOOTER = "<footer><p>Copyright 2026 Portmere Harbour Board. All rights reserved.</p></footer>"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A GFM pipe table (pipes in cells escaped)."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(r) for r in rows)])


def page(title: str, body: str) -> bytes:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"{STYLE}</head><body>{NAV}<main>{body}</main>{FOOTER}</body></html>\n").encode()


def headings_only() -> tuple[bytes, str]:
    """A contents page: a title and section headings over nothing."""
    heads = [(1, "Harbour handbook"), (2, "Moorings and berths"), (2, "Pilotage"), (3, "Requesting a pilot"),
             (3, "Pilotage dues"), (2, "Dangerous goods")]
    body = "".join(f"<h{level}>{escape(text)}</h{level}>" for level, text in heads)
    return page("Harbour handbook", body), "\n\n".join("#" * level + " " + text for level, text in heads) + "\n"


GROUPS = {"North quays": [["Alnwick Quay", "8", "2,310"], ["Morpeth Wharf", "5", "1,120"]],
          "South quays": [["Seaton Pier", "11", "3,045"], ["Blyth Basin", "3", "640"]]}


def rowspan_label() -> tuple[bytes, str]:
    """Group labels as ``<tr><th rowspan=3>`` rows of their own above each group's body rows."""
    header = ["Area", "Berth", "Ships", "Tonnage"]
    html = ["<h1>Berth traffic</h1><p>Ships and tonnage handled at each berth in March, by area.</p><table>",
            "<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"]
    rows = []
    for label, members in GROUPS.items():
        html.append(f'<tr><th rowspan="{len(members) + 1}">{label}</th></tr>')
        for member in members:
            html.append("<tr>" + "".join(f"<td>{c}</td>" for c in member) + "</tr>")
            rows.append([label, *member])
    html.append("</table><p>Tonnage is in gross tonnes, rounded to the nearest ten.</p>")
    reference = ("# Berth traffic\n\nShips and tonnage handled at each berth in March, by area.\n\n"
                 f"{md_table(header, rows)}\n\nTonnage is in gross tonnes, rounded to the nearest ten.\n")
    return page("Berth traffic", "".join(html)), reference


def nested_tables() -> tuple[bytes, str]:
    """A table of vessels whose last row's cell holds a table of that vessel's crew."""
    header = ["Vessel", "Flag", "Length (m)", "Crew"]
    vessels = [["Morning Star", "Norway", "86", "12"], ["Grey Heron", "Netherlands", "64", "9"]]
    crew_header, crew = ["Rank", "Name"], [["Master", "Ingrid Solberg"], ["Mate", "Pieter de Vries"],
                                           ["Engineer", "Tomas Berg"]]
    inner = ("<table><tr>" + "".join(f"<th>{h}</th>" for h in crew_header) + "</tr>"
             + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in crew) + "</table>")
    body = ["<h1>Vessels in port</h1><p>Vessels berthed on the morning of 14 March.</p><table>",
            "<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"]
    body += ["<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in vessels]
    body.append(f'<tr><td>Sea Swallow</td><td>Denmark</td><td>52</td><td>{inner}</td></tr></table>')
    body.append("<p>The harbour master keeps the full crew lists.</p>")
    reference = ("# Vessels in port\n\nVessels berthed on the morning of 14 March.\n\n"
                 f"{md_table(header, [*vessels, ['Sea Swallow', 'Denmark', '52', '']])}\n\n"
                 f"{md_table(crew_header, crew)}\n\nThe harbour master keeps the full crew lists.\n")
    return page("Vessels in port", "".join(body)), reference


ARTICLE = [
    ("p", "The harbour board met on 2 March to agree the dredging programme for the coming year. "
          "Silt brought down by the winter floods has narrowed the channel at the river mouth, and "
          "larger vessels have had to wait for the high tide before they can enter."),
    ("h2", "What the survey found"),
    ("p", "The survey vessel sounded the channel on twelve days in February. Depths were below the "
          "charted figure along most of the outer bar, by up to a metre near the north beacon."),
    ("ul", ["The outer bar has lost about 0.8 m since last spring.",
            "The inner basin is close to its charted depth.",
            "The approach to the fish quay needs dredging before the summer season."]),
    ("h2", "The programme"),
    ("p", "Work starts in April and runs in three stages, each timed to avoid the herring landings."),
    ("ol", ["Clear the outer bar with the board's own dredger.",
            "Hire a contractor for the fish quay approach.",
            "Sound the whole channel again in September."]),
    ("table", (["Stage", "Area", "Volume (m3)", "Weeks"],
               [["1", "Outer bar", "42,000", "6"], ["2", "Fish quay approach", "9,500", "3"],
                ["3", "Whole channel survey", "-", "1"]])),
    ("h3", "Costs"),
    ("p", "The board set aside 1.2 million for the work; the contractor's share is about a third of it."),
    ("figure", ("The outer bar at low water, seen from the north beacon", "outer-bar.jpg",
                "Figure 1. The outer bar at low water in February.")),
    ("p", "Comments on the programme may be sent to the harbour office until 30 March."),
]


def article() -> tuple[bytes, str]:
    """An ordinary news article between a navigation bar and a footer."""
    title = "Dredging the harbour channel"
    html = [f"<article><h1>{title}</h1>"]
    md = [f"# {title}"]
    for kind, what in ARTICLE:
        if kind == "p":
            text = str(what)
            linked = text.replace("harbour office", '<a href="/office.html">harbour office</a>')
            html.append(f"<p>{linked}</p>")
            md.append(text.replace("harbour office", "[harbour office](/office.html)"))
        elif kind in ("h2", "h3"):
            html.append(f"<{kind}>{what}</{kind}>")
            md.append("#" * int(kind[1]) + f" {what}")
        elif kind in ("ul", "ol"):
            html.append(f"<{kind}>" + "".join(f"<li>{item}</li>" for item in what) + f"</{kind}>")
            md.append("\n".join(("- " if kind == "ul" else f"{i}. ") + item for i, item in enumerate(what, 1)))
        elif kind == "table":
            header, rows = what
            html.append("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr></thead><tbody>"
                        + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
                        + "</tbody></table>")
            md.append(md_table(header, rows))
        else:
            alt, src, caption = what
            html.append(f'<figure><img src="/images/{src}" alt="{alt}" width="640" height="400">'
                        f"<figcaption>{caption}</figcaption></figure>")
            md.append(f"![{alt}](/images/{src})\n\n{caption}")
    html.append("</article>")
    return page(title, "".join(html)), "\n\n".join(md) + "\n"


DOCUMENTS: dict[str, Callable[[], tuple[bytes, str]]] = {
    "headings_only.html": headings_only,
    "rowspan_label.html": rowspan_label,
    "nested_tables.html": nested_tables,
    "article.html": article,
}
