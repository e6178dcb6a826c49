"""The HTML parser across documentation generators, on synthetic pages in their shapes.

The pages are written here (never copied): Sphinx (classic and Read-the-Docs themes), MkDocs
Material, Docusaurus, Hugo (Docsy), DocBook (as PostgreSQL's manual), Asciidoctor (a git manual
page), Javadoc, rustdoc and MediaWiki. Each puts the same kinds of content (prose with
cross-references, a note, a code block, a definition list or an API entry, a list, a table) inside
the generator's own chrome (sidebars, breadcrumbs, previous/next bars, search boxes, permalink
signs). ``CHROME`` names, per page, texts only the chrome holds; ``CONTENT`` texts of the content
that a naive parse loses. Coverage is measured as ``bench/coverage.py`` measures real sites.
"""

from __future__ import annotations

import json

import pytest

from bench import coverage
from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import build_nodes
from laminae.tasks.parse.html import MAX_COMPONENT_CHARS, parse_html
from tests.conftest import Route

PROSE = (
    "Sessions keep a small amount of state for each visitor between requests. The framework stores the "
    "data on the server and sends the browser a cookie that holds only an opaque identifier, never the "
    "data itself, so that a visitor cannot read or change what the application remembers about them."
)
PROSE2 = (
    "Expired entries are removed by a periodic cleanup job; run it from a scheduler once a day, or more "
    "often on busy sites where the store grows quickly between two runs of the job."
)


def _options(n: int, start: str = "") -> list[tuple[str, str]]:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
             "kilo", "lima", "mike", "november", "oscar", "papa"]
    return [(f"{start}--{words[i]}", f"Turn on the {words[i]} behaviour for this command: every entry the "
             f"command touches is checked against the {words[i]} rules before it is written, and the "
             f"result is reported once the run ends.") for i in range(n)]


def sphinx_classic() -> str:
    glossary = "".join(
        f'<dt id="term-{t}">{t}<a class="headerlink" href="#term-{t}" title="Permalink to this term">¶</a></dt>'
        f"<dd><p>{d}</p></dd>" for t, d in _options(10))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Sessions &#8212; Demo 1.0 documentation</title>
<link rel="stylesheet" href="_static/classic.css"><script src="_static/doctools.js"></script></head>
<body>
<div class="related" role="navigation" aria-label="related navigation"><h3>Navigation</h3><ul>
<li class="right"><a href="genindex.html" title="General Index">index</a></li>
<li class="right"><a href="cache.html" title="Caching">next</a> |</li>
<li class="nav-item nav-item-0"><a href="index.html">Demo 1.0 documentation</a> &#187;</li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper"><div class="body" role="main">
<div class="section" id="sessions">
<h1>Sessions<a class="headerlink" href="#sessions" title="Permalink to this headline">¶</a></h1>
<p>{PROSE} Turn them on with the <a class="reference internal" href="middleware.html"><span class="doc">session
middleware</span></a> and the <a class="reference internal" href="settings.html#std-setting-SESSION_ENGINE"><code
class="xref std std-setting docutils literal notranslate"><span class="pre">SESSION_ENGINE</span></code></a> setting,
due to the <a class="reference internal" href="glossary.html#term-gil"><span class="xref std std-term">global
interpreter lock</span></a>.</p>
<div class="admonition warning"><p class="admonition-title">Warning</p>
<p>Never store secrets in a session backed by cookies: the browser keeps a copy of every value.</p></div>
<div class="section" id="using-sessions-in-views">
<h2>Using sessions in views<a class="headerlink" href="#using-sessions-in-views" title="Permalink">¶</a></h2>
<div class="highlight-python notranslate"><div class="highlight"><pre><span></span><span class="gp">&gt;&gt;&gt; </span><span class="kn">from</span> <span class="nn">demo.sessions</span> <span class="kn">import</span> <span class="n">SessionStore</span>
<span class="gp">&gt;&gt;&gt; </span><span class="n">s</span> <span class="o">=</span> <span class="n">SessionStore</span><span class="p">()</span>
<span class="gp">&gt;&gt;&gt; </span><span class="n">s</span><span class="p">[</span><span class="s1">'last_login'</span><span class="p">]</span> <span class="o">=</span> <span class="mi">1376587691</span>
</pre></div></div>
<dl class="function">
<dt id="demo.sessions.flush"><code class="descclassname">demo.sessions.</code><code class="descname">flush</code><span
class="sig-paren">(</span><em>request</em><span class="sig-paren">)</span><a class="reference internal"
href="_modules/demo/sessions.html#flush"><span class="viewcode-link">[source]</span></a><a class="headerlink"
href="#demo.sessions.flush" title="Permalink to this definition">¶</a></dt>
<dd><p>Deletes the current session data from the store and deletes the session cookie.</p>
<p>Use it when a visitor logs out, so that the next visitor on the same browser starts afresh.</p>
<table class="docutils field-list" frame="void" rules="none"><col class="field-name" /><col class="field-body" />
<tbody valign="top"><tr class="field-odd field"><th class="field-name">Parameters:</th><td class="field-body"><strong>request</strong>
&#8211; the request whose session ends</td></tr></tbody></table></dd></dl>
<p>{PROSE2}</p>
</div>
<div class="section" id="glossary"><h2>Glossary<a class="headerlink" href="#glossary" title="Permalink">¶</a></h2>
<dl class="glossary docutils">{glossary}</dl></div>
</div></div></div></div>
<div class="sphinxsidebar" role="navigation" aria-label="main navigation"><div class="sphinxsidebarwrapper">
<h3><a href="index.html">Table of Contents</a></h3><ul><li><a class="reference internal" href="#">Sessions</a></li></ul>
<h4>Previous topic</h4><p class="topless"><a href="middleware.html" title="previous chapter">Middleware</a></p>
<div id="searchbox" style="display: none" role="search"><h3 id="searchlabel">Quick search</h3>
<div class="searchformwrapper"><form class="search" action="search.html" method="get"><input type="text" name="q">
<input type="submit" value="Go"></form></div></div></div></div>
<div class="clearer"></div></div>
<div class="footer" role="contentinfo">&#169; Copyright 2024, Demo authors. Created using Sphinx 3.5.4.</div>
</body></html>"""


def sphinx_rtd() -> str:
    rows = "".join(f'<tr class="row-{"odd" if i % 2 else "even"}"><td><p>{k}</p></td><td><p>{v}</p></td></tr>'
                   for i, (k, v) in enumerate([("memory", "kept in the worker"), ("file", "one file a session"),
                                               ("cache", "the shared cache"), ("db", "a table of its own")]))
    return f"""<!DOCTYPE html>
