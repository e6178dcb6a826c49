"""Write the sample site's PDF, ``examples/site/guild-report.pdf`` (a report the bakers page links
to), and the market poster picture, ``examples/site/images/market-poster.png``.

    .venv/bin/python examples/make_report_pdf.py

Its links are relative (``rye.html``), so they resolve to the site's pages on any host and port. Its
last page is a scanned letter (a picture, no text layer) that only OCR reads; the poster's words
are drawn into its pixels and written nowhere else on the site.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.scans import scanned_pdf, text_picture  # noqa: E402
from tests.support.synthetic_pdf import PdfWriter  # noqa: E402

SITE = Path(__file__).resolve().parent / "site"


def main() -> int:
    w = PdfWriter(title="Guild of Bakers: Annual Report 2025", running_header="Guild of Bakers - Annual Report 2025")
    w.heading("Guild of Bakers: Annual Report 2025", 1)
    w.paragraph("The guild counts 412 member bakeries in the region, nine more than a year ago. Most of them "
                "bake wheat and rye loaves every night; a growing share also sell sourdough, which members "
                "say now outsells the plain white tin loaf at weekend markets.")
    w.heading("Members and markets", 2)
    w.paragraph("Members sold at 38 weekly markets this year. The market committee keeps the calendar and "
                "the stall fees; see the market pages for the towns and days.", links={"market pages": "markets.html"})
    w.lines(["The apprenticeship scheme took on 57 new apprentices. Each of them learns to mix, sha-",
             "pe and bake over three years, with a written test on flour grades and a practical",
             "test on the night shift."])
    w.heading("Loaves sold", 3)
    w.table(["Loaf", "Loaves sold", "Change"],
            [["Rye", "1,204,310", "+4%"], ["Sourdough", "986,455", "+11%"], ["Baguette", "2,102,650", "-2%"],
             ["Wholemeal", "640,120", "+1%"]],
            caption="Table 1: loaves sold by members in 2025",
            links={"Sourdough": "sourdough.html"})
    w.image((SITE / "images" / "loaf.png").read_bytes(), caption="Figure 1: the guild's prize loaf, a dark rye",
            width=180, height=120)
    w.heading("Ovens and energy", 2)
    w.columns(2)
    w.paragraph("Energy was the largest cost after flour. Twenty members replaced old deck ovens with "
                "electric ones; the guild's oven guide compares the types.", links={"oven guide": "ovens.html"})
    w.paragraph("Wood-fired ovens remain in 31 bakeries, mostly in villages, where they are valued for the "
                "crust they give to rye bread.", links={"rye bread": "rye.html"})
    w.paragraph("Night shifts were shortened by half an hour in most bakeries after the guild agreed a new "
                "schedule with the bakers' union.")
    w.paragraph("Flour prices rose in spring and fell back after the harvest; members buy most of their "
                "flour from three mills in the valley.", links={"flour": "flour.html"})
    w.columns(1)
    w.heading("Outlook", 2)
    w.paragraph("Next year the guild will publish a glossary of baking terms for apprentices and open two "
                "more markets in the river towns.", links={"glossary": "glossary.html"})
    out = SITE / "guild-report.pdf"
    out.write_bytes(with_scanned_letter(w.tobytes()))
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    poster = SITE / "images" / "market-poster.png"
    poster.write_bytes(text_picture(["Harvest fair at Millbrook", "every first Saturday",
                                     "Stall fees: 14 shillings"], font_size=34, background="#f4e9d0", ink="#3b2a1a"))
    print(f"wrote {poster} ({poster.stat().st_size} bytes)")
    return 0


def with_scanned_letter(report: bytes) -> bytes:
    """The report with a scanned annex page appended: a letter as pixels only."""
    import pymupdf

    letter = scanned_pdf([["Annex: a letter from the Millers' Association", "",
                           "A hailstorm in June damaged the barley crop near Ashford,",
                           "so the mills will ration malting barley until the next harvest.", "",
                           "Members may order rye and spelt flour as usual."]], dpi=100, font_size=20)
    with pymupdf.open(stream=report, filetype="pdf") as doc, pymupdf.open(stream=letter, filetype="pdf") as scan:
        doc.insert_pdf(scan)
        return doc.tobytes(garbage=3, deflate=True)


if __name__ == "__main__":
    sys.exit(main())
