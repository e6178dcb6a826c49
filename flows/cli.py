"""The ``laminae`` command line: build, refresh, serve, stats, report, demo; search, documents,
components, hop, get; mcp.

Reads command-line options, ``LAMINAE_*`` environment variables and a seeds file; writes the
index directory (build, demo) and prints a summary. Exit status: 0 success or partial success
(``--strict`` makes partial 1), 1 failure, 2 bad usage.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from laminae import flows  # noqa: F401 - sets Prefect's quiet offline defaults before Prefect is imported
from laminae.flows import prefect_api


def _print_stats(stats: dict, out=None) -> None:
    out = out or sys.stdout  # looked up per call: a default bound at import outlives a redirected stdout
    print(f"documents       {stats['documents']}", file=out)
    for layer in ("components", "subcomponents", "edges"):
        parts = ", ".join(f"{k} {v}" for k, v in stats[layer].items())
        print(f"{layer:<15} {sum(stats[layer].values())} ({parts})", file=out)
    print(f"links_to        {stats['links_to_resolved']} resolved in corpus, "
          f"{stats['links_to_unresolved']} to pages outside it", file=out)
    if stats.get("errors_by_stage"):
        print("errors          " + ", ".join(f"{k} {v}" for k, v in stats["errors_by_stage"].items()), file=out)
    if stats.get("warnings_by_stage"):
        print("warnings        " + ", ".join(f"{k} {v}" for k, v in stats["warnings_by_stage"].items()), file=out)
    emb = stats.get("embedder") or {}
    if emb:
        print(f"embedder        {emb.get('model_id')} ({emb.get('dim')}-d, images: {emb.get('image_mode')})", file=out)
    run = stats.get("last_run") or {}
    if run:
        secs = run.get("seconds_by_stage", {})
        print(f"last run        {run.get('run_id')}: {run.get('status')}, {run.get('documents_indexed')} documents, "
              f"{run.get('embedded')} embedded, {secs.get('total', 0):.1f} s", file=out)
        if secs:
            print("seconds         " + ", ".join(f"{k} {v:.2f}" for k, v in secs.items() if k != "total"), file=out)


def _settings(args: argparse.Namespace) -> dict:
    crawl: dict = {}
    if args.no_robots:
        crawl["respect_robots"] = False
    if args.allow_host:
        crawl["allow_hosts"] = args.allow_host
    if args.allow_private:
        crawl["allow_private"] = args.allow_private
    if args.delay is not None:
        crawl["per_host_delay"] = args.delay
    if args.concurrency is not None:
        crawl["per_host_concurrency"] = args.concurrency
    embed: dict = {}
    if args.model:
        embed["model"] = args.model
    if args.device:
        embed["device"] = args.device
    if args.threads is not None:
        embed["threads"] = args.threads
    settings: dict = {}
    if crawl:
        settings["crawl"] = crawl
    if embed:
        settings["embed"] = embed
    if args.batch_documents:
        settings["batch_documents"] = args.batch_documents
    runner = _runner(args)
    if runner:
        settings["runner"] = runner
    return settings


def _runner(args: argparse.Namespace) -> dict:
    runner: dict = {}
    for option, key in (("runner", "kind"), ("runner_address", "address"), ("workers", "workers"),
                        ("gpus_per_batch", "gpus"), ("parse_workers", "parse_workers")):
        if getattr(args, option, None) is not None:
            runner[key] = getattr(args, option)
    return runner


def _merged_settings(overrides: dict):
    """Environment settings with command-line overrides on top, validated now (not mid-run)."""
    from laminae.tasks.config import BuildSettings

    base = BuildSettings().model_dump()
    for key, value in overrides.items():
        if isinstance(value, dict):
            base[key].update(value)
        else:
            base[key] = value
    return BuildSettings(**base)


def _run_build(seeds: str, index: str, follow_links: int, overrides: dict, reembed: bool = False,
               wait: float | None = None) -> dict:
    from laminae.flows.preload import start_parse_workers

    settings = _merged_settings(overrides)
    with _lease(index, "laminae build", wait):
        start_parse_workers(index, settings)  # their processes start while this one imports the flows
        from laminae.flows.build import await_preload, build_index, preload_models

        preload_models(index, settings)
        prefect_api.install()  # the run's temporary Prefect server dies with it, even by SIGKILL
        try:
            return build_index(seeds=seeds, index=index, follow_links=follow_links,
                               settings=settings.model_dump(), reembed=reembed)
        finally:
            await_preload()  # a flow that failed before its own wait leaves the thread running


def _lease(index: str, command: str, wait: float | None):
    """The index's writer lease, taken here so that a second writer fails (or waits) before Prefect
    starts; the flow takes it again (re-entrant in one process) and names its run."""
    from laminae.tasks.storage.lease import writer_lease

    return writer_lease(index, None, command, wait)


def _finish(summary: dict, index: str, args: argparse.Namespace) -> int:
    import laminae

    status = summary["status"]
    if status == "failure":
        print(f"{getattr(args, 'command', 'build')} failed: no document could be indexed, nothing was published "
              f"(the index is as it was); errors: {summary['errors_by_stage']}", file=sys.stderr)
        return 1
    stats = laminae.open(index).stats()
    if getattr(args, "json", False):
        print(json.dumps(stats, indent=2, default=str))
    else:
        print(f"index {index} (manifest {stats['manifest_version']}): {status}")
        _print_stats(stats)
        from laminae.schemas.storage import IndexFiles

        if IndexFiles(index).exists("report.html"):
            print(f"report          {index.rstrip('/')}/report.html")
    return 1 if status == "partial" and getattr(args, "strict", False) else 0


def cmd_build(args: argparse.Namespace) -> int:
    from laminae.tasks.crawl.seeds import read_seeds

    read_seeds(args.seeds)  # fail on a bad seeds file before Prefect starts
    summary = _run_build(args.seeds, args.index, args.follow_links, _settings(args), args.reembed, args.wait)
    return _finish(summary, args.index, args)


def cmd_refresh(args: argparse.Namespace) -> int:
    from laminae.flows.build import refresh_index
    from laminae.tasks.crawl.seeds import read_seeds

    if args.seeds:
        read_seeds(args.seeds)
    with _lease(args.index, "laminae refresh", args.wait):
        prefect_api.install()
        summary = refresh_index(index=args.index, seeds=args.seeds, model=args.model, runner=_runner(args) or None,
                                allow_mass_delete=args.allow_mass_delete)
    changes = summary.get("changes", {})
    print(f"refresh: {changes.get('unchanged', 0)} unchanged, {changes.get('changed', 0)} changed, "
          f"{changes.get('added', 0)} added, {changes.get('removed', 0)} removed; {summary['embedded']} embedded")
    return _finish(summary, args.index, args)


def cmd_compact(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from laminae.tasks.config import BuildSettings
    from laminae.tasks.storage.index_store import IndexStore

    keep = args.keep if args.keep is not None else BuildSettings().keep_manifests
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-compact"
    with _lease(args.index, "laminae compact", args.wait) as lease:
        result = IndexStore(args.index).compact(keep, run_id, exclusive=lease.exclusive)
    if result["rolled_back"]:
        print(f"index {args.index}: {', '.join(result['rolled_back'])} held versions no manifest published (a run "
              "killed or failed); compacted from the latest manifest's versions, which stay the published state",
              file=sys.stderr)
    print(f"index {args.index}: manifest {result['manifest_version']}"
          f"{' published (compacted tables)' if result['published'] else ''}; snapshot {result['snapshot']}; "
          f"{result['versions_deleted']} table versions older than the newest {keep} manifests deleted")
    for warning in result["warnings"]:  # after publishing: the manifest stands
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from laminae.flows.serve import serve

    print(f"serving scheduled refreshes of {args.index} on {args.cron!r} (UTC); Ctrl-C stops", file=sys.stderr)
    prefect_api.install()
    serve(args.index, args.cron, args.name)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    import laminae

    try:
        stats = laminae.open(args.index, version=args.version).stats()
    except laminae.IndexOpenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(stats, indent=2, default=str))
    else:
        _print_stats(stats)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import laminae
    from laminae.schemas.storage import MANIFEST_DIR, IndexFiles
    from laminae.tasks.report.run_report import write_report

    if IndexFiles(args.index).exists(f"{MANIFEST_DIR}/LATEST"):  # published: damage is an error, not a page
        laminae.open(args.index).verify()
    try:
        path = write_report(args.index, args.out)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from laminae.flows.demo import SiteServer

    index = args.index or str(Path(tempfile.gettempdir()) / "laminae-demo-index")
    with SiteServer(port=args.port) as site, tempfile.TemporaryDirectory() as tmp:
        seeds = Path(tmp) / "seeds.txt"
        seeds.write_text("\n".join(site.seeds()) + "\n")
        print(f"serving the sample site ({site.directory}) at {site.base_url}; building {index}", file=sys.stderr)
        overrides = _settings(args)
        overrides.setdefault("crawl", {})["respect_robots"] = True
        summary = _run_build(str(seeds), index, args.follow_links, overrides, wait=args.wait)
    return _finish(summary, index, args)


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from laminae.mcp.access import McpConfigError, check_access
        from laminae.mcp.server import limits, serve
    except ImportError as exc:
        print(f"error: `laminae mcp` needs the mcp extra: pip install 'laminae[mcp]' ({exc})", file=sys.stderr)
        return 2
    try:  # every setting is checked before the index is opened
        access = check_access(args.http, args.allow_remote, args.token_file, args.allowed_host)
        deadline, workers = limits(args.deadline, args.workers)
    except McpConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    serve(args.index, access, version=args.version, warm=not args.no_warm, deadline=deadline, workers=workers)
    return 0


def _add_build_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--follow-links", type=int, default=0, metavar="N",
                   help="also fetch in-scope pages linked from the seeds, N links deep (default 0)")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="a host besides the seeds' hosts that may be fetched (repeatable)")
    p.add_argument("--allow-private", action="append", default=[], metavar="HOST_OR_NETWORK",
                   help="a host name or IP network (10.0.0.0/8) that may be fetched although it is private, "
                   "loopback or link-local (repeatable; a seed's own host always may)")
    p.add_argument("--no-robots", action="store_true", help="ignore robots.txt (only for your own sites)")
    p.add_argument("--delay", type=float, help="seconds between requests to one host")
    p.add_argument("--concurrency", type=int, help="requests in flight per host (default 4)")
    p.add_argument("--model", help="sentence-transformers model id or local path (default: bundled MiniLM)")
    p.add_argument("--device", help="auto | cpu | cuda | cuda:N (default auto)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--batch-documents", type=int, help="documents per pipeline batch (default 64)")
    _add_runner_options(p)
    p.add_argument("--json", action="store_true", help="print the stats as JSON")
    p.add_argument("--strict", action="store_true", help="exit 1 when some input failed (partial success)")
    _add_progress_option(p)
    _add_wait_option(p)


def _add_wait_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", nargs="?", type=float, const=float("inf"), metavar="SECONDS",
                   help="when another build or refresh is writing the index, wait for it (as long as it "
                        "takes, or SECONDS) instead of exiting with status 2")


def _add_runner_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runner", choices=("local", "dask", "ray"),
                   help="where batches run: local (default), or in parallel on Dask or Ray through Prefect")
    p.add_argument("--runner-address", metavar="ADDR",
                   help="join this cluster (tcp://scheduler:8786, ray://head:10001); default: start a local one")
    p.add_argument("--workers", type=int, help="workers of a local Dask/Ray cluster (default 2)")
    p.add_argument("--gpus-per-batch", type=float, help="Ray: GPUs each batch task requests (e.g. 1)")
    p.add_argument("--parse-workers", type=int, metavar="N",
                   help="parse each batch's pages in N worker processes, each page under its deadline "
                        "(default 1; more is worth it on many cores, most of all when embedding runs on a GPU; "
                        "0: in the flow's process, no deadline and no crash isolation, for debugging)")


def _add_progress_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", choices=("auto", "on", "off"),
                   help="progress bars on stderr (default auto: only when stderr is a terminal)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="laminae", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="crawl the seeds and build or update an index")
    p.add_argument("--seeds", required=True,
                   help="file of URLs (http(s), sitemaps, file:///folder/), one per line, or JSONL with a url "
                   "field; or a folder, whose HTML and PDF files are indexed")
    p.add_argument("--index", required=True, help="index directory (created if missing)")
    p.add_argument("--reembed", action="store_true",
                   help="if the index holds another model's vectors, re-embed everything with --model")
    _add_build_options(p)
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("refresh", help="re-fetch an index's seeds; re-parse and re-embed only what changed")
    p.add_argument("--index", required=True, help="an index built with `laminae build`")
    p.add_argument("--seeds", help="replace the remembered seed list with this file (or folder)")
    p.add_argument("--model", help="move the index to this embedding model (re-embeds everything)")
    p.add_argument("--allow-mass-delete", action="store_true",
                   help="delete the documents of gone or no longer reached pages even when they are more than "
                   "max_delete_count (20) and max_delete_fraction (0.5) of the index (else none is deleted "
                   "and a warning says so)")
    p.add_argument("--json", action="store_true", help="print the stats as JSON")
    p.add_argument("--strict", action="store_true", help="exit 1 when some input failed (partial success)")
    _add_progress_option(p)
    _add_runner_options(p)
    _add_wait_option(p)
    p.set_defaults(func=cmd_refresh)

    p = sub.add_parser("compact", help="compact an index's tables and delete table versions older than the "
                       "newest manifests (builds and refreshes do this after publishing)")
    p.add_argument("--index", required=True, help="an index built with `laminae build`")
    p.add_argument("--keep", type=int, metavar="N",
                   help="manifests whose table versions are kept (default: LAMINAE_KEEP_MANIFESTS, 2)")
    _add_wait_option(p)
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser("serve", help="refresh an index on a cron schedule (Prefect serve on this machine)")
    p.add_argument("--index", required=True, help="an index built with `laminae build`")
    p.add_argument("--cron", default="0 3 * * *", help="cron schedule, UTC (default '0 3 * * *': 03:00 daily)")
    p.add_argument("--name", help="deployment name (default refresh-<index folder>)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("stats", help="print an index's counts")
    p.add_argument("--index", required=True)
    p.add_argument("--version", type=int, help="manifest version (default: latest)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("report", help="write an index's HTML report (charts of its last run and its history)")
    p.add_argument("--index", required=True)
    p.add_argument("--out", help="output file (default <index>/report.html)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("demo", help="serve the bundled sample site on 127.0.0.1 and index it")
    p.add_argument("--index", help="index directory (default: <tmp>/laminae-demo-index)")
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 to serve the site on (default 8765)")
    _add_build_options(p)
    p.set_defaults(func=cmd_demo)

    from laminae.flows import terminal

    terminal.add_commands(sub)

    p = sub.add_parser("mcp", help="serve an index to agents over the Model Context Protocol (stdio or HTTP)")
    p.add_argument("--index", required=True, help="index directory or object-store URI")
    p.add_argument("--http", metavar="HOST:PORT",
                   help="streamable HTTP on HOST:PORT, path /mcp (default: stdio, for a client that starts the server)")
    p.add_argument("--version", type=int, help="manifest version to pin (default: the latest; the use_latest tool moves)")
    p.add_argument("--no-warm", action="store_true",
                   help="do not load the graph and the query model at start (the first question does)")
    p.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="answer a tool call still running after SECONDS with a tool error (default "
                   "$LAMINAE_MCP_DEADLINE or 30)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="tool calls read on N threads at once (default $LAMINAE_MCP_WORKERS or 4)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow --http on an address beyond loopback (needs a bearer token)")
    p.add_argument("--token-file", metavar="PATH",
                   help="file holding the bearer token every HTTP request must carry (or set $LAMINAE_MCP_TOKEN)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a Host name clients reach the HTTP server by, besides loopback and the bound address "
                   "(repeatable)")
    p.set_defaults(func=cmd_mcp)

    args = parser.parse_args(argv)
    if getattr(args, "progress", None):
        os.environ["LAMINAE_PROGRESS"] = args.progress
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from pydantic import ValidationError

    from laminae.schemas.errors import LaminaeError

    try:
        return args.func(args)
    except LaminaeError as exc:
        if exc.exit_code is None:  # a fault, not an input to fix: its traceback says where
            raise
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ValidationError as exc:  # settings pydantic refused
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run() -> None:
    """The ``laminae`` command: ``main``, then the process ends without the interpreter walking
    every object of torch, transformers and Prefect once more as it tears the modules down (the
    garbage collector's last pass, 1.7-1.9 s after a build here); atexit handlers still run."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