<html class="writer-html5" lang="en"><head><meta charset="utf-8" /><title>Configuration &mdash; Demo 2.1 documentation</title>
<link rel="stylesheet" href="_static/css/theme.css" type="text/css" /><script src="_static/js/theme.js"></script></head>
<body class="wy-body-for-nav"><div class="wy-grid-for-nav">
<nav data-toggle="wy-nav-shift" class="wy-nav-side"><div class="wy-side-scroll"><div class="wy-side-nav-search">
<a href="index.html" class="icon icon-home">Demo</a><div role="search"><form id="rtd-search-form" class="wy-form"
action="search.html" method="get"><input type="text" name="q" placeholder="Search docs" /></form></div></div>
<div class="wy-menu wy-menu-vertical" data-spy="affix" role="navigation" aria-label="Navigation menu">
<p class="caption" role="heading"><span class="caption-text">Contents:</span></p><ul class="current">
<li class="toctree-l1 current"><a class="current reference internal" href="#">Configuration</a></li>
<li class="toctree-l1"><a class="reference internal" href="deploy.html">Deployment</a></li></ul></div></div></nav>
<section data-toggle="wy-nav-shift" class="wy-nav-content-wrap"><nav class="wy-nav-top" aria-label="Mobile navigation menu">
<i data-toggle="wy-nav-top" class="fa fa-bars"></i><a href="index.html">Demo</a></nav>
<div class="wy-nav-content"><div class="rst-content">
<div role="navigation" aria-label="Page navigation"><ul class="wy-breadcrumbs"><li><a href="index.html"
class="icon icon-home" aria-label="Home"></a></li><li class="breadcrumb-item active">Configuration</li>
<li class="wy-breadcrumbs-aside"><a href="_sources/config.rst.txt" rel="nofollow"> View page source</a></li></ul><hr/></div>
<div role="main" class="document" itemscope="itemscope" itemtype="http://schema.org/Article"><div itemprop="articleBody">
<section id="configuration">
<h1>Configuration<a class="headerlink" href="#configuration" title="Link to this heading">¶</a></h1>
<p>{PROSE} The <a class="reference internal" href="#demo.Client" title="demo.Client"><code class="xref py py-class docutils
literal notranslate"><span class="pre">Client</span></code></a> class reads its settings from the environment first.<a
class="footnote-reference brackets" href="#f1" id="id1" role="doc-noteref"><span class="fn-bracket">[</span>1<span
class="fn-bracket">]</span></a></p>
<div class="admonition note"><p class="admonition-title">Note</p><p>Settings given on the command line win over the
environment, and the environment wins over the configuration file.</p></div>
<section id="backends"><h2>Backends<a class="headerlink" href="#backends" title="Link to this heading">¶</a></h2>
<table class="docutils align-default" id="id2"><caption><span class="caption-text">Session backends</span><a
class="headerlink" href="#id2" title="Link to this table">¶</a></caption><thead><tr class="row-odd"><th class="head"><p>Name</p></th>
<th class="head"><p>Where the data lives</p></th></tr></thead><tbody>{rows}</tbody></table>
<div class="highlight-console notranslate"><div class="highlight"><pre><span></span><span class="gp">$ </span>demo<span class="w"> </span>config<span class="w"> </span>--backend<span class="w"> </span>file
<span class="gp">$ </span>demo<span class="w"> </span>config<span class="w"> </span>--show
</pre></div></div>
<dl class="py class">
<dt class="sig sig-object py" id="demo.Client"><em class="property"><span class="pre">class</span><span class="w"> </span></em><span
class="sig-prename descclassname"><span class="pre">demo.</span></span><span class="sig-name descname"><span
class="pre">Client</span></span><span class="sig-paren">(</span><em class="sig-param"><span class="n"><span
class="pre">backend</span></span><span class="o"><span class="pre">=</span></span><span class="default_value"><span
class="pre">'file'</span></span></em><span class="sig-paren">)</span><a class="headerlink" href="#demo.Client"
title="Link to this definition">¶</a></dt>
<dd><p>A client of the session store that opens one connection for each worker thread.</p>
<dl class="py method"><dt class="sig sig-object py" id="demo.Client.get"><span class="sig-name descname"><span
class="pre">get</span></span><span class="sig-paren">(</span><em class="sig-param"><span class="n"><span
class="pre">key</span></span></em><span class="sig-paren">)</span><a class="headerlink" href="#demo.Client.get"
title="Link to this definition">¶</a></dt><dd><p>Return the value stored under the given key, or raise a
lookup error when there is none.</p></dd></dl>
<dl class="field-list simple"><dt class="field-odd">Parameters<span class="colon">:</span></dt><dd class="field-odd">
<p><strong>backend</strong> &#8211; where the data lives, one of the names above</p></dd></dl></dd></dl>
<p>{PROSE2}</p>
</section>
<aside class="footnote-list brackets"><aside class="footnote brackets" id="f1" role="doc-footnote"><span class="label"><span
class="fn-bracket">[</span><a role="doc-backlink" href="#id1">1</a><span class="fn-bracket">]</span></span>
<p>The environment variables all start with the prefix of the application.</p></aside></aside>
</section></div></div>
<footer><div class="rst-footer-buttons" role="navigation" aria-label="Footer"><a href="install.html" class="btn
btn-neutral float-left" title="Installation" accesskey="p" rel="prev"><span class="fa fa-arrow-circle-left"
aria-hidden="true"></span> Previous</a><a href="deploy.html" class="btn btn-neutral float-right" title="Deployment"
accesskey="n" rel="next">Next <span class="fa fa-arrow-circle-right" aria-hidden="true"></span></a></div><hr/>
<div role="contentinfo"><p>&#169; Copyright 2024, Demo authors.</p></div>Built with <a href="https://www.sphinx-doc.org/">Sphinx</a>
using a <a href="https://github.com/readthedocs/sphinx_rtd_theme">theme</a> provided by Read the Docs.</footer>
</div></div></section></div>
<div class="rst-versions" data-toggle="rst-versions" role="note" aria-label="Versions"><span class="rst-current-version"
data-toggle="rst-current-version"><span class="fa fa-book"> Read the Docs</span> v: latest</span></div>
</body></html>"""


def mkdocs_material() -> str:
    options = "".join(f"<dt><code>{k}</code></dt><dd>{v}</dd>" for k, v in _options(3))
    return f"""<!doctype html>
