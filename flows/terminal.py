"""``laminae search``, ``documents``, ``components``, ``hop`` and ``get``: an index read from the
shell, as tables or JSON.

Reads one index through the public reader (``laminae.open``) and shows what ``laminae.views``
makes of its results: rich tables on a terminal, JSON with ``--json``. One command per reader move
``laminae.moves`` offers to the terminal, its options made from the move's spec; ``get --save-images DIR``
writes pictures and object crops as files. Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import laminae
from laminae import moves
from laminae.views import MAX_CHARS, MAX_ROWS, describe, hit_view, picture

TERMINAL_TEXT = 240  # characters of a hit's text in a terminal table (--json shows --max-chars)


def _console():
    from rich.console import Console

    return Console(soft_wrap=False, highlight=False)


def _print_json(payload: Any) -> None:
    print(json.dumps(payload, indent=2, ensure_ascii=False, default=str))


def _kinds(value: str | None) -> list[str] | None:
    return [k.strip() for k in value.split(",") if k.strip()] if value else None


def _show_hits(title: str, hits: list[dict]) -> None:
    """One block per hit: rank, score, kind, document title and id on a line, the text below it."""
    from rich.padding import Padding
    from rich.text import Text

    console = _console()
    console.print(Text(title, style="bold"))
    for rank, hit in enumerate(hits, 1):
        text = hit["text"] or ""
        short = text if len(text) <= TERMINAL_TEXT else text[:TERMINAL_TEXT].rstrip() + " …"
        head = Text.assemble((f"{rank:>3}. ", "bold"), (f"{hit['score']:.4f} ", "cyan"), (f"{hit['kind']:<9} ", "green"),
                             (hit["title"] or hit["document_id"], "bold"), ("  " + hit["id"], "dim"))
        console.print(head)
        console.print(Padding(Text(short), (0, 0, 0, 5)))


def _open(args: argparse.Namespace) -> laminae.Index:
    return laminae.open(args.index, version=getattr(args, "version", None))


def _move_command(spec: moves.MoveSpec) -> Callable[[argparse.Namespace], int]:
    """The command of one reader move: its hits, as a table or JSON; an option left out keeps the
    reader's default."""
    def run(args: argparse.Namespace) -> int:
        index = _open(args)
        given = {}
        for arg in spec.arguments:
            value = getattr(args, arg.name)
            if arg.type is list and value is not None:  # repeated options, each maybe comma-separated
                value = [item.strip() for option in value for item in option.split(",") if item.strip()]
            if value is not None:
                given[arg.name] = value
        hits = getattr(index, spec.name)(args.query, **given)
        views = [hit_view(h, args.max_chars) for h in hits]
        shown = ", ".join(f"{name}={value}" for name, value in given.items() if not isinstance(value, list))
        if args.json:
            _print_json({"manifest_version": index.version, "hits": views})
        elif views:
            _show_hits(f"{len(views)} {spec.returns} from {spec.name}{f' ({shown})' if shown else ''} in "
                       f"{args.index} (manifest {index.version})", views)
        else:
            print(f"no {spec.returns} from {spec.name}", file=sys.stderr)
        return 0

    return run


def _add_move(sub: argparse._SubParsersAction, spec: moves.MoveSpec, common: Callable[[argparse.ArgumentParser], None]
              ) -> None:
    """The parser of one reader move: an option per argument of its spec."""
    p = sub.add_parser(spec.name, help=spec.description.split(". ")[0], description=spec.description)
    p.add_argument("query", help="the question or search words")
    common(p)
    for arg in spec.arguments:
        flags = [f"--{name.replace('_', '-')}" for name in (arg.name, *arg.aliases)]
        shown = "" if arg.required or arg.type is list else f" (default {arg.default})"
        options: dict[str, Any] = {"dest": arg.name, "default": None, "help": arg.description + shown}
        if arg.type is list:
            options.update(action="append", metavar="ID,...", required=arg.required)
        else:
            options.update(type=arg.type, metavar=None if arg.choices else arg.type.__name__.upper())
            if arg.choices:
                options["choices"] = arg.choices
        p.add_argument(*flags, **options)
    p.set_defaults(func=_move_command(spec))


def cmd_get(args: argparse.Namespace) -> int:
    index = _open(args)
    views, nodes, unknown = describe(index, args.ids, args.max_chars, args.max_rows)
    saved = _save_pictures(nodes, Path(args.save_images)) if args.save_images else {}
    for view in views:
        if view["id"] in saved:
            view["saved_image"] = saved[view["id"]]
    if args.json:
        _print_json({"manifest_version": index.version, "nodes": views, "unknown_ids": unknown})
    else:
        for view in views:
            _show_node(view)
    if unknown:
        print(f"unknown id(s) in manifest {index.version}: {', '.join(unknown)}", file=sys.stderr)
    return 0 if views else 1


def _save_pictures(nodes: list[dict], folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    saved = {}
    for node in nodes:
        found = picture(node)
        if found:
            data, mime = found
            path = folder / f"{node['id']}.{mime.rpartition('/')[2].replace('jpeg', 'jpg') or 'bin'}"
            path.write_bytes(data)
            saved[node["id"]] = str(path)
    return saved


def _show_node(view: dict) -> None:
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    console = _console()
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold", no_wrap=True)
    fields.add_column()
    skip = {"id", "text", "summary", "header", "rows", "cells"}
    for key, value in view.items():
        if key not in skip and value not in (None, [], ""):
            fields.add_row(key, Text(" › ".join(value) if key == "section_path" else str(value)))
    body: list[Any] = [fields]
    for key in ("summary", "text"):
        if view.get(key):
            body.append(Text(f"\n{view[key]}"))
    if view.get("cells"):
        body.append(Text("\n" + " | ".join(f"{h}: {c}" for h, c in zip(view["header"], view["cells"], strict=False))))
    if view.get("rows"):
        table = Table(*(view.get("header") or []), show_lines=False, expand=True)
        for row in view["rows"]:
            table.add_row(*(Text(c or "") for c in row))
        body.append(table)
        if view["rows_total"] > len(view["rows"]):
            more = view["rows_total"] - len(view["rows"])
            body.append(Text(f"… {more} more row{'s' if more > 1 else ''} (--max-rows)"))
    from rich.console import Group

    console.print(Panel(Group(*body), title=f"{view['id']} (layer {view['layer']}, {view['kind']})",
                        title_align="left"))


def add_commands(sub: argparse._SubParsersAction) -> None:
    """The reading commands' parsers."""
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--index", required=True, help="index directory or object-store URI")
        p.add_argument("--version", type=int, help="manifest version (default: the latest)")
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
        p.add_argument("--max-chars", type=int, default=MAX_CHARS,
                       help=f"characters of each text before it is cut (default {MAX_CHARS})")

    for spec in moves.offered("terminal"):
        _add_move(sub, spec, common)

    p = sub.add_parser("get", help="show nodes by id: text, document, section, table rows, pictures")
    p.add_argument("ids", nargs="+", metavar="ID")
    common(p)
    p.add_argument("--max-rows", type=int, default=MAX_ROWS, help=f"rows of a table (default {MAX_ROWS})")
    p.add_argument("--save-images", metavar="DIR", help="write pictures and object crops into DIR")
    p.set_defaults(func=cmd_get)
