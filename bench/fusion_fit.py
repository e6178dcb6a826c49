"""Fit the learned fusion's weights (``laminae/fusion.py``) on both development sets.

Reads ``../shared/bench/wtq-dev`` and ``../shared/bench/hybridqa-dev`` (questions, the shared
scorer's matcher) and their indexes (built with ``laminae build`` defaults as ``bench/quality.py``
builds them, or given with ``--index SET=DIR``); writes nothing unless ``--write``, which puts the
fitted weights into ``laminae/fusion.py``. For every question the reader gathers its evidence for
every component any ranking found (``Index._fusion_evidence``, the code ``retrieve`` runs) and the
set's matcher labels which components are gold. A logistic regression (scikit-learn, standardized
features, L2 with ``--c``) is fitted over both sets with each set weighing the same in total; 5-fold
cross-validation (the same folds for every model) prints R@10 and MRR@10 of reciprocal
rank fusion, of the weights in ``laminae/fusion.py`` now, and of the refitted weights, per set, on
the questions each fold held out; a fold holds out whole pages (the gold page of its questions), so
these numbers are for pages the fit never saw.

    .venv/bin/python bench/fusion_fit.py --index wtq-dev=DIR --index hybridqa-dev=DIR [--write]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import laminae  # noqa: E402
from laminae import fusion  # noqa: E402
from laminae.index import rrf  # noqa: E402

SHARED = ROOT.parent / "shared" / "bench"
SETS = {"wtq-dev": 0, "hybridqa-dev": 1}  # name: --follow-links
FOLDS = 5


def scorer_module(bench: Path):
    spec = importlib.util.spec_from_file_location(f"score_{bench.name.replace('-', '_')}", bench / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gather(name: str, index_dir: Path) -> list[dict]:
    """Per question: candidate rows, their features and kinds, the RRF order, gold labels per gold
    item, the question's (first) gold page."""
    bench = SHARED / name
    score = scorer_module(bench)
    pages = score.Pages(str(bench))
    index = laminae.open(str(index_dir))
    g = index.graph
    comps = g.layers[1]
    rows = np.arange(len(comps.ids))
    out = []
    for line in (bench / "questions.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        text = q["question"]
        golds = score.gold_items(q, pages, "component")
        lists, ev, _ = index._fusion_evidence(text, index._query_vector(text), rows, None, 2)
        labels = np.zeros((len(ev.rows), len(golds)), dtype=bool)
        for i, row in enumerate(ev.rows.tolist()):
            doc = pages(g.urls[int(comps.doc[row])].as_py())
            labels[i] = [gold.hit(doc, comps.text[row].as_py() or "", None, strip=pages.title.get(doc))
                         for gold in golds]
        fused_rows, _ = rrf(lists)
        rrf_rank = {r: i for i, r in enumerate(fused_rows.tolist())}
        out.append({"rows": ev.rows, "x": fusion.features(ev), "kinds": ev.kinds, "labels": labels,
                    "rrf": -np.array([rrf_rank[r] for r in ev.rows.tolist()], dtype=np.float64),
                    "page": min(gold.doc or "" for gold in golds) if golds else q["qid"],
                    "question": fusion.is_question(text)})
    return out


def design(item: dict) -> np.ndarray:
    """Features plus one indicator column per kind with a prior (all zero for a keyword query,
    which gets no prior when served)."""
    on = float(item.get("question", True))
    return np.column_stack([item["x"], *[on * (item["kinds"] == k) for k in fusion.KINDS]])


def served(item: dict, weights=None, prior=None, intercept=None) -> np.ndarray:
    """The scores the reader gives the item's candidates."""
    return fusion.scores(item["x"], item["kinds"], weights, prior, intercept, question=item.get("question", True))


def quality(items: list[dict], scores: list[np.ndarray]) -> tuple[float, float]:
    """(R@10 over gold items, MRR@10 of the first gold component)."""
    recall = mrr = 0.0
    for item, s in zip(items, scores, strict=True):
        top = np.lexsort((item["rows"], -s))[:10]
        labels = item["labels"][top]
        recall += labels.any(axis=0).mean() if labels.shape[1] else 0.0
        first = np.flatnonzero(labels.any(axis=1))
        mrr += 1.0 / (first[0] + 1) if len(first) else 0.0
    return recall / len(items), mrr / len(items)


def fit(sets: dict[str, list[dict]], c: float) -> tuple[np.ndarray, dict[str, float], float]:
    """(feature weights, kind priors, intercept) on the original feature scale."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([design(i) for items in sets.values() for i in items])
    y = np.concatenate([i["labels"].any(axis=1) for items in sets.values() for i in items])
    total = sum(len(items) for items in sets.values())
    weight = np.concatenate([np.full(len(i["rows"]), total / (len(sets) * len(items)))
                             for items in sets.values() for i in items])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=c, max_iter=5000).fit((x - mean) / scale, y, sample_weight=weight)
    coef = model.coef_[0] / scale
    intercept = float(model.intercept_[0] - coef @ mean)
    n = len(fusion.FEATURES)
    return coef[:n], dict(zip(fusion.KINDS, coef[n:].tolist(), strict=True)), intercept


def page_folds(items: list[dict], rng: np.random.Generator) -> list[np.ndarray]:
    """``FOLDS`` folds of question positions, every question about one page in the same fold, so a
    held-out question's page was never seen in training."""
    pages = sorted({item.get("page", str(i)) for i, item in enumerate(items)})
    fold_of = dict(zip([pages[i] for i in rng.permutation(len(pages))], np.arange(len(pages)) % FOLDS, strict=True))
    return [np.array([i for i, item in enumerate(items) if fold_of[item.get("page", str(i))] == f], dtype=np.int64)
            for f in range(FOLDS)]


def cross_validate(sets: dict[str, list[dict]], c: float) -> dict[str, dict[str, tuple[float, float]]]:
    rng = np.random.default_rng(0)
    folds = {name: page_folds(items, rng) for name, items in sets.items()}
    held: dict[str, tuple[list[dict], list[np.ndarray]]] = {name: ([], []) for name in sets}
    for f in range(FOLDS):
        train = {name: [items[i] for i in range(len(items)) if i not in set(folds[name][f].tolist())]
                 for name, items in sets.items()}
        weights, prior, intercept = fit(train, c)
        for name, items in sets.items():
            for i in folds[name][f].tolist():
                held[name][0].append(items[i])
                held[name][1].append(served(items[i], weights, prior, intercept))
    out = {}
    for name, items in sets.items():
        out[name] = {
            "reciprocal rank fusion": quality(items, [i["rrf"] for i in items]),
            f"fusion.py now ({fusion.WEIGHTS_VERSION})": quality(items, [served(i) for i in items]),
            f"refit, held-out pages ({FOLDS} folds)": quality(*held[name]),
        }
    return out


def write_weights(weights: np.ndarray, prior: dict[str, float], intercept: float, version: str) -> None:
    path = ROOT / "laminae" / "fusion.py"
    text = path.read_text()
    block = (f'WEIGHTS_VERSION = "{version}"\n'
             f"WEIGHTS = np.array([{', '.join(f'{w:.6g}' for w in weights)}])\n"
             f"KIND_PRIOR = {{{', '.join(f'{k!r}: {v:.6g}' for k, v in prior.items())}}}\n"
             f"INTERCEPT = {intercept:.6g}\n")
    new, count = re.subn(r'WEIGHTS_VERSION = .*?\nINTERCEPT = [^\n]*\n', block, text, flags=re.S)
    if count != 1:
        raise SystemExit(f"could not find the weights block in {path}")
    path.write_text(new)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", action="append", default=[], metavar="SET=DIR",
                        help="the index built for SET (default: build one, as bench/quality.py does)")
    parser.add_argument("--c", type=float, default=0.1, help="inverse L2 strength of the regression")
    parser.add_argument("--write", metavar="VERSION", help="write the refitted weights into laminae/fusion.py")
    args = parser.parse_args()
    given = dict(item.split("=", 1) for item in args.index)
    sets = {}
    for name, follow in SETS.items():
        if not (SHARED / name / "questions.jsonl").exists():
            parser.error(f"{SHARED / name} is missing: the development sets live in ../shared/bench")
        index_dir = Path(given[name]) if name in given else None
        if index_dir is None:
            from bench.quality import build_index

            index_dir = Path(tempfile.mkdtemp(prefix="laminae-fit-")) / f"index-{name}"
            build_index(SHARED / name, index_dir, follow)
        sets[name] = gather(name, index_dir)
        print(f"{name}: {len(sets[name])} questions, {sum(len(i['rows']) for i in sets[name])} candidates",
              flush=True)
    for name, rows in cross_validate(sets, args.c).items():
        print(f"\n{name}{'':<28}R@10   MRR@10")
        for label, (recall, mrr) in rows.items():
            print(f"  {label:<34}{recall:.3f}  {mrr:.3f}")
    weights, prior, intercept = fit(sets, args.c)
    print("\nfitted on all questions:")
    for feature, w in zip(fusion.FEATURES, weights.tolist(), strict=True):
        print(f"  {feature:<28}{w:+.4f}")
    for kind, w in prior.items():
        print(f"  prior {kind:<22}{w:+.4f}")
    print(f"  intercept{'':<19}{intercept:+.4f}")
    if args.write:
        write_weights(weights, prior, intercept, args.write)
        print(f"written into laminae/fusion.py as version {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