<html lang="en" class="no-js"><head><meta charset="utf-8"><title>Install - Demo</title>
<link rel="stylesheet" href="../assets/stylesheets/main.css"></head>
<body dir="ltr"><input class="md-toggle" data-md-toggle="drawer" type="checkbox" id="__drawer" autocomplete="off">
<label class="md-overlay" for="__drawer"></label>
<div data-md-component="skip"><a href="#install" class="md-skip">Skip to content</a></div>
<header class="md-header" data-md-component="header"><nav class="md-header__inner md-grid" aria-label="Header">
<a href="../" title="Demo" class="md-header__button md-logo" aria-label="Demo"></a><div class="md-header__title">
<span class="md-ellipsis">Demo</span></div><div class="md-search" data-md-component="search" role="dialog">
<div class="md-search__inner" role="search"><form class="md-search__form" name="search"><input type="text"
class="md-search__input" name="query" aria-label="Search" placeholder="Search"></form></div></div></nav></header>
<div class="md-container" data-md-component="container"><main class="md-main" data-md-component="main">
<div class="md-main__inner md-grid">
<div class="md-sidebar md-sidebar--primary" data-md-component="sidebar" data-md-type="navigation"><div
class="md-sidebar__scrollwrap"><div class="md-sidebar__inner"><nav class="md-nav md-nav--primary"
aria-label="Navigation" data-md-level="0"><label class="md-nav__title" for="__drawer">Demo</label><ul
class="md-nav__list"><li class="md-nav__item"><a href="../" class="md-nav__link">Home page</a></li><li
class="md-nav__item md-nav__item--active"><a href="./" class="md-nav__link">Install</a></li></ul></nav></div></div></div>
<div class="md-sidebar md-sidebar--secondary" data-md-component="sidebar" data-md-type="toc"><div
class="md-sidebar__scrollwrap"><div class="md-sidebar__inner"><nav class="md-nav md-nav--secondary" aria-label="Table
of contents"><label class="md-nav__title" for="__toc">Table of contents</label><ul class="md-nav__list"><li
class="md-nav__item"><a href="#requirements" class="md-nav__link">Requirements</a></li></ul></nav></div></div></div>
<div class="md-content" data-md-component="content"><article class="md-content__inner md-typeset">
<a href="https://example.org/demo/edit/main/docs/install.md" title="Edit this page" class="md-content__button md-icon"><svg
xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path d="M10 20H6V4h7v5h5v3.1l2-2V8l-6-6H6"/></svg></a>
<h1 id="install">Install<a class="headerlink" href="#install" title="Permanent link">&para;</a></h1>
<p>{PROSE} See <a href="../configure/">the configuration guide</a> once the package is installed.</p>
<div class="admonition tip"><p class="admonition-title">Tip</p><p>Install into a virtual environment so that the
system packages stay as they are.</p></div>
<h2 id="requirements">Requirements<a class="headerlink" href="#requirements" title="Permanent link">&para;</a></h2>
<div class="language-bash highlight"><table class="highlighttable"><tr><td class="linenos"><div class="linenodiv"><pre><span></span><span class="normal"><a href="#__codelineno-0-1">1</a></span>
<span class="normal"><a href="#__codelineno-0-2">2</a></span></pre></div></td><td class="code"><div><pre><span></span><code><span class="go">python -m pip install demo-sessions</span>
<span class="go">demo --version</span>
</code></pre></div></td></tr></table></div>
<div class="language-python highlight"><pre id="__code_1"><span></span><code><span id="__span-1-1"><a id="__codelineno-1-1" name="__codelineno-1-1" href="#__codelineno-1-1"></a><span class="kn">import</span> <span class="nn">demo</span>
</span><span id="__span-1-2"><a id="__codelineno-1-2" name="__codelineno-1-2" href="#__codelineno-1-2"></a><span class="n">demo</span><span class="o">.</span><span class="n">run</span><span class="p">(</span><span class="n">port</span><span class="o">=</span><span class="mi">8000</span><span class="p">)</span>
</span></code></pre><button class="md-clipboard md-icon" title="Copy to clipboard" data-clipboard-target="#__code_1 > code"></button></div>
<details class="warning"><summary>Older Python versions</summary><p>Versions before 3.9 are not supported any
more; the last release that ran on them is kept on the archive page.</p></details>
<div class="tabbed-set tabbed-alternate" data-tabs="1:2"><input checked="checked" id="__tabbed_1_1" name="__tabbed_1"
type="radio"><input id="__tabbed_1_2" name="__tabbed_1" type="radio"><div class="tabbed-labels"><label
for="__tabbed_1_1">Linux</label><label for="__tabbed_1_2">Windows</label></div><div class="tabbed-content"><div
class="tabbed-block"><p>Use the system package manager to install the compiler first.</p></div><div
class="tabbed-block"><p>Use the installer from the release page, which brings its own compiler.</p></div></div></div>
<div class="md-typeset__scrollwrap"><div class="md-typeset__table"><table><thead><tr><th>Platform</th><th>Minimum
version</th></tr></thead><tbody><tr><td>Linux</td><td>glibc 2.28</td></tr><tr><td>Windows</td><td>10</td></tr></tbody></table></div></div>
<dl>{options}</dl>
<p>{PROSE2}</p>
<form class="md-feedback" name="feedback" hidden><fieldset><legend class="md-feedback__title">Was this page
helpful?</legend></fieldset></form>
</article></div></div><script>var tabs = document.querySelectorAll(".tabbed-set")</script></main>
<footer class="md-footer"><nav class="md-footer__inner md-grid" aria-label="Footer"><a href="../configure/"
class="md-footer__link md-footer__link--next" rel="next"><div class="md-footer__title"><span
class="md-footer__direction">Next</span><div class="md-ellipsis">Configure</div></div></a></nav><div
class="md-footer-meta md-typeset"><div class="md-copyright">Made with Material for MkDocs</div></div></footer></div>
</body></html>"""


def docusaurus() -> str:
    return f"""<!doctype html>
<html lang="en" dir="ltr" class="docs-wrapper plugin-docs docs-doc-page"><head><meta charset="UTF-8">
<title>Deploy | Demo</title><link rel="canonical" href="https://demo.example/docs/deploy"></head>
<body class="navigation-with-keyboard"><div id="__docusaurus"><div role="region" aria-label="Skip to main content"><a
class="skipToContent_fXgn" href="#__docusaurus_skipToContent_fallback">Skip to main content</a></div>
<nav aria-label="Main" class="navbar navbar--fixed-top"><div class="navbar__inner"><div class="navbar__items"><a
class="navbar__brand" href="/"><b class="navbar__title text--truncate">Demo</b></a><a class="navbar__item navbar__link"
href="/docs/intro">Tutorial</a></div><div class="navbar__items navbar__items--right"><div class="navbarSearchContainer_Bca1"><button
type="button" class="DocSearch DocSearch-Button" aria-label="Search"><span class="DocSearch-Button-Placeholder">Search</span></button></div></div></div></nav>
<div id="__docusaurus_skipToContent_fallback" class="main-wrapper mainWrapper_z2l0"><div class="docsWrapper_hBAB"><div class="docRoot_UBD9">
<aside class="theme-doc-sidebar-container docSidebarContainer_YfHR"><div class="sidebarViewport_aRkj"><div
class="sidebar_njMd"><nav aria-label="Docs sidebar" class="menu thin-scrollbar menu_SIkG"><ul class="theme-doc-sidebar-menu
menu__list"><li class="theme-doc-sidebar-item-link menu__list-item"><a class="menu__link" href="/docs/intro">Tutorial
intro</a></li></ul></nav></div></div></aside>
<main class="docMainContainer_TBSr"><div class="container padding-top--md padding-bottom--lg"><div class="row"><div
class="col docItemCol_VOVn"><div class="docItemContainer_Djhp"><article>
<nav class="theme-doc-breadcrumbs breadcrumbsContainer_Z_bl" aria-label="Breadcrumbs"><ul class="breadcrumbs"
itemscope="" itemtype="https://schema.org/BreadcrumbList"><li class="breadcrumbs__item"><a aria-label="Home page"
class="breadcrumbs__link" href="/">Home</a></li><li class="breadcrumbs__item breadcrumbs__item--active"><span
class="breadcrumbs__link">Deploy</span></li></ul></nav>
<div class="tocCollapsible_ETCw theme-doc-toc-mobile tocMobile_ITEo"><button type="button" class="clean-btn
tocCollapsibleButton_TO0P">On this page</button></div>
<div class="theme-doc-markdown markdown"><header><h1>Deploy</h1></header>
<p>{PROSE} The <a href="/docs/configure#store">store settings</a> apply to every deployment target.</p>
<h2 class="anchor anchorWithStickyNavbar_LWe7" id="build">Build<a href="#build" class="hash-link" aria-label="Direct
link to Build" title="Direct link to Build">&#8203;</a></h2>
<p>Build the static files once, then copy them to the server.</p>
<div class="language-bash codeBlockContainer_Ckt0 theme-code-block" style="--prism-color:#393A34"><div
class="codeBlockContent_biex"><pre tabindex="0" class="prism-code language-bash codeBlock_bY9V thin-scrollbar"
style="color:#393A34"><code class="codeBlockLines_e6Vv"><span class="token-line" style="color:#393A34"><span class="token
plain">npm run build</span><br></span><span class="token-line" style="color:#393A34"><span class="token
plain">npm run serve -- --port 3000</span><br></span></code></pre><div class="buttonGroup__atx"><button type="button"
aria-label="Copy code to clipboard" title="Copy" class="clean-btn"><span class="copyButtonIcons_eSgA" aria-hidden="true"><svg
viewBox="0 0 24 24"><path d="M19,21H8V7H19M19"></path></svg></span></button></div></div></div>
<div class="theme-admonition theme-admonition-caution admonition_xJq3 alert alert--warning"><div
class="admonitionHeading_Gvgb"><span class="admonitionIcon_Rf37"><svg viewBox="0 0 16 16"><path d="M8"></path></svg></span>caution</div><div
class="admonitionContent_BuS1"><p>The build folder is emptied before every build; keep nothing of your own in it.</p></div></div>
<h2 class="anchor anchorWithStickyNavbar_LWe7" id="targets">Targets<a href="#targets" class="hash-link" aria-label="Direct
link to Targets" title="Direct link to Targets">&#8203;</a></h2>
<table><thead><tr><th>Target</th><th>Command</th></tr></thead><tbody><tr><td>GitHub Pages</td><td><code>npm run
deploy</code></td></tr><tr><td>Static host</td><td><code>rsync -a build/ host:/srv/www</code></td></tr></tbody></table>
<ul><li>Set the base URL of the site before building it.</li><li>Serve the files over HTTPS only.</li></ul>
<p>{PROSE2}</p></div>
<footer class="theme-doc-footer docusaurus-mt-lg"><div class="theme-doc-footer-edit-meta-row row"><div class="col"><a
href="https://example.org/demo/edit/main/docs/deploy.md" target="_blank" rel="noopener noreferrer"
class="theme-edit-this-page">Edit this page</a></div></div></footer></article>
<nav class="pagination-nav docusaurus-mt-lg" aria-label="Docs pages"><a class="pagination-nav__link
pagination-nav__link--prev" href="/docs/configure"><div class="pagination-nav__sublabel">Previous</div><div
class="pagination-nav__label">Configure</div></a></nav></div></div>
<div class="col col--3"><div class="tableOfContents_bqdL thin-scrollbar theme-doc-toc-desktop"><ul class="table-of-contents
table-of-contents__left-border"><li><a href="#build" class="table-of-contents__link toc-highlight">Build</a></li><li><a
href="#targets" class="table-of-contents__link">Targets</a></li></ul></div></div></div></div></main></div></div></div>
<footer class="footer footer--dark"><div class="container container-fluid"><div class="footer__bottom text--center"><div
class="footer__copyright">Copyright © 2024 Demo, Inc. Built with Docusaurus.</div></div></div></footer></div>
</body></html>"""


def hugo_docsy() -> str:
    rows = "".join(f"<tr><td><code>{k}</code></td><td>{d}</td><td>{v}</td></tr>" for k, d, v in [
        ("port", "8080", "The port the server listens on."), ("host", "0.0.0.0", "The address it binds to."),
        ("workers", "4", "How many requests are served at once.")])
    return f"""<!doctype html>
