"""End-to-end ranking on a documentation site: a how-to question in plain words over a small
synthetic site in Sphinx's shape (prose pages, a general index and a module index that are big
link tables holding every term of the site, and a single-page view of the whole manual, as
Sphinx's singlehtml builder writes it) ranks the paragraph that answers it first, on the page
that holds it with the least else around it, and the generated pages below it. Real pages
written by the test, a real build, the real model."""

from __future__ import annotations

from pathlib import Path

import pytest

import laminae

pytestmark = pytest.mark.slow
SETTINGS = {"crawl": {"backoff": 0.01, "retries": 0}, "embed": {"device": "cpu", "threads": 1}}

ANSWER = ("To remove an entry from the cache before its timeout runs out, call delete() with the entry's key; "
          "it returns True when the key was there and has now been removed.")
PAGES = {
    "topics/cache.html": ("Caching", [
        ("Setting up the cache", "The cache settings live in CACHES. Each backend keeps entries for the timeout "
                                 "given, three hundred seconds unless you say otherwise."),
        ("The low-level cache API", "You can store any picklable object: set() stores a value under a key for a "
                                    "timeout and get() reads it back, or None once the entry has expired."),
        ("Deleting entries", ANSWER),
        ("Cache versioning", "Every key may carry a version number, so that values written by an older "
                             "release of a program are not read by a newer one."),
    ]),
    "topics/sessions.html": ("Sessions", [
        ("Enabling sessions", "Sessions keep data about each visitor between requests. The session middleware "
                              "reads a cookie that holds the session key and loads the data it names."),
        ("Expiry", "A session expires when the browser closes or after an age you set; expired sessions are "
                   "removed from the store by the clearsessions command."),
    ]),
    "topics/signals.html": ("Signals", [
        ("Listening to signals", "A receiver is a function that is called each time a signal is sent, for "
                                 "instance every time a model instance is saved."),
        ("Disconnecting", "Call disconnect() to stop a receiver from being called; it returns True when a "
                          "receiver was removed."),
    ]),
    "ref/settings.html": ("Settings", [
        ("Core settings", "TIMEOUT is the number of seconds before a cache entry is considered stale. "
                          "KEY_PREFIX is a string prepended to every cache key."),
        ("Sessions", "SESSION_COOKIE_AGE is the age of session cookies, in seconds."),
    ]),
}
TERMS = ["cache", "entry", "entries", "timeout", "key", "keys", "delete()", "remove", "expire", "expired",
         "session", "signal", "receiver", "settings", "version", "store", "value", "get()", "set()", "backend",
         "middleware", "cookie", "disconnect()", "TIMEOUT", "KEY_PREFIX", "CACHES", "clearsessions", "age"]


def _chrome(body: str, title: str, depth: int) -> bytes:
    up = "../" * depth
    nav = "".join(f"<li class='toctree-l1'><a class='reference internal' href='{up}{path}'>{t}</a></li>"
                  for path, (t, _) in PAGES.items())
    return (f"<!doctype html><html lang='en'><head><title>{title}</title></head><body>"
            f"<div class='related' role='navigation'><ul><li><a href='{up}genindex.html'>index</a></li>"
            f"<li><a href='{up}py-modindex.html'>modules</a></li></ul></div>"
            f"<div class='document'><div class='documentwrapper'><div class='body' role='main'>{body}</div></div>"
            f"<div class='sphinxsidebar' role='navigation'><ul>{nav}</ul>"
            f"<div id='searchbox'><form action='{up}search.html'><input name='q'></form></div></div></div>"
            f"</body></html>").encode()


