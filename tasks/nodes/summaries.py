"""Summarize: a document's sentences → a short layer-0 summary.

Reads the sentences of a document (in order) with their vectors, or its text for the model and
endpoint modes; ``summarize_stage`` writes each document row's ``summary``, ``text`` and
``search_text`` and returns the problems. Extractive (default): the sentences closest to the document's
centroid, picked with maximal marginal relevance for diversity, bounded in count and length,
returned in document order. ``seq2seq``: a transformers model. ``endpoint``: an OpenAI-compatible
chat endpoint (base URL, model, key from the environment) with timeouts, retries and a
concurrency limit; when it fails the caller falls back to extractive and records a warning.

A batch's summaries are made within ``batch_timeout_s``: past it the endpoint's requests still
out are cancelled, the seq2seq model starts no other document and the extractive mode none either,
and each document left keeps its lead text as summary (its first sentences, cut as the extractive
mode cuts: ``max_sentences``, ``max_chars``), with a ``summarize_timeout`` warning row each (a
row names one document, as the stage's other rows do). One document's own work (a model's
``generate``, an extractive pick) is not interrupted: bounded by ``input_chars`` and the summary's size.
"""

from __future__ import annotations

import asyncio
import math
import os
import time

import numpy as np

from laminae.schemas.errors import LaminaeError
from laminae.schemas.tables import error_row
from laminae.tasks.config import BuildSettings, SummarizeConfig
from laminae.tasks.model_runtime import loaded_once
from laminae.tasks.nodes.document_nodes import DocumentNodes


def extractive_summary(sentences: list[str], vectors: np.ndarray, cfg: SummarizeConfig) -> str | None:
    """Central, mutually diverse sentences of a document, in document order."""
    if not sentences:
        return None
    vecs = np.asarray(vectors, dtype=np.float32)
    centroid = vecs.mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    if norm == 0:
        return None
    relevance = vecs @ (centroid / norm)
    lengths = np.fromiter((len(t) for t in sentences), dtype=np.int64, count=len(sentences))
    chosen: list[int] = []
    size = 0
    open_ = np.ones(len(sentences), dtype=bool)  # candidates left
    lam = 1.0 - cfg.diversity
    while open_.any() and len(chosen) < cfg.max_sentences:
        order = np.flatnonzero(open_)
        if chosen:
            redundancy = (vecs[order] @ vecs[chosen].T).max(axis=1)
        else:
            redundancy = np.zeros(len(order), dtype=np.float32)
        scores = lam * relevance[order] - (1 - lam) * redundancy
        best = int(order[int(np.argmax(scores))])
        open_[best] = False
        if size + lengths[best] > cfg.max_chars and chosen:
            # the room only shrinks: no sentence this long fits later either (one pass, not one per sentence)
            open_ &= size + lengths <= cfg.max_chars
            continue
        chosen.append(best)
        size += int(lengths[best]) + 1
    text = " ".join(sentences[i] for i in sorted(chosen))
    return text[: cfg.max_chars].strip() or None


class SummaryLate(LaminaeError, TimeoutError):
    """A document whose summary was not made by the batch's deadline."""


def lead_summary(sentences: list[str], cfg: SummarizeConfig) -> str | None:
    """A document's first sentences, cut as ``extractive_summary`` cuts its picks: at most
    ``max_sentences``, and no sentence past the first that would overrun ``max_chars``."""
    chosen: list[str] = []
    size = 0
    for sentence in sentences[: cfg.max_sentences]:
        if chosen and size + len(sentence) > cfg.max_chars:
            break
        chosen.append(sentence)
        size += len(sentence) + 1
    return " ".join(chosen)[: cfg.max_chars].strip() or None