<html itemscope itemtype="http://schema.org/WebPage" lang="en" class="no-js"><head><meta charset="utf-8">
<meta name="generator" content="Hugo 0.124.1"><title>Configuration | Demo</title></head>
<body class="td-page"><header><nav class="td-navbar js-navbar-scroll" data-bs-theme="dark"><div class="container-fluid
flex-column flex-md-row"><a class="navbar-brand" href="/"><span class="navbar-brand__name">Demo</span></a><div
class="td-navbar-nav-scroll ms-md-auto" id="main_navbar"><ul class="navbar-nav"><li class="nav-item"><a class="nav-link"
href="/docs/"><span>Documentation</span></a></li></ul></div><div class="td-search td-search--offline"><input
type="search" class="td-search__input form-control" placeholder="Search this site…" aria-label="Search this site…"
autocomplete="off"></div></div></nav></header>
<div class="container-fluid td-outer"><div class="td-main"><div class="row flex-xl-nowrap">
<aside class="col-12 col-md-3 col-xl-2 td-sidebar d-print-none"><div id="td-sidebar-menu" class="td-sidebar__inner"><nav
class="td-sidebar-nav collapse" id="td-section-nav"><ul class="td-sidebar-nav__section"><li><a
href="/docs/getting-started/">Getting started</a></li></ul></nav></div></aside>
<aside class="d-none d-xl-block col-xl-2 td-sidebar-toc d-print-none"><div class="td-page-meta ms-2 pb-1 pt-2 mb-0"><a
href="https://example.org/demo/edit/main/content/en/docs/config.md" class="td-page-meta--edit" target="_blank"
rel="noopener">Edit this page</a></div><div class="td-toc"><nav id="TableOfContents"><ul><li><a
href="#options">Options</a></li></ul></nav></div></aside>
<main class="col-12 col-md-9 col-xl-8 ps-md-5" role="main">
<nav aria-label="breadcrumb" class="td-breadcrumbs"><ol class="breadcrumb"><li class="breadcrumb-item"><a
href="/docs/">Documentation</a></li><li class="breadcrumb-item active" aria-current="page">Configuration</li></ol></nav>
<div class="td-content"><h1>Configuration</h1><div class="lead">How to configure the demo server.</div>
<header class="article-meta"></header>
<p>{PROSE} Read <a href="/docs/deploy/">the deployment page</a> for the production values.</p>
<h2 id="options">Options</h2>
<div class="highlight"><pre tabindex="0" class="chroma"><code class="language-toml" data-lang="toml"><span class="line"><span class="cl"><span class="nx">port</span> <span class="p">=</span> <span class="mi">8080</span>
</span></span><span class="line"><span class="cl"><span class="nx">host</span> <span class="p">=</span> <span class="s2">&#34;0.0.0.0&#34;</span>
</span></span></code></pre></div>
<div class="highlight"><div class="chroma"><table class="lntable"><tr><td class="lntd"><pre tabindex="0" class="chroma"><code><span class="lnt">1
</span><span class="lnt">2
</span></code></pre></td><td class="lntd"><pre tabindex="0" class="chroma"><code class="language-sh" data-lang="sh"><span class="line"><span class="cl">demo serve --config demo.toml
</span></span><span class="line"><span class="cl">demo reload
</span></span></code></pre></td></tr></table></div></div>
<div class="alert alert-warning" role="alert"><h4 class="alert-heading">Warning</h4>Restart the server after changing the
port; a reload keeps the old listener open.</div>
<h3 id="reference">Reference</h3>
<table><thead><tr><th>Key</th><th>Default</th><th>Description</th></tr></thead><tbody>{rows}</tbody></table>
<p>{PROSE2}</p>
<div class="td-page-meta__lastmod">Last modified March 3, 2024: <a href="https://example.org/demo/commit/abc1234">fix
the port default (abc1234)</a></div></div></main></div></div>
<footer class="td-footer row d-print-none"><div class="container-fluid"><div class="td-footer__copyright">&copy; 2024
The Demo Authors. All Rights Reserved.</div></div></footer></div></body></html>"""


def docbook() -> str:
    params = "".join(
        f'<dt><span class="term"><code class="literal">{k.upper().strip("-")}</code></span></dt><dd><p>{v}</p></dd>'
        for k, v in _options(5))
    return f"""<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd"><html
xmlns="http://www.w3.org/1999/xhtml"><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8" /><title>CREATE
WIDGET</title><link rel="stylesheet" type="text/css" href="stylesheet.css" /><meta name="generator" content="DocBook XSL
Stylesheets Vsnapshot" /><link rel="prev" href="sql-createview.html" title="CREATE VIEW" /></head><body id="docContent"
class="container-fluid col-10"><div class="navheader"><table width="100%" summary="Navigation header"><tr><th colspan="5"
align="center">CREATE WIDGET</th></tr><tr><td width="10%" align="left"><a accesskey="p" href="sql-createview.html"
title="CREATE VIEW">Prev</a> </td><td width="10%" align="left"><a accesskey="u" href="sql-commands.html" title="SQL
Commands">Up</a></td><th width="60%" align="center">SQL Commands</th><td width="10%" align="right"><a accesskey="h"
href="index.html" title="Demo 15 Documentation">Home</a></td><td width="10%" align="right"> <a accesskey="n"
href="sql-drop.html" title="DROP WIDGET">Next</a></td></tr></table><hr /></div><div class="refentry"
id="SQL-CREATEWIDGET"><div class="titlepage"></div><a id="id-1.9.3.99.1" class="indexterm"></a><div
class="refnamediv"><h2><span class="refentrytitle">CREATE WIDGET</span></h2><p>CREATE WIDGET — define a new widget</p></div>
<div class="refsynopsisdiv"><h2>Synopsis</h2><pre class="synopsis">
CREATE WIDGET <em class="replaceable"><code>name</code></em> [ SIZE <em class="replaceable"><code>size</code></em> ]
    [ OWNER <em class="replaceable"><code>role</code></em> ]