def _site(root: Path) -> None:
    for path, (title, sections) in PAGES.items():
        body = f"<section id='top'><h1>{title}<a class='headerlink' href='#top'>¶</a></h1>"
        for i, (heading, text) in enumerate(sections):
            body += (f"<section id='s{i}'><h2>{heading}<a class='headerlink' href='#s{i}'>¶</a></h2>"
                     f"<p>{text}</p></section>")
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(_chrome(body + "</section>", title, path.count("/")))
    rows = []
    owners = ["framework.cache.Cache", "framework.sessions.Session", "framework.signals.Signal", "framework.settings"]
    for i, term in enumerate(TERMS * 3):  # a general index, as Sphinx writes it: every term, its owner, targets
        links = ", ".join(f"<a href='{path}#s{j}'>[{j + 1}]</a>" for j, path in enumerate(PAGES) if (i + j) % 2)
        rows.append(f"<tr><td><ul><li><a href='{list(PAGES)[i % len(PAGES)]}#s0'>{term} ({owners[i % 4]} "
                    f"{'method' if '()' in term else 'attribute'})</a>, {links}</li></ul></td>"
                    f"<td><ul><li><a href='{list(PAGES)[(i + 1) % len(PAGES)]}'>{term} (cache entry, timeout "
                    f"{i})</a></li></ul></td></tr>")
    (root / "genindex.html").write_bytes(_chrome(
        f"<h1 id='index'>Index</h1><table class='indextable genindextable'>{''.join(rows)}</table>", "Index", 0))
    modules = "".join(f"<tr><td><a href='{path}'><code class='xref'>framework.{path.split('/')[1][:-5]}</code></a>"
                      f"</td><td><em>How to use {title.lower()}: cache entries, keys, timeouts, removal.</em></td></tr>"
                      for path, (title, _) in PAGES.items())
    (root / "py-modindex.html").write_bytes(_chrome(
        f"<h1>Python Module Index</h1><table class='indextable modindextable'>{modules}</table>",
        "Python Module Index", 0))
    whole = "".join(f"<section id='p{p}'><h1>{title}</h1>" + "".join(
        f"<section><h2>{heading}</h2><p>{text}</p></section>" for heading, text in sections) + "</section>"
        for p, (title, sections) in enumerate(PAGES.values()))
    (root / "singlehtml.html").write_bytes(_chrome(whole, "Documentation (one page)", 0))
    (root / "index.html").write_bytes(_chrome(
        "<h1>Documentation</h1><p>Start with the topics below.</p><div class='toctree-wrapper'><ul>"
        + "".join(f"<li><a class='reference internal' href='{p}'>{t}</a></li>" for p, (t, _) in PAGES.items())
        + "</ul></div>", "Documentation", 0))


def test_a_how_to_question_ranks_the_answering_paragraph_above_generated_and_aggregate_pages(tmp_path,
                                                                                              prefect_harness):
    from laminae.flows.build import build_index

    site = tmp_path / "site"
    site.mkdir()
    _site(site)
    index_dir = tmp_path / "index"
    result = build_index(seeds=str(site), index=str(index_dir), settings=SETTINGS)
    assert result["status"] == "success", result
    index = laminae.open(str(index_dir))
    comps = index.table("components").to_arrow().to_pylist()
    by_page = {(site / "genindex.html").as_uri(): "genindex", (site / "py-modindex.html").as_uri(): "modindex"}
    docs = {d["id"]: d["url"] for d in index.table("documents").to_arrow().to_pylist()}
    generated = [c for c in comps if docs[c["document_id"]] in by_page]
    assert any(c["kind"] == "table" and len(c["text"] or "") > 3000 for c in generated)  # a big navigation table

    hits = index.retrieve("How can I get rid of a cached value before it expires?", k=10)
    assert hits[0].kind == "paragraph" and "call delete() with the entry's key" in hits[0].text
    assert docs[hits[0].document_id] == (site / "topics" / "cache.html").as_uri()
    ranks = [i for i, h in enumerate(hits) if docs[h.document_id] in by_page]
    assert not ranks or min(ranks) > 0
    # the single page repeats every paragraph: its copies defer to the pages they come from
    single = (site / "singlehtml.html").as_uri()
    assert sum(docs[c["document_id"]] == single for c in comps) >= sum(len(s) for _, s in PAGES.values())
    assert not [h for h in hits if docs[h.document_id] == single]
    assert len({h.text for h in hits}) == len(hits)
    # a how-to question is answered by a page: each page's best component before any page's second
    pages = [h.document_id for h in hits]
    first_repeat = next((i for i, d in enumerate(pages) if d in pages[:i]), len(pages))
    assert first_repeat >= 3 and set(pages[first_repeat:]) <= set(pages[:first_repeat])
    plain = [h.document_id for h in index.retrieve("How can I get rid of a cached value before it expires?", k=10,
                                                    pages="any")]
    assert next(i for i, d in enumerate(plain) if d in plain[:i]) < first_repeat  # by score alone, a page repeats
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # asked within the single page alone, its own copy is what there is to return
    single_id = next(d for d, url in docs.items() if url == single)
    within = index.retrieve("How can I get rid of a cached value before it expires?", k=3, documents=[single_id])
    assert within and within[0].document_id == single_id and "call delete() with the entry's key" in within[0].text
