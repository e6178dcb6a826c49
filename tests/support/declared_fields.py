"""What a step's code reads and writes of the record it is handed, read from its source: the check
behind the declared ``reads``/``writes`` of the batch's ``STAGES`` and of the run's ``RUN``.

Reads the functions' source (``inspect``, ``ast``); writes nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from collections.abc import Callable, Iterable
from functools import cached_property

MUTATORS = {"append", "extend", "update", "add", "setdefault", "insert", "pop", "clear", "remove"}


def touched(fn: Callable, helper: Callable[[Callable, str], Callable],
            output: tuple[str, dict[str, set[str]]] | None = None) -> tuple[set[str], set[str]]:
    """The fields of ``fn``'s first parameter that ``fn`` uses, and those among them it assigns,
    sets an item of or changes through a mutator (``MUTATORS``); a function ``fn`` hands the
    record to is read too (``helper(fn, name)`` finds it, and fails where it may not be handed
    the record). ``output``: (the name of a result type, the fields each of its keywords adds to)."""
    func = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    record = func.args.args[0].arg

    def is_record(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == record

    def field_of(node: ast.AST) -> str | None:
        return node.attr if isinstance(node, ast.Attribute) and is_record(node.value) else None

    used: set[str] = set()
    written: set[str] = set()
    for node in ast.walk(func):
        if (name := field_of(node)) is not None:
            used.add(name)
            if isinstance(node.ctx, ast.Store):
                written.add(name)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and (name := field_of(node.value)):
            written.add(name)
        if not isinstance(node, ast.Call):
            continue
        if output is not None and isinstance(node.func, ast.Name) and node.func.id == output[0]:
            for keyword in node.keywords:
                used |= output[1][keyword.arg]
                written |= output[1][keyword.arg]
        if isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS and (name := field_of(node.func.value)):
            written.add(name)
        if isinstance(node.func, ast.Name) and any(is_record(arg) for arg in node.args):
            more_used, more_written = touched(helper(fn, node.func.id), helper, output)
            used |= more_used
            written |= more_written
    return used, written


def check_declared(steps: Iterable, record: type, in_place: set[str],
                   touched_by: Callable[[Callable], tuple[set[str], set[str]]]) -> set[str]:
    """Assert that each step's declared ``reads`` and ``writes`` are fields of ``record`` and are
    exactly what its code uses, that it writes nothing it does not declare, and that it declares
    no write its code does not make (``in_place``: fields written through the rows or store they
    hold, which the code cannot show). Returns the record's fields."""
    fields = {f.name for f in dataclasses.fields(record)} | {
        name for name, value in vars(record).items() if isinstance(value, property | cached_property)}
    for step in steps:
        used, written = touched_by(step.run)
        reads, writes = set(step.reads), set(step.writes)
        assert reads | writes <= fields, (step.name, (reads | writes) - fields)
        assert used == reads | writes, (step.name, used ^ (reads | writes))
        assert written <= writes, (step.name, written - writes)
        assert writes <= written | in_place, (step.name, writes - written - in_place)
    return fields