</pre></div>
<div class="refsect1" id="id-1.9.3.99.5"><h2>Description</h2><p><code class="command">CREATE WIDGET</code> defines a
new widget in the current database. {PROSE} See <a class="xref" href="widgets.html" title="Chapter 9. Widgets">Chapter
9</a> for the concepts.</p></div>
<div class="refsect1" id="id-1.9.3.99.6"><h2>Parameters</h2><div class="variablelist"><dl class="variablelist">{params}
<dt><span class="term"><em class="replaceable"><code>owner</code></em></span></dt><dd><p>The role that owns the widget.</p>
<p>Only a superuser can give a widget to another role; everyone else owns what they create.</p></dd></dl></div></div>
<div class="refsect1" id="id-1.9.3.99.7"><h2>Notes</h2><div class="note"><h3 class="title">Note</h3><p>A widget cannot
be moved to another schema once it holds data.</p></div><p>Widgets are dropped together with the schema that holds them.</p></div>
<div class="refsect1" id="id-1.9.3.99.8"><h2>Examples</h2><p>To create a widget of size ten:</p><pre class="programlisting">
CREATE WIDGET w1 SIZE 10;
CREATE WIDGET w2 SIZE 20 OWNER alice;
</pre><div class="table" id="WIDGET-SIZES"><p class="title"><strong>Table 9.1. Widget Sizes</strong></p><div
class="table-contents"><table class="table" summary="Widget Sizes" border="1"><colgroup><col /><col /></colgroup><thead><tr><th>Size</th>
<th>Meaning</th></tr></thead><tbody><tr><td>1</td><td>the smallest widget</td></tr><tr><td>100</td><td>the largest widget</td></tr></tbody></table></div></div>
<p>{PROSE2}</p></div></div>
<div class="navfooter"><hr /><table width="100%" summary="Navigation footer"><tr><td width="40%" align="left"><a
accesskey="p" href="sql-createview.html">Prev</a> </td><td width="20%" align="center"><a accesskey="u"
href="sql-commands.html">Up</a></td><td width="40%" align="right"> <a accesskey="n" href="sql-drop.html">Next</a></td></tr><tr><td
width="40%" align="left" valign="top">CREATE VIEW </td><td width="20%" align="center"><a accesskey="h"
href="index.html">Home</a></td><td width="40%" align="right" valign="top"> DROP WIDGET</td></tr></table></div></body></html>"""


def asciidoctor() -> str:
    options = "".join(
        f'<dt class="hdlist1">{k.replace("--", "-")[:2]}</dt><dt class="hdlist1">{k}</dt><dd><p>{v}</p></dd>'
        for k, v in _options(8))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8"><meta name="generator" content="Asciidoctor 2.0.20"><title>git-demo(1)</title>
<style>body{{font-family:sans-serif}}</style></head>
<body class="manpage"><div id="header"><h1>git-demo(1) Manual Page</h1><h2 id="_name">NAME</h2><div class="sectionbody">
<p>git-demo - Record demo changes to the repository</p></div></div>
<div id="content"><div class="sect1"><h2 id="_synopsis">SYNOPSIS</h2><div class="sectionbody"><div class="verseblock">
<pre class="content"><em>git demo</em> [-a | --interactive | --patch] [-m &lt;msg&gt;]
           [--amend] [--] [&lt;pathspec&gt;&#8230;&#8203;]</pre></div></div></div>
<div class="sect1"><h2 id="_description">DESCRIPTION</h2><div class="sectionbody"><div class="paragraph"><p>{PROSE}
See <a href="git-config.html">git-config(1)</a> for the variables it reads.</p></div>
<div class="olist arabic"><ol class="arabic"><li><p>by naming the files on the command line;</p></li><li><p>by
staging them first with <em>git add</em>.</p></li></ol></div></div></div>
<div class="sect1"><h2 id="_options">OPTIONS</h2><div class="sectionbody"><div class="dlist"><dl>{options}
<dt class="hdlist1">--amend</dt><dd><p>Replace the tip of the current branch by creating a new commit.</p><div
class="listingblock"><div class="content"><pre>$ git demo --amend -m "better message"</pre></div></div><div
class="paragraph"><p>The recorded tree is prepared as usual.</p></div></dd></dl></div>
<div class="admonitionblock note"><table><tr><td class="icon"><div class="title">Note</div></td><td class="content">The
options above can be given in any order, and the last of two contradicting options wins.</td></tr></table></div>
<div class="listingblock"><div class="content"><pre>$ git demo -a
$ git demo --amend</pre></div></div><div class="paragraph"><p>{PROSE2}</p></div></div></div></div>
<div id="footer"><div id="footer-text">Last updated 2024-01-01 10:00:00 UTC</div></div></body></html>"""


def javadoc() -> str:
    return f"""<!DOCTYPE HTML>
<html lang="en"><head><title>Widget (Demo 1.0 API)</title><meta name="generator" content="javadoc/ClassWriterImpl">
<link rel="stylesheet" type="text/css" href="../../stylesheet.css"><script type="text/javascript" src="../../script.js"></script></head>
<body class="class-declaration-page"><script type="text/javascript">var pathtoroot = "../../";</script>
<div class="flex-box"><header role="banner" class="flex-header"><nav role="navigation"><div class="top-nav" id="navbar-top">
<ul id="navbar-top-firstrow" class="nav-list" title="Navigation"><li><a href="../../index.html">Overview</a></li><li><a
href="package-summary.html">Package</a></li><li class="nav-bar-cell1-rev">Class</li></ul></div><div class="sub-nav"><div><ul
class="sub-nav-list"><li>Summary:&nbsp;</li><li><a href="#constructor-summary">Constr</a>&nbsp;|&nbsp;</li></ul></div><div
class="nav-list-search"><label for="search-input">SEARCH:</label><input type="text" id="search-input" value="search"
disabled="disabled"></div></div></nav></header>
<div class="flex-content"><main role="main"><div class="header"><div class="sub-title"><span
class="package-label-in-type">Package</span>&nbsp;<a href="package-summary.html">org.demo.util</a></div><h1 title="Class
Widget" class="title">Class Widget</h1></div>
<div class="inheritance" title="Inheritance Tree"><a href="../../java/lang/Object.html">java.lang.Object</a><div
class="inheritance">org.demo.util.Widget</div></div>
<section class="class-description" id="class-description"><hr><div class="type-signature"><span class="modifiers">public
class </span><span class="element-name type-name-label">Widget</span> <span class="extends-implements">extends
java.lang.Object</span></div><div class="block">A resizable widget. {PROSE} This class is not synchronized; wrap it with
<a href="Widgets.html#synchronizedWidget(org.demo.util.Widget)"><code>Widgets.synchronizedWidget</code></a> when threads share it.
<pre>   Widget w = new Widget();
   w.resize(3);
</pre></div>
<dl class="notes"><dt>Since:</dt><dd>1.2</dd></dl></section>
<section class="summary"><ul class="summary-list"><li><section class="method-summary" id="method-summary"><h2>Method
Summary</h2><div class="summary-table three-column-summary"><div class="table-header col-first">Modifier and Type</div><div
class="table-header col-second">Method</div><div class="table-header col-last">Description</div><div class="col-first
even-row-color"><code>int</code></div><div class="col-second even-row-color"><code><a href="#size()"
class="member-name-link">size</a>()</code></div><div class="col-last even-row-color"><div class="block">Returns the size of
this widget.</div></div><div class="col-first odd-row-color"><code>void</code></div><div class="col-second
odd-row-color"><code><a href="#resize(int)" class="member-name-link">resize</a>(int&nbsp;size)</code></div><div
class="col-last odd-row-color"><div class="block">Changes the size of this widget.</div></div></div></section></li></ul></section>
<section class="details"><ul class="details-list"><li><section class="method-details" id="method-detail"><h2>Method
Details</h2><ul class="member-list"><li><section class="detail" id="size()"><h3>size</h3><div class="member-signature"><span
class="modifiers">public</span>&nbsp;<span class="return-type">int</span>&nbsp;<span class="element-name">size</span>()</div>
<div class="block">Returns the size of this widget. The size is never negative and never larger than the capacity.</div>
<dl class="notes"><dt>Returns:</dt><dd>the size, in units</dd></dl></section></li><li><section class="detail"
id="resize(int)"><h3>resize</h3><div class="member-signature"><span class="modifiers">public</span>&nbsp;<span
class="return-type">void</span>&nbsp;<span class="element-name">resize</span><wbr><span class="parameters">(int&nbsp;size)</span></div>
<div class="block">Changes the size of this widget. {PROSE2}</div><dl class="notes"><dt>Parameters:</dt><dd><code>size</code>
- the new size</dd><dt>Throws:</dt><dd><code><a href="IllegalSizeException.html">IllegalSizeException</a></code> - if the
size is negative</dd></dl></section></li></ul></section></li></ul></section></main>
<footer role="contentinfo"><hr><p class="legal-copy"><small>Copyright &#169; 2024 Demo. All rights reserved.</small></p></footer></div></div>
</body></html>"""