def seq2seq_summaries(texts: list[str], cfg: SummarizeConfig, device: str = "cpu",
                      deadline: float = math.inf) -> list[str | SummaryLate]:
    """Abstractive summaries by a local transformers seq2seq model (loaded once per process); the
    texts not begun by ``deadline`` (``time.monotonic``) get a ``SummaryLate``."""
    if not cfg.model:
        raise ValueError("summarize.mode=seq2seq needs summarize.model (a transformers id or local path)")

    def load():
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(cfg.model)
        model = AutoModelForSeq2SeqLM.from_pretrained(cfg.model).to(device).eval()
        return (tok, model)

    tok, model = loaded_once(("seq2seq", cfg.model, device), load)
    import torch

    limit = min(getattr(model.config, "max_position_embeddings", None) or 512, tok.model_max_length)
    out: list[str | SummaryLate] = []
    with torch.inference_mode():
        for text in texts:
            if time.monotonic() >= deadline:
                out.append(SummaryLate())
                continue
            enc = tok(text[: cfg.input_chars], return_tensors="pt", truncation=True, max_length=limit).to(device)
            ids = model.generate(**enc, max_new_tokens=max(16, cfg.max_chars // 4), num_beams=2)
            out.append(tok.decode(ids[0], skip_special_tokens=True).strip()[: cfg.max_chars])
    return out


class EndpointError(LaminaeError, RuntimeError):
    """The summary endpoint could not be used; the message says why. ``retryable``: the endpoint
    may answer if asked again (408, 429, 5xx)."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def _retryable(exc: BaseException) -> bool:
    import httpx

    if isinstance(exc, EndpointError):
        return exc.retryable
    return isinstance(exc, httpx.HTTPError | KeyError | IndexError | ValueError)  # network, or a garbled answer


async def _endpoint_async(texts: list[str], cfg: SummarizeConfig, seconds: float) -> list[str | BaseException]:
    import httpx
    from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

    if not cfg.base_url or not cfg.endpoint_model:
        raise EndpointError("summarize.mode=endpoint needs summarize.base_url and summarize.endpoint_model")
    key = os.environ.get(cfg.api_key_env, "")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = cfg.base_url.rstrip("/") + "/chat/completions"
    sem = asyncio.Semaphore(cfg.concurrency)

    async def one(client: httpx.AsyncClient, text: str) -> str:
        body = {
            "model": cfg.endpoint_model,
            "messages": [
                {"role": "system", "content": f"Summarize the document in at most {cfg.max_sentences} "
                 "sentences. Answer with the summary only."},
                {"role": "user", "content": text[: cfg.input_chars]},
            ],
            "temperature": 0,
        }
        retrying = AsyncRetrying(stop=stop_after_attempt(cfg.retries + 1), wait=wait_exponential(multiplier=0.2, max=10),
                                 retry=retry_if_exception(_retryable), reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    async with sem:  # not held while waiting to retry
                        resp = await client.post(url, json=body, headers=headers)
                    if resp.status_code in (408, 429) or resp.status_code >= 500:
                        raise EndpointError(f"HTTP {resp.status_code} from {url}", retryable=True)
                    if resp.status_code >= 400:
                        raise EndpointError(f"HTTP {resp.status_code} from {url}: {resp.text[:200]}")
                    return str(resp.json()["choices"][0]["message"]["content"]).strip()[: cfg.max_chars]
        except (httpx.HTTPError, EndpointError, KeyError, IndexError, ValueError) as exc:
            raise EndpointError(f"{type(exc).__name__}: {exc}") from None
        raise AssertionError("unreachable: tenacity returns or raises")

    async with httpx.AsyncClient(timeout=cfg.timeout, trust_env=False) as client:
        tasks = [asyncio.create_task(one(client, t)) for t in texts]
        if not tasks:
            return []
        _, late = await asyncio.wait(tasks, timeout=None if math.isinf(seconds) else max(seconds, 0))
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)  # cancelled before the client closes
        return [SummaryLate() if task in late else task.exception() or task.result() for task in tasks]


def endpoint_summaries(texts: list[str], cfg: SummarizeConfig, deadline: float = math.inf
                       ) -> list[str | BaseException]:
    """One summary per text from the chat endpoint; a failed text gets its exception instead, one
    not answered by ``deadline`` (``time.monotonic``) a ``SummaryLate``."""
    return asyncio.run(_endpoint_async(texts, cfg, deadline - time.monotonic()))


def summarize_stage(docs: list[DocumentNodes], settings: BuildSettings, run_id: str) -> list[dict]:
    """Set ``summary`` and ``text`` (title + summary) on each document row; returns problems."""
    cfg = settings.summarize
    deadline = time.monotonic() + cfg.batch_timeout_s
    problems: list[dict] = []
    by_doc: dict[str, tuple[list[str], list]] = {}
    for d in docs:
        sentences = [s for s in d.subcomponents if s["kind"] == "sentence"]
        by_doc[d.document["id"]] = ([s["text"] for s in sentences], [s["vector"] for s in sentences])
    abstractive: dict[str, str] = {}
    failed: dict[str, str] = {}  # documents whose abstractive summary failed: why
    with_text = [d for d in docs if by_doc[d.document["id"]][0]]
    if cfg.mode != "extractive" and with_text:
        full = [" ".join(by_doc[d.document["id"]][0]) for d in with_text]
        try:
            results = (seq2seq_summaries(full, cfg, deadline=deadline) if cfg.mode == "seq2seq"
                       else endpoint_summaries(full, cfg, deadline))
        except Exception as exc:
            results = [exc] * len(with_text)
        for d, res in zip(with_text, results, strict=True):
            if isinstance(res, SummaryLate):
                continue  # the lead text, below
            if isinstance(res, BaseException) or not res:
                failed[d.document["id"]] = f"{res}"
            else:
                abstractive[d.document["id"]] = res
    for d in docs:
        doc_id = d.document["id"]
        sentences, vectors = by_doc[doc_id]
        summary = abstractive.get(doc_id)
        if summary is None and sentences:
            late = time.monotonic() >= deadline
            summary = lead_summary(sentences, cfg) if late else extractive_summary(sentences, np.stack(vectors), cfg)
            if doc_id in failed:
                problems.append(error_row(run_id, d.document["url"], "summarize", f"{cfg.mode}_failed",
                                          f"{failed[doc_id]}; used the {'lead text' if late else 'extractive summary'}"
                                          " instead", severity="warning", document=doc_id))
            elif late:
                problems.append(error_row(run_id, d.document["url"], "summarize", "summarize_timeout",
                                          f"the batch's summaries ran past batch_timeout_s ({cfg.batch_timeout_s:g} s, "
                                          "LAMINAE_SUMMARIZE__BATCH_TIMEOUT_S): its lead text is its summary",
                                          severity="warning", document=doc_id))
        d.document["summary"] = summary
        title = d.document["title"] or ""
        d.document["text"] = f"{title}\n{summary}".strip() if summary else d.document["text"]
        d.document["search_text"] = d.document["text"]
    return problems
