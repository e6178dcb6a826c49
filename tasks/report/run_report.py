"""What a build did, for people: a markdown summary of one run and a self-contained HTML report.

Reads an index directory (its published tables and the ``runs`` table); ``write_report`` writes
one HTML file (default ``<index>/report.html``) with inline SVG charts and no scripts or external
files: nodes per layer and kind, time per stage, throughput, errors by type, the largest
documents, the link graph's degree distribution, and the run history (the aggregations over the
published tables run in polars, lazily, over ``Index.frame``). ``run_markdown`` renders a run
summary for the Prefect artifact.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

import laminae
from laminae.schemas.storage import IndexFiles, storage_options

DEGREE_BUCKETS = [(0, 0), (1, 1), (2, 3), (4, 7), (8, 15), (16, 31), (32, 63), (64, None)]
COLORS = {"layer0": "#4c72b0", "layer1": "#55a868", "layer2": "#c44e52", "time": "#8172b2", "error": "#c44e52",
          "warning": "#dd8452", "rate": "#64b5cd", "out": "#4c72b0", "in": "#55a868", "size": "#937860"}


# -- markdown (Prefect artifact) ---------------------------------------------------------------
def run_markdown(summary: dict, index: str) -> str:
    """A run summary as markdown: counts per layer, edges, errors by stage, seconds per stage."""
    counts = summary.get("counts", {})
    lines = [f"# laminae run `{summary.get('run_id')}`: **{summary.get('status')}**", "",
             f"Index `{index}`, manifest {summary.get('manifest_version')}; "
             f"{summary.get('documents_indexed', 0)} documents indexed, {summary.get('embedded', 0)} items embedded, "
             f"{summary.get('reused_vectors', 0)} vectors reused.", "",
             "| layer | kind | rows |", "| --- | --- | ---: |",
             f"| 0 | document | {counts.get('documents', 0)} |"]
    lines += [f"| 1 | {k} | {v} |" for k, v in counts.get("components", {}).items()]
    lines += [f"| 2 | {k} | {v} |" for k, v in counts.get("subcomponents", {}).items()]
    lines += ["", "| edges | rows |", "| --- | ---: |"]
    lines += [f"| {k} | {v} |" for k, v in counts.get("edges", {}).items()]
    lines += [f"| links_to resolved in the corpus | {counts.get('links_to_resolved', 0)} |",
              f"| links_to to pages outside it | {counts.get('links_to_unresolved', 0)} |"]
    if summary.get("changes"):
        lines += ["", "Changes: " + ", ".join(f"{k} {v}" for k, v in summary["changes"].items())]
    for title, key in (("Errors", "errors_by_stage"), ("Warnings", "warnings_by_stage")):
        found = summary.get(key) or {}
        lines += ["", f"**{title}**: none"] if not found else [
            "", f"| {title.lower()}: stage:reason | count |", "| --- | ---: |",
            *[f"| {k} | {v} |" for k, v in sorted(found.items(), key=lambda kv: -kv[1])]]
    lines += ["", "| stage | seconds |", "| --- | ---: |"]
    lines += [f"| {k} | {v:.2f} |" for k, v in (summary.get("seconds_by_stage") or {}).items()]
    return "\n".join(lines) + "\n"


# -- charts --------------------------------------------------------------------------------------
def bar_chart(title: str, items: list[tuple[str, float]], color: str, unit: str = "", digits: int = 0) -> dict:
    """A horizontal bar chart's geometry (labels, bar widths, values) for the template's ``chart``."""
    row, label_w, bar_w = 22, 230, 380
    top = max((v for _, v in items), default=0.0) or 1.0
    bars = [{"y": 4 + i * row, "label": label, "short": label if len(label) <= 34 else label[:33] + "…",
             "width": max(bar_w * value / top, 1 if value else 0), "value": f"{value:,.{digits}f}"}
            for i, (label, value) in enumerate(items)]
    return {"title": title, "bars": bars, "color": color, "unit": unit, "row": row, "label_w": label_w,
            "width": label_w + bar_w + 110, "height": row * len(items) + 8}


# -- data --------------------------------------------------------------------------------------
def _columns(tbl, columns: list[str]):
    if tbl.count_rows() == 0:
        return None
    return tbl.search().select(columns).limit(None).to_arrow()


def _degree_histogram(degrees: pl.Series) -> list[tuple[str, float]]:
    """Documents per bucket of link degree (``DEGREE_BUCKETS``), empty buckets at the end left out."""
    out = []
    for low, high in DEGREE_BUCKETS:
        inside = degrees >= low if high is None else (degrees >= low) & (degrees <= high)
        label = f"{low}" if low == high else (f"{low}+" if high is None else f"{low}–{high}")
        out.append((f"{label} links", float(inside.sum())))
    while out and out[-1][1] == 0:
        out.pop()
    return out


def _link_degrees(opened) -> tuple[pl.Series, pl.Series]:
    """Out- and in-degree of every document along resolved links to other documents (a pair of
    documents counts once), aggregated by polars over the pinned tables."""
    pairs = (opened.frame("edges").filter((pl.col("kind") == "links_to") & pl.col("resolved"))
             .select(src="document_id", dst="dst_id").unique().filter(pl.col("src") != pl.col("dst")))
    ids = opened.frame(0).select("id")
    degrees = []
    for end in ("src", "dst"):
        per_document = pairs.group_by(end).agg(pl.len().alias("n"))
        degrees.append(ids.join(per_document, left_on="id", right_on=end, how="left")
                       .select(pl.col("n").fill_null(0)).collect()["n"])
    return degrees[0], degrees[1]


def gather(index: str) -> dict:
    """Everything the report shows, read from the index's published tables and its run history."""
    import lancedb

    db = lancedb.connect(index, storage_options=storage_options(index))
    runs_tbl = db.open_table("runs")
    history = _columns(runs_tbl, ["id", "flow", "status", "started_at", "finished_at", "manifest_version", "summary"])
    runs = sorted(history.to_pylist() if history is not None else [], key=lambda r: r["started_at"])
    for r in runs:
        r["summary"] = json.loads(r["summary"] or "{}")
    data: dict = {"index": index, "runs": runs, "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                  "errors": []}
    last = runs[-1] if runs else None
    errors_tbl = db.open_table("errors")  # the latest rows: a failed run publishes no manifest
    if last and errors_tbl.count_rows():
        rows = pl.from_arrow(errors_tbl.search().where(f"run_id = '{last['id']}'").select(
            ["stage", "reason", "severity"]).limit(None).to_arrow())
        counts = (rows.group_by("severity", "stage", "reason").agg(pl.len().alias("n"))
                  .sort(pl.col("severity") != "error", "n", "stage", "reason", descending=[False, True, False, False]))
        data["errors"] = [((sev, st, rs), n) for sev, st, rs, n in counts.iter_rows()]
    try:
        opened = laminae.open(index)
    except Exception as exc:  # no build has published yet: the history alone is still worth showing
        data["unpublished"] = str(exc)
        return data
    data["stats"] = opened.stats()
    data["manifest_version"] = opened.version
    docs = opened.frame(0)
    data["documents_by_kind"] = dict(docs.group_by("kind").agg(pl.len()).sort("kind").collect().iter_rows())
    data["largest"] = (docs.select("id", "kind", "title", "url", "n_components", "n_subcomponents")
                       .sort("n_subcomponents", "id", descending=[True, False], nulls_last=True)
                       .head(10).collect().to_dicts())
    out_degree, in_degree = _link_degrees(opened)
    data["out_degree"] = _degree_histogram(out_degree)  # documents per bucket of degree
    data["in_degree"] = _degree_histogram(in_degree)
    return data


# -- page --------------------------------------------------------------------------------------
def render(data: dict) -> str:
    """The report page for ``gather``'s data (the layout is ``templates/report.html.j2``)."""
    runs = data["runs"]
    last = runs[-1] if runs else None
    summary = last["summary"] if last else {}
    seconds_all = summary.get("seconds_by_stage", {})
    seconds = {k: v for k, v in seconds_all.items() if k != "total"}
    charts: dict[str, dict] = {}
    stats = data.get("stats")
    if stats:
        nodes = [(f"document ({k})", float(v)) for k, v in sorted(data["documents_by_kind"].items())]
        charts["nodes"] = bar_chart("Nodes per layer and kind", nodes
                                    + [(f"component: {k}", float(v)) for k, v in stats["components"].items()]
                                    + [(f"subcomponent: {k}", float(v)) for k, v in stats["subcomponents"].items()],
                                    COLORS["layer1"])
        charts["edges"] = bar_chart("Edges", [(k, float(v)) for k, v in stats["edges"].items()]
                                    + [("links_to resolved in corpus", float(stats["links_to_resolved"])),
                                       ("links_to outside the corpus", float(stats["links_to_unresolved"]))],
                                    COLORS["layer0"])
        charts["largest"] = bar_chart("Subcomponents per document (top 10)",
                                      [(d["title"] or d["url"], float(d["n_subcomponents"] or 0)) for d in data["largest"]],
                                      COLORS["size"])
        charts["out_degree"] = bar_chart("Out-degree", data["out_degree"], COLORS["out"])
        charts["in_degree"] = bar_chart("In-degree", data["in_degree"], COLORS["in"])
    if last:
        charts["seconds"] = bar_chart("Seconds per stage", sorted(seconds.items(), key=lambda kv: -kv[1]),
                                      COLORS["time"], " s", 2)
        rates = []
        total = seconds_all.get("total") or 0
        if total:
            rates.append(("documents indexed per second (whole run)", summary.get("documents_indexed", 0) / total))
        if seconds.get("crawl"):
            rates.append(("pages fetched per second (crawl)", summary.get("pages_fetched", 0) / seconds["crawl"]))
        if seconds.get("parse"):
            rates.append(("documents parsed per second (parse)", summary.get("documents_indexed", 0) / seconds["parse"]))
        if seconds.get("embed") and summary.get("embedded"):
            rates.append(("items embedded per second (embed)", summary["embedded"] / seconds["embed"]))
        charts["throughput"] = bar_chart("Throughput", rates, COLORS["rate"], "/s", 1)
        errs = data.get("errors", [])
        charts["errors"] = bar_chart("Errors by stage and reason",
                                     [(f"{st}: {rs}", float(n)) for (sev, st, rs), n in errs if sev == "error"],
                                     COLORS["error"])
        charts["warnings"] = bar_chart("Warnings by stage and reason",
                                       [(f"{st}: {rs}", float(n)) for (sev, st, rs), n in errs if sev == "warning"],
                                       COLORS["warning"])
    charts["runs"] = bar_chart("Seconds per run", [(f"{r['started_at']:%Y-%m-%d %H:%M} {r['flow']}",
                                                    float(r["summary"].get("seconds_by_stage", {}).get("total", 0)))
                                                   for r in runs[-30:]], COLORS["time"], " s", 1)
    run_rows = [[f"{r['started_at']:%Y-%m-%d %H:%M:%S}", r["flow"], r["status"],
                 f"{r['summary'].get('seconds_by_stage', {}).get('total', 0):.1f}",
                 r["summary"].get("documents_indexed", 0), r["summary"].get("embedded", 0),
                 sum((r["summary"].get("errors_by_stage") or {}).values()), r["manifest_version"], r["id"]]
                for r in reversed(runs)]
    largest_rows = [[d["title"], d["kind"], d["n_components"], d["n_subcomponents"], d["url"]]
                    for d in data.get("largest", [])]
    return _template().render(index=data["index"], manifest_version=data.get("manifest_version", "–"),
                              generated=data["generated"], last=last, summary=summary,
                              total=seconds_all.get("total", 0), unpublished=data.get("unpublished"),
                              charts=charts, largest_rows=largest_rows, run_rows=run_rows) + "\n"


def _template():
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("laminae.tasks.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=False)
    return env.get_template("report.html.j2")


def write_report(index: str, out: str | Path | None = None) -> str:
    """Write the index's HTML report (default ``<index>/report.html``, also on object storage);
    returns where it went."""
    files = IndexFiles(index)
    if not files.exists("runs.lance"):
        raise FileNotFoundError(f"{index} is not a laminae index (no runs table); build it with `laminae build`")
    page = render(gather(index))
    if out is None:
        files.write_text("report.html", page)
        return f"{files.uri}/report.html"
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return str(path)