def rustdoc() -> str:
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="generator" content="rustdoc">
<title>Widget in demo - Rust</title><link rel="stylesheet" href="../static.files/rustdoc.css"></head>
<body class="rustdoc struct"><nav class="mobile-topbar"><button class="sidebar-menu-toggle" title="show sidebar"></button></nav>
<nav class="sidebar"><div class="sidebar-crate"><h2><a href="../demo/index.html">demo</a><span class="version">0.1.0</span></h2></div>
<h2 class="location"><a href="#">Widget</a></h2><div class="sidebar-elems"><section><h3><a href="#implementations">Methods</a></h3><ul
class="block method"><li><a href="#method.new">new</a></li></ul></section></div></nav><div class="sidebar-resizer"></div>
<main><div class="width-limiter"><rustdoc-search></rustdoc-search><section id="main-content" class="content"><div
class="main-heading"><h1>Struct <a href="index.html">demo</a>::<wbr><a class="struct" href="#">Widget</a><button
id="copy-path" title="Copy item path to clipboard">Copy item path</button></h1><span class="out-of-band"><a class="src"
href="../src/demo/lib.rs.html#10-14">source</a> · </span></div>
<pre class="rust item-decl"><code>pub struct Widget {{ /* private fields */ }}</code></pre>
<details class="toggle top-doc" open><summary class="hideme"><span>Expand description</span></summary><div
class="docblock"><p>A widget that holds sessions. {PROSE} Pair it with a <a href="struct.Gadget.html" title="struct
demo::Gadget"><code>Gadget</code></a> to share it between threads.</p><h2 id="examples"><a class="doc-anchor"
href="#examples">§</a>Examples</h2><div class="example-wrap"><pre class="rust rust-example-rendered"><code><span class="kw">let </span>w = Widget::new(<span class="number">3</span>);
<span class="macro">assert_eq!</span>(w.size(), <span class="number">3</span>);</code></pre></div></div></details>
<h2 id="implementations" class="section-header">Implementations<a href="#implementations" class="anchor">§</a></h2><div
id="implementations-list"><details class="toggle implementors-toggle" open><summary><section id="impl-Widget"
class="impl"><a class="src rightside" href="../src/demo/lib.rs.html#16-30">source</a><a href="#impl-Widget"
class="anchor">§</a><h3 class="code-header">impl <a class="struct" href="struct.Widget.html" title="struct
demo::Widget">Widget</a></h3></section></summary><div class="impl-items"><details class="toggle method-toggle"
open><summary><section id="method.new" class="method"><a class="src rightside" href="../src/demo/lib.rs.html#18">source</a><h4
class="code-header">pub fn <a href="#method.new" class="fn">new</a>(size: <a class="primitive"
href="https://doc.rust-lang.org/nightly/std/primitive.usize.html">usize</a>) -&gt; Self</h4></section></summary><div
class="docblock"><p>Creates a widget of the given size. {PROSE2}</p><div class="warning"><p>Panics when the size is
zero.</p></div></div></details></div></details></div></section></div></main></body></html>"""


def mediawiki() -> str:
    return f"""<!DOCTYPE html>
<html class="client-nojs" lang="en" dir="ltr"><head><meta charset="UTF-8"><title>Widget theory - Wikipedia</title>
<link rel="canonical" href="https://en.wikipedia.org/wiki/Widget_theory"></head>
<body class="skin-vector-2022 mediawiki ltr sitedir-ltr ns-0 ns-subject page-Widget_theory action-view"><a
class="mw-jump-link" href="#bodyContent">Jump to content</a>
<div class="vector-header-container"><header class="vector-header mw-header"><div id="p-search" role="search"
class="vector-search-box-vue"><form action="/w/index.php" id="searchform"><input type="search" name="search"
placeholder="Search Wikipedia"></form></div></header></div>
<div class="mw-page-container"><div class="mw-page-container-inner"><div class="vector-main-menu-container"><div
id="mw-navigation"><nav id="mw-panel" class="vector-main-menu-landmark" aria-label="Site"><ul><li><a href="/wiki/Main_Page">Main
page</a></li></ul></nav></div></div>
<div class="mw-content-container"><main id="content" class="mw-body" role="main"><header class="mw-body-header
vector-page-titlebar"><h1 id="firstHeading" class="firstHeading mw-first-heading"><span class="mw-page-title-main">Widget
theory</span></h1></header><div id="bodyContent" class="vector-body"><div class="vector-body-before-content"><div
id="siteSub" class="noprint">From Wikipedia, the free encyclopedia</div></div>
<div id="mw-content-text" class="mw-body-content"><div class="mw-content-ltr mw-parser-output" lang="en" dir="ltr">
<div role="note" class="hatnote navigation-not-searchable">For the card game, see <a href="/wiki/Widget_(game)">Widget
(game)</a>.</div>
<table class="infobox"><tbody><tr><th colspan="2" class="infobox-above">Widget theory</th></tr><tr><th scope="row"
class="infobox-label">Field</th><td class="infobox-data">Engineering</td></tr><tr><th scope="row"
class="infobox-label">Introduced</th><td class="infobox-data">1921</td></tr></tbody></table>
<p><b>Widget theory</b> is the study of small interchangeable parts and of the sessions in which they are made.<sup
id="cite_ref-1" class="reference"><a href="#cite_note-1">&#91;1&#93;</a></sup> {PROSE}</p>
<meta property="mw:PageProp/toc" />
<div class="mw-heading mw-heading2"><h2 id="History">History</h2><span class="mw-editsection"><span
class="mw-editsection-bracket">[</span><a href="/w/index.php?title=Widget_theory&amp;action=edit&amp;section=1"
title="Edit section: History"><span>edit</span></a><span class="mw-editsection-bracket">]</span></span></div>
<p>The first widgets were made by hand in <a href="/wiki/Leeds">Leeds</a> and sold by weight.<sup id="cite_ref-2"
class="reference"><a href="#cite_note-2">&#91;2&#93;</a></sup> {PROSE2}</p>
<figure class="mw-default-size" typeof="mw:File/Thumb"><a href="/wiki/File:Widget.png" class="mw-file-description"><img
src="//upload.wikimedia.org/wikipedia/commons/thumb/a/ab/Widget.png/220px-Widget.png" decoding="async" width="220"
height="165" class="mw-file-element"></a><figcaption>An early widget, made in 1921</figcaption></figure>
<table class="wikitable"><caption>Widget output by decade</caption><tbody><tr><th>Decade</th><th>Widgets made</th></tr>
<tr><td>1920s</td><td>1,200</td></tr><tr><td>1930s</td><td>4,800</td></tr></tbody></table>
<dl><dt>Later period</dt></dl>
<ul><li>Mass production began in the 1950s.</li><li>Standard sizes were agreed in 1962.</li></ul>
<div class="mw-heading mw-heading2"><h2 id="References">References</h2><span class="mw-editsection"><span
class="mw-editsection-bracket">[</span><a href="/w/index.php?title=Widget_theory&amp;action=edit&amp;section=2"
title="Edit section: References"><span>edit</span></a><span class="mw-editsection-bracket">]</span></span></div>
<div class="reflist"><div class="mw-references-wrap"><ol class="references"><li id="cite_note-1"><span
class="mw-cite-backlink"><b><a href="#cite_ref-1">^</a></b></span> <span class="reference-text">Smith, J. (1990).
<i>Widgets</i>.</span></li></ol></div></div>
<div class="navbox-styles"><style>.mw-parser-output .navbox{{box-sizing:border-box}}</style></div><div role="navigation"
class="navbox" aria-labelledby="Widget_topics"><table class="nowraplinks navbox-inner"><tbody><tr><th scope="col"
class="navbox-title" colspan="2"><div id="Widget_topics">Widget topics</div></th></tr><tr><th
class="navbox-group">Types</th><td class="navbox-list"><ul><li><a href="/wiki/Gear">Gear</a></li></ul></td></tr></tbody></table></div>
</div></div><div class="printfooter">Retrieved from "https://en.wikipedia.org/w/index.php?title=Widget_theory"</div>
<div id="catlinks" class="catlinks"><div id="mw-normal-catlinks" class="mw-normal-catlinks"><a
href="/wiki/Help:Category">Categories</a>: <ul><li><a href="/wiki/Category:Engineering">Engineering</a></li></ul></div></div>
</div></main></div></div></div>
<div class="mw-footer-container"><footer id="footer" class="mw-footer" role="contentinfo"><ul id="footer-info"><li
id="footer-info-lastmod"> This page was last edited on 1 January 2024.</li></ul></footer></div></body></html>"""


PAGES = {
    "sphinx-classic": sphinx_classic,
    "sphinx-rtd": sphinx_rtd,
    "mkdocs-material": mkdocs_material,
    "docusaurus": docusaurus,
    "hugo-docsy": hugo_docsy,
    "docbook": docbook,
    "asciidoctor": asciidoctor,
    "javadoc": javadoc,
    "rustdoc": rustdoc,
    "mediawiki": mediawiki,
}

# texts only the chrome of each page holds (none may reach a component)
CHROME = {
    "sphinx-classic": ["Quick search", "Previous topic", "Created using Sphinx", "¶", "[source]", "Navigation"],
    "sphinx-rtd": ["Search docs", "View page source", "Previous", "Read the Docs", "Copyright", "¶", "Navigation menu"],
    "mkdocs-material": ["Skip to content", "Home page", "Table of contents", "Made with Material", "¶",
                        "Was this page helpful"],
    "docusaurus": ["Skip to main content", "Tutorial intro", "On this page", "Edit this page", "Previous",
                   "Copyright", "Home", "Build\nTargets"],
    "hugo-docsy": ["Search this site", "Getting started", "Edit this page", "All Rights Reserved", "Documentation"],
    "docbook": ["Prev", "Next", "Home", "SQL Commands", "DROP WIDGET"],
    "asciidoctor": ["Last updated"],
    "javadoc": ["Overview", "SEARCH", "Constr", "Copyright"],
    "rustdoc": ["show sidebar", "Copy item path", "Expand description", "§", "0.1.0", "source"],
    "mediawiki": ["Jump to content", "Search Wikipedia", "Main page", "From Wikipedia", "[1]", "[edit]", "edit",
                  "Smith, J.", "Widget topics", "Retrieved from", "Categories", "last edited", "card game"],
}
# texts the content holds that a naive parse loses (cross-references, notes, code lines)
CONTENT = {
    "sphinx-classic": ["session middleware", "SESSION_ENGINE", "global interpreter lock", "Warning: Never store",
                       ">>> s = SessionStore()\n>>> s['last_login'] = 1376587691"],
    "sphinx-rtd": ["The Client class", "Note: Settings given", "$ demo config --backend file\n$ demo config --show",
                   "The environment variables all start"],
    "mkdocs-material": ["Tip: Install into", "python -m pip install demo-sessions\ndemo --version",
                        "import demo\ndemo.run(port=8000)", "Older Python versions: Versions before 3.9"],
    "docusaurus": ["npm run build\nnpm run serve -- --port 3000", "caution: The build folder", "store settings"],
    "hugo-docsy": ["port = 8080\nhost = \"0.0.0.0\"", "demo serve --config demo.toml\ndemo reload",
                   "Warning: Restart the server", "the deployment page"],
    "docbook": ["CREATE WIDGET name [ SIZE size ]\n    [ OWNER role ]", "Note: A widget cannot be moved",
                "CREATE WIDGET w1 SIZE 10;\nCREATE WIDGET w2 SIZE 20 OWNER alice;", "owner: The role that owns"],
    "asciidoctor": ["git-demo - Record demo changes", "-a, --alpha: Turn on the alpha behaviour",
                    "Note: The options above", "$ git demo -a\n$ git demo --amend"],
    "javadoc": ["Widgets.synchronizedWidget", "   Widget w = new Widget();\n   w.resize(3);", "Returns the size of this widget. The size is never negative",
                "Parameters: size - the new size"],
    "rustdoc": ["let w = Widget::new(3);\nassert_eq!(w.size(), 3);", "pub struct Widget { /* private fields */ }",
                "Creates a widget of the given size."],
    "mediawiki": ["Widget theory is the study of small interchangeable parts", "made by hand in Leeds and sold by weight"],
}


def _parse(name: str):
    return parse_html(PAGES[name]().encode(), f"http://docs.test/{name}.html")


@pytest.mark.parametrize("name", sorted(PAGES))
def test_main_content_reaches_components_in_order(name):
    body = PAGES[name]().encode()
    page = coverage.page_coverage(body, f"http://docs.test/{name}.html")
    assert page.words > 120, "the fixture's main content is too small to measure"
    assert page.share >= 0.98, f"{name}: {page.found}/{page.words} words reach components; first missed: {page.missed!r}"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_no_long_components_but_tables_and_code(name):
    assert all(len(c.text) <= MAX_COMPONENT_CHARS for c in _parse(name).components if c.kind not in ("table", "code"))


@pytest.mark.parametrize("name", sorted(PAGES))
def test_chrome_stays_out(name):
    parsed = _parse(name)
    texts = [c.text for c in parsed.components] + [" > ".join(c.section_path) for c in parsed.components]
    leaked = [chrome for chrome in CHROME[name] for text in texts if chrome in text]
    assert not leaked, f"{name}: chrome reached the components: {leaked}"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_content_a_naive_parse_loses_is_kept(name):
    texts = [c.text for c in _parse(name).components]
    missing = [want for want in CONTENT[name] if not any(want in text for text in texts)]
    assert not missing, f"{name}: not in any component: {missing}\n" + "\n---\n".join(texts)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_code_blocks_stay_code(name):
    """Every <pre> is a code component, searched by runs of its lines, never split into sentences."""
    parsed = _parse(name)
    codes = [c for c in parsed.components if c.kind == "code"]
    if name != "mediawiki":
        assert codes, f"{name}: no code component"
    assert not any("\n" in c.text for c in parsed.components if c.kind == "paragraph" and c.segments is None)
    nodes = build_nodes(parsed, "d" * 32, FetchResult(url=parsed.url), ParseConfig())
    kinds = {c["id"]: c["kind"] for c in nodes.components}
    under_code = [s for s in nodes.subcomponents if kinds[s["parent_id"]] == "code"]
    assert all(s["kind"] == "lines" for s in under_code)
    assert len({s["parent_id"] for s in under_code}) == len(codes)
    for sub in under_code:
        parent = next(c for c in nodes.components if c["id"] == sub["parent_id"])
        assert parent["text"][sub["char_start"]:sub["char_end"]] == sub["text"]


def test_sphinx_api_entry_keeps_its_signature_with_its_description():
    parsed = _parse("sphinx-rtd")
    entry = next(c for c in parsed.components if "A client of the session store" in c.text)
    assert entry.text.startswith("class demo.Client(backend='file'): A client of the session store")
    assert entry.section_path[-1] == "class demo.Client(backend='file')"
    method = next(c for c in parsed.components if "Return the value stored" in c.text)
    assert method.text.startswith("get(key): Return the value")
    assert method.section_path[-2:] == ["Backends", "class demo.Client(backend='file')"]
    after = next(c for c in parsed.components if c.text.startswith("Expired entries"))
    assert after.section_path == ["Configuration", "Backends"], "a definition's term leaked past its item"


def test_long_definition_list_is_one_component_per_item():
    parsed = _parse("sphinx-classic")
    glossary = [c for c in parsed.components if c.section_path[-1:] == ["Glossary"]]
    assert len(glossary) == 10
    assert glossary[0].text.startswith("--alpha: Turn on the alpha behaviour")


def test_note_heading_does_not_become_the_section_after_it():
    parsed = _parse("docbook")
    after = next(c for c in parsed.components if c.text.startswith("Widgets are dropped"))
    assert after.section_path == ["Notes"]
    note = next(c for c in parsed.components if c.text.startswith("Note: "))
    assert note.section_path == ["Notes"]


def test_mediawiki_rules_still_hold():
    parsed = _parse("mediawiki")
    kinds = [c.kind for c in parsed.components]
    assert kinds.count("table") == 2 and kinds.count("image") == 1
    infobox = next(c for c in parsed.components if c.table_kind == "infobox")
    assert infobox.rows == [["Field", "Engineering"], ["Introduced", "1921"]]
    first = next(c for c in parsed.components if c.kind == "paragraph")
    assert first.text.startswith("Widget theory is the study of small interchangeable parts and of the sessions in "
                                 "which they are made. Sessions keep")


def test_coverage_bench_on_a_generated_site(tmp_path):
    """bench/coverage.py over a folder of generator pages: every page scored, none below 0.95; a
    page whose content the parser leaves out (an <aside> with no note in it) is listed below."""
    site = tmp_path / "site"
    (site / "deep").mkdir(parents=True)
    for name, page in PAGES.items():
        (site / "deep" / f"{name}.html").write_text(page(), encoding="utf-8")
    lost = "<p>" + " ".join(f"tangent{i}" for i in range(60)) + "</p>"
    (site / "aside.html").write_text(f"<html><body><main><h1>A</h1><p>{PROSE}</p><aside>{lost}</aside></main></body></html>")
    (site / "notes.txt").write_text("not a page")
    out = tmp_path / "coverage.json"
    assert coverage.main([str(site), "--json", str(out)]) == 0
    record = json.loads(out.read_text())[str(site)]
    summary = record["summary"]
    assert summary["pages"] == len(PAGES) + 1
    assert [url.rsplit("/", 1)[-1] for url, _ in summary["below"]] == ["aside.html"]
    assert summary["over_4000_not_table_or_code"] == 0
    scored = {p["url"].rsplit("/", 1)[-1]: p["share"] for p in record["pages"]}
    assert min(v for k, v in scored.items() if k != "aside.html") >= 0.98
    assert scored["aside.html"] < 0.5


def test_coverage_counts_words_in_order():
    assert coverage.in_order_share(["a", "b", "c", "d"], ["a", "c", "b", "d"]) == (3, 4)
    assert coverage.in_order_share(["x", "y"], []) == (0, 2)
    many = [f"w{i % 50}" for i in range(5000)]  # long, repetitive pages take the anchored path
    assert coverage.in_order_share(many, many[:2500] + ["gap"] + many[2500:]) == (5000, 5000)


def test_javadoc_summary_grid_is_a_table():
    parsed = _parse("javadoc")
    (table,) = [c for c in parsed.components if c.kind == "table"]
    assert table.header == ["Modifier and Type", "Method", "Description"]
    assert table.rows == [["int", "size()", "Returns the size of this widget."],
                          ["void", "resize(int size)", "Changes the size of this widget."]]
    assert table.section_path[-1] == "Method Summary"


def test_coverage_bench_on_a_seeds_file(tmp_path, server):
    """A seeds file mixes a file:// page, an http page (real HTTP on 127.0.0.1) and one that
    cannot be fetched (skipped, the run goes on)."""
    (tmp_path / "docbook.html").write_text(PAGES["docbook"](), encoding="utf-8")
    server.routes["/rtd.html"] = Route(body=PAGES["sphinx-rtd"]().encode())
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{(tmp_path / 'docbook.html').as_uri()}\n{server.url('/rtd.html')}\n{server.url('/gone.html')}\n")
    out = tmp_path / "coverage.json"
    assert coverage.main([str(seeds), "--json", str(out)]) == 0
    pages = json.loads(out.read_text())[str(seeds)]["pages"]
    assert [(p["url"].rsplit("/", 1)[-1], p["share"] >= 0.98) for p in pages] == [("docbook.html", True), ("rtd.html", True)]


def docbook_chapter_index() -> str:
    """A DocBook chapter's own page: the navigation bar, the chapter title and its table of contents."""
    entries = "".join(f'<dt><span class="sect1"><a href="widgets-{i}.html">9.{i}. Widget topic {i}</a></span></dt>'
                      for i in range(1, 6))
    return f"""<html><head><title>Chapter 9. Widgets</title></head><body id="docContent"><div class="navheader"><table
summary="Navigation header"><tr><td><a accesskey="p" href="prev.html">Prev</a></td><td><a accesskey="n"
href="widgets-1.html">Next</a></td></tr></table></div><div class="chapter" id="WIDGETS"><div class="titlepage"><div><div><h2
class="title">Chapter 9. Widgets</h2></div></div></div><div class="toc"><p><strong>Table of Contents</strong></p><dl
class="toc">{entries}</dl></div></div></body></html>"""


def test_a_chapter_page_holding_only_its_table_of_contents_is_a_warning_not_an_error(tmp_path):
    from laminae.tasks.config import BuildSettings
    from laminae.tasks.nodes.pages import parse_page
    from laminae.tasks.storage.rawstore import RawStore

    parsed = parse_html(docbook_chapter_index().encode(), "file:///site/widgets.html")
    assert parsed.components == [] and [w.split(":")[0] for w in parsed.warnings] == ["navigation_only"]
    raw = RawStore(str(tmp_path))
    pages = {"widgets.html": docbook_chapter_index(),
             "app.html": "<html><body><div id='app'></div><script>render()</script></body></html>"}
    rows = {}
    for name, html in pages.items():
        res = FetchResult(f"file:///site/{name}", content_type="text/html", raw_key=raw.put(html.encode()), status=200)
        nodes, problems, warnings = parse_page(res, str(tmp_path), BuildSettings(), "run")
        assert nodes is None and warnings == []
        rows[name] = [(p["stage"], p["reason"], p["severity"]) for p in problems]
    assert rows == {"widgets.html": [("parse", "navigation_only", "warning")],
                    "app.html": [("parse", "no_content", "error")]}
